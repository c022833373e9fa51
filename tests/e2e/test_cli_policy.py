"""``gpucap policy validate|apply|show|schema``."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import EXAMPLE_POLICY_PATH, edited, example_policy

BAD_EDITS = [
    ("max_replicas: 40", "max_replicas: -1"),
    ("    priority: 50\n", "    priority: 50\n    colour: blue\n"),
]


@pytest.fixture
def offline() -> Gpucap:
    """The CLI pointed at a port nothing listens on: proves the command needs no daemon."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return Gpucap(f"127.0.0.1:{port}")


def _bad_policy(tmp_path: Path) -> Path:
    text = example_policy()
    for old, new in BAD_EDITS:
        text = edited(text, old, new)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def _line_of(path: Path, needle: str) -> int:
    return path.read_text().splitlines().index(needle) + 1


def test_validate_good_file_offline(offline: Gpucap) -> None:
    result = offline("policy", "validate", str(EXAMPLE_POLICY_PATH))
    assert result.exit_code == 0, result.output
    assert "ok (customer acme, 3 accounts, 3 models)" in result.stdout


def test_validate_bad_file_prints_one_line_per_problem(offline: Gpucap, tmp_path: Path) -> None:
    bad = _bad_policy(tmp_path)
    result = offline("policy", "validate", str(bad))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{bad}:{_line_of(bad, '    max_replicas: -1')}:5: models[0].max_replicas: "
        "Input should be greater than or equal to 0 (got -1)",
        f"{bad}:{_line_of(bad, '    colour: blue')}:5: models[2].colour: unknown field",
    ]


def test_validate_several_files_stdin_and_json(offline: Gpucap, tmp_path: Path) -> None:
    bad = _bad_policy(tmp_path)
    result = offline("policy", "validate", str(EXAMPLE_POLICY_PATH), str(bad), "-o", "json")
    assert result.exit_code == 1
    good_report, bad_report = json.loads(result.stdout)
    assert good_report["valid"] and good_report["customer"] == "acme"
    assert not bad_report["valid"]
    assert [p["field"] for p in bad_report["problems"]] == [
        "models[0].max_replicas",
        "models[2].colour",
    ]
    assert bad_report["problems"][0]["line"] == _line_of(bad, "    max_replicas: -1")

    piped = offline("policy", "validate", "-", input="customer: acme\naccounts: 3\n")
    assert piped.exit_code == 1
    assert piped.stderr.startswith("<stdin>:2:1: accounts: Input should be a valid list")

    missing = offline("policy", "validate", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 1 and "cannot read file" in missing.stderr


def test_apply_show_and_reapply(gpucap: Gpucap, api: Daemon) -> None:
    applied = gpucap("policy", "apply", str(EXAMPLE_POLICY_PATH), "--as", "alice@ops")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.startswith("applied: acme policy v1 (sha256 ")
    again = gpucap("policy", "apply", str(EXAMPLE_POLICY_PATH))
    assert again.stdout.strip() == "unchanged: acme policy v1 is already active"

    shown = gpucap("policy", "show")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == example_policy()  # saveable as-is
    assert "acme policy v1 (active), applied by alice@ops" in shown.stderr
    data = json.loads(gpucap("policy", "show", "acme", "-o", "json").stdout)
    assert (data["version"], data["applied_by"], data["active"]) == (1, "alice@ops", True)
    assert data["source"] == str(EXAMPLE_POLICY_PATH)

    v2 = edited(example_policy(), "max_replicas: 40", "max_replicas: 44")
    out = gpucap("policy", "apply", "-", input=v2)
    assert out.exit_code == 0 and "acme policy v2" in out.stdout
    old = gpucap("policy", "show", "acme", "--version", "1")
    assert old.stdout == example_policy() and "(inactive)" in old.stderr
    unknown = gpucap("policy", "show", "nobody")
    assert unknown.exit_code == 1 and "not found" in unknown.stderr


def test_apply_bad_policy_prints_the_daemons_problems_and_keeps_the_active_one(
    gpucap: Gpucap, api: Daemon, tmp_path: Path
) -> None:
    assert gpucap("policy", "apply", str(EXAMPLE_POLICY_PATH)).exit_code == 0
    bad = _bad_policy(tmp_path)

    rejected = gpucap("policy", "apply", str(bad))
    offline = gpucap("policy", "validate", str(bad))

    assert rejected.exit_code == 1
    problem_lines = rejected.stderr.splitlines()[:-1]
    assert problem_lines == offline.stderr.splitlines()  # same lines, from the daemon
    assert rejected.stderr.splitlines()[-1] == ("error: policy rejected by the daemon (2 problems)")
    active = json.loads(gpucap("policy", "show", "-o", "json").stdout)
    assert active["version"] == 1 and active["yaml"] == example_policy()


def test_apply_with_unreachable_daemon(offline: Gpucap) -> None:
    result = offline("policy", "apply", str(EXAMPLE_POLICY_PATH), "--timeout", "1")
    assert result.exit_code == 3 and "cannot reach the gpucap daemon" in result.stderr


def test_schema_validates_the_example_policy(offline: Gpucap) -> None:
    result = offline("policy", "schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "gpucap customer policy"
    example = YAML(typ="safe").load(example_policy())
    jsonschema.Draft202012Validator(schema).validate(example)
    broken = {**example, "customer": "Not A Name"}
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(broken))
