"""``gpucap simulate --full-loop`` end to end: the JSON is the replay API's result for the
same files, a clouds file's stockout reports a recovery and use by tier, a policy file runs
as the fleet, and bad clouds files exit 2 naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
from controlplane.simulator.fullloop import fleet_scenario, replay
from controlplane.simulator.traces import TraceOptions, TraceSpec, read_trace
from schema.fleet import load_fleet_file
from tests.full_loop_texts import chat_fleet, chat_policy

# The load steps up at 10 minutes, as the cheapest pool (the commitment's) stocks out.
CLOUDS = """
pools:
  - cloud: aws
    region: us-east-1
    shape: 8xH100
    committed: 1
    stockouts:
      - {start_s: 600, end_s: 1800}
  - cloud: gcp
    region: us-central1
    shape: 8xH100
    quota: 3
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rows = ["timestamp,service_s"]
    rows += [f"{k * 0.5:.2f},2.0" for k in range(1200)]  # 2/s for 10 minutes
    rows += [f"{600 + k * 0.125:.3f},2.0" for k in range(9600)]  # then 8/s for 20 minutes
    paths = {
        "trace": tmp_path / "chat.csv",
        "fleet": tmp_path / "fleet.yaml",
        "clouds": tmp_path / "clouds.yaml",
        "policy": tmp_path / "policy.yaml",
    }
    paths["trace"].write_text("\n".join(rows) + "\n")
    paths["fleet"].write_text(chat_fleet())
    paths["clouds"].write_text(CLOUDS)
    paths["policy"].write_text(chat_policy())
    return paths


def simulate(files: dict[str, Path], *args: str, fleet: bool = True) -> tuple[int, str, str]:
    """``gpucap simulate --full-loop`` on the trace (and the fleet) with ``args``."""
    base = ["simulate", "--full-loop", "--trace", f"chat={files['trace']}"]
    if fleet:
        base += ["--fleet", str(files["fleet"])]
    result = CliRunner().invoke(app, [*base, *args])
    return result.exit_code, result.stdout, result.stderr


def test_the_json_is_the_replay_apis_result(files):
    code, out, _ = simulate(files, "--autoscaler", "ours", "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["mode"] == "full-loop" and payload["requests"] == 10800
    (row,) = payload["results"]
    fleet = load_fleet_file(files["fleet"])
    trace = read_trace([TraceSpec.parse(f"chat={files['trace']}")], TraceOptions())
    expected = json.loads(json.dumps(replay(fleet_scenario(fleet, trace)).as_dict()))
    assert row == expected
    assert row["models"]["chat"]["requests"] == 10800 and row["slo_attainment"] > 0.5


def test_a_stockout_fails_over_and_reports_its_recovery(files):
    code, out, err = simulate(
        files, "--clouds", str(files["clouds"]), "--autoscaler", "ours", "--json"
    )
    assert code == 0, err
    (row,) = json.loads(out)["results"]
    tiers = row["tiers"]
    assert tiers["committed"]["replica_hours"] > 0  # the commitment first
    assert tiers["on_demand"]["replica_hours"] > 0  # the stockout's growth went to GCP
    assert tiers["shared"]["replica_hours"] == 0
    (window,) = row["stockouts"]
    assert window["pool"] == "aws/us-east-1/p5.48xlarge"
    # Short of desired capacity for at least one cold start of the pool failed over to.
    assert window["recovery_s"] is not None and window["recovery_s"] >= 90
    assert row["unserved"] == 0


def test_a_policy_file_runs_as_the_fleet(files):
    code, out, err = simulate(
        files, "--policy", str(files["policy"]), "--autoscaler", "ours,hpa", "--json", fleet=False
    )
    assert code == 0, err
    rows = json.loads(out)["results"]
    assert [r["autoscaler"] for r in rows] == ["ours", "hpa"]
    assert all(r["models"]["chat"]["requests"] == 10800 for r in rows)
    assert rows[0]["tiers"]["on_demand"]["replica_hours"] > 0


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("pools:\n  - cloud: aws\n    region: mars-1\n    shape: 8xH100\n", ":3:"),
        (
            "pools:\n  - cloud: aws\n    region: us-east-1\n    shape: 8xH100\n    capacity: -1\n",
            ":5:",
        ),
        (
            "pools:\n  - cloud: aws\n    region: us-east-1\n    shape: 8xH100\n"
            "    stockouts:\n      - {start_s: 50, end_s: 10}\n",
            ":6:",
        ),
    ],
)
def test_a_bad_clouds_file_names_file_line_and_field(files, text, where):
    files["clouds"].write_text(text)
    code, _, err = simulate(files, "--clouds", str(files["clouds"]))
    assert code == 2
    assert f"{files['clouds'].name}{where}" in err.replace("\n", "")
    assert "pools[0]" in err


def test_clouds_without_full_loop_is_refused(files):
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--trace",
            str(files["trace"]),
            "--fleet",
            str(files["fleet"]),
            "--clouds",
            str(files["clouds"]),
        ],
    )
    assert result.exit_code == 2 and "--full-loop" in result.stderr


def test_an_slo_target_sweeps_each_knob_in_the_full_loop(files):
    code, out, err = simulate(
        files, "--autoscaler", "ours", "--slo-target", "0.9", "--end", "900", "--json"
    )
    assert code == 0, err
    payload = json.loads(out)
    assert payload["mode"] == "full-loop" and payload["slo_target"] == 0.9
    (row,) = payload["results"]
    assert row["slo_attainment"] >= 0.9 and isinstance(row["knob"], float)
    assert row["models"]["chat"]["slo_attainment"] >= 0.9
    # Beyond reach (one replica serves 4/s of the 8/s): a null row with its closest run,
    # and a note under the table naming it.
    files["fleet"].write_text(chat_fleet().replace("max_replicas: 20", "max_replicas: 1"))
    code, out, err = simulate(
        files, "--autoscaler", "ours", "--slo-target", "0.9", "--end", "900", "--json"
    )
    assert code == 0, err
    (row,) = json.loads(out)["results"]
    assert row["slo_attainment"] is None and row["closest"]["slo_attainment"] < 0.9
    code, out, _ = simulate(files, "--autoscaler", "ours", "--slo-target", "0.9", "--end", "900")
    assert code == 0 and "no knob reaches 0.9" in " ".join(out.split())


def test_report_with_full_loop_is_refused(files):
    code, _, err = simulate(files, "--report", "out.md")
    assert code == 2 and "--report" in err
