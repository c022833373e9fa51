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
