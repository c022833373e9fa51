"""Policy and other YAML files cannot make gpucap do unbounded work (issue 26, item 7):
replica counts, list sizes and string lengths are bounded with the usual file/line/field
problems, and a YAML document is refused before it is expanded when its aliases or nesting
go past the limits (a 2 KB alias bomb took 36 s of CPU and 340 MB)."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from controlplane.api.errors import MAX_VIOLATIONS, InvalidArgumentError
from schema.account_file import load_account_file
from schema.daemon_config import DaemonConfig
from schema.policy import ECHO_CHARS, MAX_REPLICAS, Problem, echo
from schema.policy_file import (
    MAX_PROBLEMS,
    MAX_YAML_ALIASES,
    MAX_YAML_DEPTH,
    PolicyError,
    parse_policy,
    parse_yaml_model,
)
from schema.policy_includes import read_policy_text
from tests.policy_texts import edited
from tests.unit.test_policy_file import BASE


def _problems(text: str, source: str = "p.yaml") -> list[Problem]:
    with pytest.raises(PolicyError) as err:
        parse_policy(text, source)
    return err.value.problems


def _line(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize(
    ("old", "new", "field", "reason"),
    [
        ("min_replicas: 1", "min_replicas: 1000000", "models[0].min_replicas", "10000"),
        (
            "max_replicas: 4",
            "max_replicas: 99999999999999999999",
            "models[0].max_replicas",
            "10000",
        ),
        (
            "max_concurrency: 64",
            "max_concurrency: 4294967296",
            "models[0].shapes[0].max_concurrency",
            "4294967295",
        ),
        (
            "- name: llama-70b",
            "- latency_slo_ms: 36000001\n    name: llama-70b",
            "models[0].latency_slo_ms",
            "3600000",
        ),
        (
            "[us-east-1, us-west-2]",
            "[" + ", ".join(["us-east-1"] * 65) + "]",
            "accounts[0].regions",
            "at most 64 items",
        ),
    ],
)
def test_counts_and_sizes_are_bounded_with_file_line_and_field(
    old: str, new: str, field: str, reason: str
) -> None:
    text = edited(BASE, old, new)
    [p] = _problems(text)
    assert (p.file, p.field) == ("p.yaml", field)
    assert p.line == _line(text, new.split(":")[0].strip("- ").split("\n")[0])
    assert reason in p.reason


def test_a_model_that_may_run_only_on_shared_accounts_fits_the_overflow_cap() -> None:
    text = edited(BASE, "    cloud: aws\n", "    cloud: aws\n    owner: shared\n")
    text = edited(
        text, "      role_arn: arn:aws:iam::123456789012:role/gpucap\n", "      profile: gpucap\n"
    )
    text += "overflow: {enabled: true, max_replicas: 0}\n"
    [p] = _problems(text)
    assert p.field == "models[0].min_replicas" and "overflow.max_replicas is 0" in p.reason
    parse_policy(edited(text, "max_replicas: 0}", "max_replicas: 1}"))  # 1 fits


def test_the_bound_itself_is_accepted() -> None:
    text = edited(BASE, "max_replicas: 4", f"max_replicas: {MAX_REPLICAS}")
    assert parse_policy(text).policy.models[0].max_replicas == MAX_REPLICAS


def _bomb(levels: int = 9, fan: int = 9) -> str:
    """ "Billion laughs": each anchor is a list of ``fan`` aliases of the one before."""
    text = (
        'customer: acme\nl0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    )
    for i in range(1, levels + 1):
        text += f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]\n"
    return text


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    text = _bomb()
    assert len(text) < 2048
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()
    [p] = _problems(text)
    assert time.process_time() - started < 1.0  # was 36 s of CPU (and 340 MB)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 50_000  # KB
    assert "aliases are expanded" in p.reason and p.file == "p.yaml"
    assert p.line == 8  # where the expansion passed the limit


def test_too_many_aliases_and_too_deep_nesting_are_refused() -> None:
    many = "customer: acme\na: &a 1\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    [p] = _problems(many)
    assert f"more than {MAX_YAML_ALIASES} aliases" in p.reason and p.line == 3
    deep = "customer: acme\nx: " + "[" * (MAX_YAML_DEPTH + 1) + "]" * (MAX_YAML_DEPTH + 1) + "\n"
    [p] = _problems(deep)
    assert f"nested more than {MAX_YAML_DEPTH} levels" in p.reason and p.line == 2
    # A few aliases, as people use them, are fine.
    shared = edited(BASE, "    shapes:\n", "    shapes: &shapes\n")
    assert parse_policy(shared).policy.models[0].shapes[0].shape == "8xH100"


def test_every_yaml_loader_has_the_limits(tmp_path: Path) -> None:
    bomb = _bomb()
    with pytest.raises(PolicyError, match="aliases are expanded"):
        parse_yaml_model(bomb, DaemonConfig, "daemon.yaml")
    account = tmp_path / "account.yaml"
    account.write_text(bomb)
    with pytest.raises(PolicyError, match="aliases are expanded"):
        load_account_file(account)
    policy = tmp_path / "policy.yaml"  # an include makes the includes reader load it too
    policy.write_text(bomb + "accounts:\n  - file: account.yaml\n")
    started = time.process_time()
    text = read_policy_text(policy)
    assert time.process_time() - started < 1.0
    with pytest.raises(PolicyError, match="aliases are expanded"):
        parse_policy(text)


def test_echoed_input_is_cut_and_errors_are_bounded() -> None:
    long_name = "x" * 5000
    [p] = _problems(edited(BASE, "- name: llama-70b", f"- name: {long_name}"))
    assert p.field == "models[0].name" and len(p.reason) < 300
    assert echo(long_name) in p.reason and "(5000 chars)" in p.reason
    assert len(echo(long_name)) < ECHO_CHARS + 20

    fields = "".join(f"    colour{i}: blue\n" for i in range(300))
    problems = _problems(edited(BASE, "    min_replicas: 1\n", f"    min_replicas: 1\n{fields}"))
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1].reason == f"{300 - MAX_PROBLEMS} more problems not shown: fix these first"

    pairs = [(f"f{i}", "bad " * 400) for i in range(100)]
    err = InvalidArgumentError(*pairs[0], *pairs[1:])
    assert len(err.violations) <= MAX_VIOLATIONS + 1 and len(str(err)) < 2500
    assert str(err).endswith(f"; {100 - len(err.violations) + 1} more violations not shown")
    small = [(f"f{i}", "bad") for i in range(MAX_VIOLATIONS + 5)]
    few = InvalidArgumentError(*small[0], *small[1:])
    assert len(few.violations) == MAX_VIOLATIONS + 1
    assert few.violations[-1][1] == "5 more violations not shown"
