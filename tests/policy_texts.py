"""Policy texts shared by the service, gRPC and CLI tests: the committed example policy and
small edits of it (each edit is a plain text replacement, so a test shows what it changed)."""

from __future__ import annotations

from pathlib import Path

from schema.policy_includes import read_policy_text

EXAMPLE_POLICY_PATH = Path(__file__).resolve().parents[1] / "examples" / "policy.yaml"


def example_policy() -> str:
    # As the CLI and the daemon read it: account includes expanded (schema/policy_includes.py).
    return read_policy_text(EXAMPLE_POLICY_PATH)


def edited(text: str, old: str, new: str) -> str:
    """``text`` with exactly one occurrence of ``old`` replaced (fails loudly otherwise, so a
    change to the example cannot silently turn a test into a no-op)."""
    assert text.count(old) == 1, f"expected exactly one {old!r} in the policy"
    return text.replace(old, new)


def without_llama_8b(text: str) -> str:
    """The example policy without its llama-8b model (the only 1xH100 model)."""
    start = text.index("  - name: llama-8b")
    end = text.index("  - name: deepseek-r1")
    return text[:start] + text[end:]


def api_model_spec(name: str = "mistral-7b", **overrides: object) -> dict[str, object]:
    """A model spec as deployment tooling sends it through the API."""
    spec: dict[str, object] = {
        "name": name,
        "shapes": [{"shape": "1xH100", "max_concurrency": 16}],
        "min_replicas": 0,
        "max_replicas": 4,
        "clouds": ["aws"],
    }
    spec.update(overrides)
    return spec


def engines_policy(models: dict[str, tuple[str, int]]) -> str:
    """acme's policy with one 1xH100 model on AWS per entry, ``name: (engine, port)``."""
    body = "".join(
        f"""
  - name: {name}
    shapes: [{{shape: 1xH100, max_concurrency: 16}}]
    clouds: [aws]
    runtime: {{engine: {engine}, port: {port}}}
"""
        for name, (engine, port) in models.items()
    )
    return f"""apiVersion: gpucap.dev/v1
kind: Policy
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    owner: customer
    regions: [us-east-1]
    credentials: {{role_arn: "arn:aws:iam::111122223333:role/gpucap"}}
models:{body}"""


# A policy that stages weights: one customer-owned AWS account with a staging bucket per
# region, one model whose weights are staged where it runs and one region ahead.
STAGING_POLICY = """\
apiVersion: gpucap.dev/v1
kind: Policy
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1, us-west-2]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap
    staging:
      bucket: acme-weights-{region}
      budget_gb: 1
models:
  - name: llama
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    weights:
      uri: s3://acme-origin/llama/
      size_gb: 0.016
      mirrors: [gs://acme-origin/llama/]
    staging:
      regions_ahead: 1
"""
