"""Every gpucap file names its format (issue 27 item 6): ``apiVersion: gpucap.dev/v1`` and its
``kind`` (Policy, Account, Fleet, Clouds, DaemonConfig). A file without both is read as the
current version with a deprecation warning naming the file; a wrong kind or an unknown
apiVersion is a problem naming file, line and field. And ``gpucap policy validate`` reports
every problem in one pass: structural and cross-field ones together."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from schema.account_file import parse_account
from schema.clouds_file import CloudsError, parse_clouds
from schema.daemon_config import DaemonConfig
from schema.fleet import FleetError, parse_fleet
from schema.policy_file import (
    API_VERSION,
    PolicyError,
    UnversionedFileWarning,
    parse_policy,
    parse_yaml_model,
)
from tests.policy_texts import edited, example_policy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HEADER = f"apiVersion: {API_VERSION}\nkind: Policy\n"


def _unversioned_policy() -> str:
    text = example_policy()
    assert HEADER in text  # (the example carries it)
    return text.replace(HEADER, "")


def _problems(text: str, source: str = "acme.yaml") -> list[tuple[int | None, str, str]]:
    with pytest.raises(PolicyError) as err:
        parse_policy(text, source)
    assert all(p.file == source for p in err.value.problems)
    return [(p.line, p.field, p.reason) for p in err.value.problems]


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(needle))


def test_a_versioned_policy_reads_without_warnings() -> None:
    loaded = parse_policy(example_policy(), "acme.yaml")
    assert loaded.warnings == ()


def test_an_unversioned_policy_reads_as_the_current_version_with_a_warning() -> None:
    loaded = parse_policy(_unversioned_policy(), "old/acme.yaml")
    assert loaded.policy == parse_policy(example_policy()).policy
    (warning,) = loaded.warnings
    assert warning.startswith("old/acme.yaml: warning: no apiVersion and kind; read as ")
    assert "apiVersion: gpucap.dev/v1" in warning and "kind: Policy" in warning


@pytest.mark.parametrize(
    ("old", "new", "field", "reason"),
    [
        ("kind: Policy", "kind: Fleet", "kind", "expected kind Policy for this file (got 'Fleet')"),
        (
            f"apiVersion: {API_VERSION}",
            "apiVersion: gpucap.dev/v9",
            "apiVersion",
            "unknown apiVersion 'gpucap.dev/v9' (known: gpucap.dev/v1)",
        ),
    ],
)
def test_a_wrong_header_names_file_line_and_field(
    old: str, new: str, field: str, reason: str
) -> None:
    text = edited(example_policy(), old, new)
    assert _problems(text) == [(_line(text, f"{field}:"), field, reason)]


@pytest.mark.parametrize(
    ("dropped", "field", "reason"),
    [
        (f"apiVersion: {API_VERSION}\n", "apiVersion", "required with kind (apiVersion: "),
        ("kind: Policy\n", "kind", "required with apiVersion (kind: Policy)"),
    ],
)
def test_half_a_header_is_a_problem(dropped: str, field: str, reason: str) -> None:
    ((line, got_field, got_reason),) = _problems(edited(example_policy(), dropped, ""))
    assert (line, got_field) == (1, field) and got_reason.startswith(reason)


def test_a_wrong_header_is_reported_with_the_other_problems() -> None:
    text = edited(example_policy(), "kind: Policy", "kind: Policies")
    text = edited(text, "max_replicas: 40", "max_replicas: -1")
    assert [f for _, f, _ in _problems(text)] == ["kind", "models[0].max_replicas"]


def test_validate_reports_structural_and_cross_field_problems_in_one_pass() -> None:
    text = edited(example_policy(), "max_replicas: 16", "max_replicas: many")  # llama-8b
    text = edited(text, "regions: [us-central1, us-east4]", "regions: [us-central1, mars-1]")
    # deepseek-r1: min above max, a cross-field check of a model that is well-formed
    text = edited(
        text, "    min_replicas: 0\n    max_replicas: 8", "    min_replicas: 9\n    max_replicas: 8"
    )
    problems = _problems(text)
    assert [(f, r[:40]) for _, f, r in problems] == [
        ("accounts[1].regions[1]", "unknown gcp region 'mars-1' (known: us-c"),
        ("models[1].max_replicas", "Input should be a valid integer, unable "),
        ("models[2].min_replicas", "min_replicas (9) is greater than max_rep"),
    ]
    lines = [line for line, _, _ in problems]
    assert lines == [
        _line(text, "    regions: [us-central1, mars-1]"),
        _line(text, "    max_replicas: many"),
        _line(text, "    min_replicas: 9"),
    ]


def test_checks_that_read_a_broken_section_are_left_out() -> None:
    # The only GCP account is broken: "gcp has no account" would be noise beside it.
    text = edited(example_policy(), "    cloud: gcp\n", "    cloud: gcp\n    colour: blue\n")
    assert [f for _, f, _ in _problems(text)] == ["accounts[1].colour"]


def _account(text: str, source: str) -> object:
    return parse_account(text, source)


def _fleet(text: str, source: str) -> object:
    return parse_fleet(text, source)


def _clouds(text: str, source: str) -> object:
    return parse_clouds(text, source)


def _daemon(text: str, source: str) -> object:
    return parse_yaml_model(text, DaemonConfig, source, kind="DaemonConfig")[0]


DAEMON_CONFIG = f"apiVersion: {API_VERSION}\nkind: DaemonConfig\nlog_level: debug\n"


@pytest.mark.parametrize(
    ("kind", "text", "parse", "error"),
    [
        ("Account", (EXAMPLES / "accounts" / "aws-shared.yaml").read_text(), _account, PolicyError),
        ("Fleet", (EXAMPLES / "fleet-8b.yaml").read_text(), _fleet, FleetError),
        ("Clouds", (EXAMPLES / "clouds.yaml").read_text(), _clouds, CloudsError),
        ("DaemonConfig", DAEMON_CONFIG, _daemon, PolicyError),
    ],
)
def test_every_file_kind_checks_its_header(
    kind: str,
    text: str,
    parse: Callable[[str, str], object],
    error: type[PolicyError],
    recwarn: pytest.WarningsRecorder,
) -> None:
    assert f"kind: {kind}\n" in text
    parse(text, "f.yaml")  # versioned: read, no warning
    assert not [w for w in recwarn if w.category is UnversionedFileWarning]

    wrong = text.replace(f"kind: {kind}\n", "kind: Policy\n")
    with pytest.raises(error) as err:
        parse(wrong, "f.yaml")
    (problem,) = err.value.problems
    assert (problem.file, problem.field) == ("f.yaml", "kind")
    assert problem.line == _line(wrong, "kind:")
    assert problem.reason == f"expected kind {kind} for this file (got 'Policy')"

    unversioned = text.replace(f"apiVersion: {API_VERSION}\nkind: {kind}\n", "")
    with pytest.warns(UnversionedFileWarning, match=f"kind {kind}") as warned:
        parse(unversioned, "old.yaml")
    assert warned[0].filename == "old.yaml"
