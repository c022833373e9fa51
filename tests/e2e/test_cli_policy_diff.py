"""``gpucap policy diff`` and ``gpucap policy apply --allow-deletes`` against a running API
server (real gRPC, real store): what an apply would change, field by field, with diff's exit
codes; an apply that deletes without the marker refused and the active policy kept; the
model listing's OWNER column."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import api_model_spec, edited, example_policy, without_llama_8b


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_diff_lists_changes_field_by_field_and_exits_like_diff(
    gpucap: Gpucap, api: Daemon, tmp_path: Path
) -> None:
    same = _write(tmp_path, "same.yaml", example_policy())
    fresh = gpucap("policy", "diff", str(same))
    assert fresh.exit_code == 1, fresh.output  # a new customer: everything is created
    assert fresh.stdout.splitlines()[0] == "+ create customer acme"
    assert "+ create model llama-70b (replicas 1..40)" in fresh.stdout

    assert gpucap("policy", "apply", str(same)).exit_code == 0
    unchanged = gpucap("policy", "diff", str(same))
    assert unchanged.exit_code == 0, unchanged.output
    assert unchanged.stdout.strip() == f"{same}: no differences from the active policy"

    text = edited(without_llama_8b(example_policy()), "max_replicas: 40", "max_replicas: 44")
    changed = _write(tmp_path, "changed.yaml", text)
    out = gpucap("policy", "diff", str(changed))
    assert out.exit_code == 1
    lines = out.stdout.splitlines()
    i = lines.index("~ change model llama-70b")
    assert lines[i + 1] == "    max_replicas: 40 -> 44"
    assert "- delete model llama-8b (no live replicas; needs allow_deletes)" in lines
    assert any(x.startswith("- delete pool acme/acme-aws/us-east-1/p5.4xlarge") for x in lines)
    line = text.splitlines().index("models:") + 1
    assert f"{changed}:{line}:1: models: would delete model llama-8b" in out.stderr
    assert out.stderr.splitlines()[-1] == "error: the daemon would refuse this apply"

    data = json.loads(gpucap("policy", "diff", str(changed), "-o", "json").stdout)
    change = next(c for c in data["diff"]["changes"] if c["name"] == "llama-70b")
    assert change["fields"] == [{"path": "max_replicas", "before": "40", "after": "44"}]
    assert [p["field"] for p in data["refusals"]] == ["models"]
    allowed = json.loads(
        gpucap("policy", "diff", str(changed), "--allow-deletes", "-o", "json").stdout
    )
    assert allowed["refusals"] == []
    # A diff changes nothing.
    assert json.loads(gpucap("policy", "show", "-o", "json").stdout)["version"] == 1

    bad = _write(
        tmp_path, "bad.yaml", edited(example_policy(), "max_replicas: 40", "max_replicas: -1")
    )
    trouble = gpucap("policy", "diff", str(bad))
    assert trouble.exit_code == 2  # as diff's trouble: not a difference
    assert trouble.stderr.splitlines() == gpucap("policy", "validate", str(bad)).stderr.splitlines()


def test_apply_that_deletes_needs_the_marker_or_the_flag(
    gpucap: Gpucap, api: Daemon, tmp_path: Path
) -> None:
    assert gpucap("policy", "apply", "-", input=example_policy()).exit_code == 0
    smaller = _write(tmp_path, "smaller.yaml", without_llama_8b(example_policy()))

    refused = gpucap("policy", "apply", str(smaller))

    assert refused.exit_code == 1
    assert "models: would delete model llama-8b" in refused.stderr
    assert refused.stderr.splitlines()[-1].startswith("error: policy rejected by the daemon")
    assert json.loads(gpucap("policy", "show", "-o", "json").stdout)["version"] == 1
    events = json.loads(gpucap("events", "-o", "json").stdout)["events"]
    assert any(e["kind"] == "policy.refused" for e in events)

    applied = gpucap("policy", "apply", str(smaller), "--allow-deletes")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.startswith("applied: acme policy v2")


def test_models_show_their_owner(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    api.service.deploy_model("acme", api_model_spec())
    table = gpucap("models").stdout
    assert "OWNER" in table and "SOURCE" not in table
    rows = {
        line.split("│")[2].strip(): line.split("│")[3].strip()
        for line in table.splitlines()
        if line.startswith("│ acme")
    }
    data = json.loads(gpucap("models", "-o", "json").stdout)
    owners = {m["name"]: m["source"] for m in data["models"]}
    assert (
        owners
        == rows
        == {
            "llama-70b": "policy",
            "llama-8b": "policy",
            "deepseek-r1": "policy",
            "mistral-7b": "api",
        }
    )


def test_validate_warns_about_an_unversioned_file(gpucap: Gpucap, tmp_path: Path) -> None:
    old = _write(
        tmp_path,
        "old.yaml",
        example_policy().replace("apiVersion: gpucap.dev/v1\nkind: Policy\n", ""),
    )
    result = gpucap("policy", "validate", str(old))
    assert result.exit_code == 0
    assert result.stderr.startswith(f"{old}: warning: no apiVersion and kind; read as ")
    assert "ok (customer acme" in result.stdout
