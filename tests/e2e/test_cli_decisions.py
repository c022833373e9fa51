"""``gpucap decisions`` and ``gpucap decisions replay`` against a running API server whose
store holds decisions recorded by the real control loop."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import typer

from controlplane.cli.decisions import parse_since
from tests.component.oncall_kit import record_demo_decisions
from tests.e2e.conftest import Daemon, Gpucap

# The loop's hand-driven clock starts at 1_800_000_000 (tests/component/test_control_loop.py).
LOOP_START = datetime.fromtimestamp(1_800_000_000, UTC)


@pytest.fixture
def decided(api: Daemon) -> list[dict[str, object]]:
    record_demo_decisions(api.store, api.service)
    return [
        {"id": d.id, "kind": d.kind, "model": d.model, "reason": d.reason, "at": d.at}
        for d in api.service.list_decisions(limit=1000)
    ]


def test_decisions_table_and_json_with_filters(
    gpucap: Gpucap, decided: list[dict[str, object]]
) -> None:
    table = gpucap("decisions")
    assert table.exit_code == 0, table.output
    for header in ("WHEN (UTC)", "MODEL", "KIND", "DESIRED", "REASON", "DETAIL"):
        assert header in table.stdout
    assert "wake" in table.stdout and "placement" in table.stdout and "pinned" in table.stdout

    data = json.loads(
        gpucap("decisions", "--model", "demo/llama-70b", "-k", "autoscale", "-o", "json").stdout
    )
    got = data["decisions"]
    want = [d["id"] for d in decided if d["model"] == "llama-70b" and d["kind"] == "autoscale"]
    assert [int(d["id"]) for d in got] == want
    assert all(d["replayable"] for d in got) and "inputs_json" in got[0]
    assert got[0]["inputs_json"] == ""
    with_inputs = json.loads(
        gpucap("decisions", "-m", "llama-70b", "--inputs", "-n", "1", "-o", "json").stdout
    )
    [one] = with_inputs["decisions"]
    assert "metrics" in json.loads(one["inputs_json"])

    last_two = json.loads(gpucap("decisions", "--limit", "2", "-o", "json").stdout)
    assert [int(d["id"]) for d in last_two["decisions"]] == [d["id"] for d in decided[-2:]]
    after = json.loads(
        gpucap("decisions", "--since-id", str(decided[0]["id"]), "-o", "json").stdout
    )
    assert [int(d["id"]) for d in after["decisions"]] == [d["id"] for d in decided[1:]]

    cut = decided[-1]["at"]
    assert isinstance(cut, datetime) and cut > LOOP_START
    since = json.loads(gpucap("decisions", "--since", cut.isoformat(), "-o", "json").stdout)
    expected = [d["id"] for d in decided if d["at"] >= cut]  # type: ignore[operator]
    assert expected and len(expected) < len(decided)
    assert [int(d["id"]) for d in since["decisions"]] == expected


def test_decisions_bad_options_are_usage_errors(gpucap: Gpucap, api: Daemon) -> None:
    bad_kind = gpucap("decisions", "--kind", "scaling")
    assert bad_kind.exit_code == 2 and "autoscale" in bad_kind.output
    bad_since = gpucap("decisions", "--since", "yesterday")
    assert bad_since.exit_code == 2 and "neither a duration" in bad_since.output
    for result in (bad_kind, bad_since):
        assert "Traceback" not in result.output


def test_replay_shows_recorded_and_replayed(
    gpucap: Gpucap, decided: list[dict[str, object]]
) -> None:
    wake = next(d for d in decided if d["reason"] == "wake")
    shown = gpucap("decisions", "replay", str(wake["id"]))
    assert shown.exit_code == 0, shown.output
    assert f"decision {wake['id']}: autoscale of demo/llama-70b" in shown.stdout
    assert "same decision" in shown.stdout
    lines = shown.stdout.splitlines()
    assert any("recorded" in ln and "wake" in ln for ln in lines)
    assert any("replayed" in ln and "wake" in ln for ln in lines)
    assert "decider code: the same as at the decision (ours " in shown.stdout

    data = json.loads(gpucap("decisions", "replay", str(wake["id"]), "-o", "json").stdout)
    assert data["matches"] is True and data["autoscaler"] == "ours"
    assert data["recorded_decider"] == "ours"
    assert data["recorded_code"] == data["running_code"] and len(data["running_code"]) == 12
    assert data["same_code"] is True
    assert data["recorded"]["reason"] == data["replayed"]["reason"] == "wake"
    assert data["recorded"]["desired"] == data["replayed"]["desired"] > 0


def test_replay_refusals_are_clean(gpucap: Gpucap, decided: list[dict[str, object]]) -> None:
    placement = next(d for d in decided if d["kind"] == "placement")
    refused = gpucap("decisions", "replay", str(placement["id"]))
    assert refused.exit_code == 1
    assert "failed precondition" in refused.stderr
    assert "placement decision, not an autoscaler output" in refused.stderr
    pinned = next(d for d in decided if d["reason"] == "pinned")
    override = gpucap("decisions", "replay", str(pinned["id"]))
    assert override.exit_code == 1 and "on-call override" in override.stderr
    missing = gpucap("decisions", "replay", "999999")
    assert missing.exit_code == 1 and "not found" in missing.stderr
    for result in (refused, override, missing):
        assert "Traceback" not in result.output


def test_parse_since_accepts_durations_and_iso_times() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert parse_since("15m", now) == datetime(2026, 3, 1, 11, 45, tzinfo=UTC)
    assert parse_since("2h", now) == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert parse_since("1d", now) == datetime(2026, 2, 28, 12, 0, tzinfo=UTC)
    assert parse_since("90s", now) == datetime(2026, 3, 1, 11, 58, 30, tzinfo=UTC)
    assert parse_since("2026-01-31T14:05:00Z") == datetime(2026, 1, 31, 14, 5, tzinfo=UTC)
    assert parse_since("2026-01-31 14:05") == datetime(2026, 1, 31, 14, 5, tzinfo=UTC)
    with pytest.raises(typer.BadParameter):
        parse_since("15 minutes")
