"""``gpucap simulate`` end to end on tiny traces: the table, the JSON keys, --slo-target
nulls, the HTML report, and bad input exiting 2 with file, line and problem."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
from controlplane.simulator.oracle import HEADROOM_SWEEP

FLEET = """
coldstart: {capacity_vm_s: 20, bootstrap_s: 5, image_pull_s: 5, weight_fetch_s: 5, load_init_s: 5}
models:
  - name: code
    shape: 8xH100
    slots: 8
    slo_s: 2
    service: {prefill_tokens_per_s: 6000, output_token_s: 0.05}
template:
  shape: 1xH100
  slots: 4
  slo_s: 1
  service: {per_request_s: 1.5}
"""
KEYS = {
    "autoscaler",
    "knob",
    "slo_attainment",
    "gpu_hours",
    "cost_usd",
    "p50_wait_s",
    "p99_wait_s",
    "cold_starts",
    "scale_events",
    "unserved",
}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    azure = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for k in range(300):
        azure.append(
            f"2023-11-16 18:{17 + k // 60:02d}:{k % 60:02d}.5000000,{500 + k},{20 + k % 50}"
        )
    generic = ["timestamp,service_s"] + [f"{2 * k}.25,1.0" for k in range(150)]
    paths = {
        "fleet": tmp_path / "fleet.yaml",
        "azure": tmp_path / "code.csv",
        "generic": tmp_path / "chat.csv",
    }
    paths["fleet"].write_text(FLEET)
    paths["azure"].write_text("\n".join(azure) + "\n")
    paths["generic"].write_text("\n".join(generic) + "\n")
    return paths


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_has_exactly_the_documented_keys(files: dict[str, Path]) -> None:
    code, out, _ = _run(
        "--trace",
        f"code={files['azure']}",
        "--trace",
        f"chat={files['generic']}",
        "--fleet",
        str(files["fleet"]),
        "--autoscaler",
        "ours,knative,oracle",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"trace", "requests", "results"}
    assert doc["requests"] == 450
    assert [r["autoscaler"] for r in doc["results"]] == ["ours", "knative", "oracle"]
    for r in doc["results"]:
        assert set(r) == KEYS | {"models"}
        assert 0 <= r["slo_attainment"] <= 1 and r["gpu_hours"] > 0
        models = r["models"]
        assert set(models) == {"code", "chat"}
        assert all(set(m) == KEYS - {"autoscaler", "knob"} | {"requests"} for m in models.values())
        assert sum(m["requests"] for m in models.values()) == 450
        assert sum(m["gpu_hours"] for m in models.values()) == pytest.approx(r["gpu_hours"])
    oracle = doc["results"][2]
    assert oracle["knob"] == 1.0 and oracle["slo_attainment"] == pytest.approx(1.0)


def test_table_by_default_and_report(files: dict[str, Path], tmp_path: Path) -> None:
    report = tmp_path / "report"
    code, out, err = _run(
        "--trace",
        f"code={files['azure']}",
        "--fleet",
        str(files["fleet"]),
        "--autoscaler",
        "all",
        "--report",
        str(report),
    )
    assert code == 0, err
    for name in ("ours", "knative", "skyserve", "rayserve", "hpa", "oracle"):
        assert name in out
    page = (report / "index.html").read_text()
    assert "timeline-1-code.png" in page and "gpu-hours-vs-slo.png" in page
    assert (report / "timeline-1-code.png").stat().st_size > 1000
    assert (report / "gpu-hours-vs-slo.png").stat().st_size > 1000


def test_slo_target_null_where_no_knob_reaches_it(tmp_path: Path) -> None:
    fleet = tmp_path / "f.yaml"
    fleet.write_text(
        "models:\n  - {name: m, shape: 1xH100, slots: 1, slo_s: 1, max_replicas: 1,"
        " service: {per_request_s: 10}}\n"
    )
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,service_s\n0,10\n0,10\n100,10\n")
    code, out, _ = _run(
        "--trace",
        f"m={trace}",
        "--fleet",
        str(fleet),
        "--autoscaler",
        "ours,oracle",
        "--slo-target",
        "0.99",
        "--json",
    )
    assert code == 0
    for r in json.loads(out)["results"]:
        assert set(r) == KEYS
        assert r["gpu_hours"] is None and r["knob"] is None and r["slo_attainment"] is None


def test_slo_target_reports_a_knob(files: dict[str, Path]) -> None:
    code, out, _ = _run(
        "--trace",
        f"code={files['azure']}",
        "--fleet",
        str(files["fleet"]),
        "--autoscaler",
        "oracle",
        "--slo-target",
        "0.9",
        "--json",
    )
    assert code == 0
    (r,) = json.loads(out)["results"]
    assert r["knob"] in HEADROOM_SWEEP and r["slo_attainment"] >= 0.9


def test_oracle_knob_per_model_in_json_and_table(tmp_path: Path) -> None:
    # big: 5 in service on 4-slot replicas (short of one replica at a headroom <= 0.8);
    # small: a burst of 12 at once, served by two replicas with four late at <= 2/3.
    lines = ["timestamp,model,service_s"]
    lines += [f"{0.3 * k:.1f},big,1.5" for k in range(2000)]
    lines += [f"{10 * k + 5},small,1.5" for k in range(60)] + ["300.5,small,1.5"] * 12
    trace = tmp_path / "two.csv"
    trace.write_text("\n".join(lines) + "\n")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    args = ("--trace", str(trace), "--fleet", str(fleet), "--autoscaler", "oracle")
    code, out, err = _run(*args, "--slo-target", "0.99", "--json")
    assert code == 0, err
    (r,) = json.loads(out)["results"]
    assert set(r["knob"]) == {"big", "small"} and r["knob"]["small"] <= 0.6
    assert r["slo_attainment"] >= 0.99
    code, out, err = _run(*args, "--slo-target", "0.99")
    assert code == 0, err
    assert f"small {r['knob']['small']:g}" in out


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ("timestamp,service_s\n1,1\n2,x\n", ":3: service_s: not a number"),
        ("", "the trace is empty"),
        ("timestamp,service_s\n", "header but no requests"),
        ("what,is,this\n1,2,3\n", "unrecognised trace format"),
    ],
)
def test_bad_trace_exits_2_naming_file_and_line(
    files: dict[str, Path], tmp_path: Path, content: str, expect: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    code, out, err = _run("--trace", f"m={bad}", "--fleet", str(files["fleet"]))
    assert code == 2
    assert str(bad) in err and expect in err
    assert out == ""


def test_bad_fleet_and_autoscaler_exit_2(files: dict[str, Path], tmp_path: Path) -> None:
    fleet = tmp_path / "bad.yaml"
    fleet.write_text("models:\n  - name: a\n    shape: 8xH100\n    slots: -1\n")
    code, _, err = _run("--trace", str(files["generic"]), "--fleet", str(fleet))
    assert code == 2 and f"{fleet}:4" in err and "slots" in err
    code, _, err = _run(
        "--trace", str(files["generic"]), "--fleet", str(files["fleet"]), "--autoscaler", "nope"
    )
    assert code == 2 and "unknown autoscaler nope" in err
    code, _, err = _run("--trace", str(tmp_path / "missing.csv"), "--fleet", str(files["fleet"]))
    assert code == 2 and "no such file" in err


def test_a_report_folder_that_cannot_be_written_is_refused_before_replaying(
    files: dict[str, Path], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = _run(
        "--trace", str(files["generic"]), "--fleet", str(files["fleet"]),
        "--autoscaler", "ours", "--report", str(blocker / "report"),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert f"--report: cannot write to {blocker / 'report'}" in err
    assert "Traceback" not in err


def test_a_window_counts_its_own_requests_not_the_history_before_it(
    files: dict[str, Path],
) -> None:
    # 150 requests 2 s apart; the window [200, 300) holds 50, and the 200 s before it (all
    # the trace has there, less than the 340 s warm-up) are read as its warm-up.
    args = ["--trace", str(files["generic"]), "--fleet", str(files["fleet"]), "--json"]
    code, out, _ = _run(*args, "--autoscaler", "ours,oracle", "--start", "200", "--end", "300")
    assert code == 0
    payload = json.loads(out)
    assert payload["requests"] == 50
    assert all(r["slo_attainment"] is not None for r in payload["results"])


@pytest.mark.parametrize("flag", ["--seed", "--start", "--end"])
def test_a_negative_seed_or_offset_is_refused(flag: str) -> None:
    code, _, err = _run("--trace", "x.csv", "--fleet", "f.yaml", flag, "-1")
    assert code == 2 and flag in err


@pytest.mark.parametrize("value", ["0", "nan"])
def test_an_slo_target_outside_0_1_is_refused(files: dict[str, Path], value: str) -> None:
    # 0 would be met by anything: every knob's cheapest run would be "the answer"
    args = ("--trace", f"code={files['azure']}", "--fleet", str(files["fleet"]))
    code, _, err = _run(*args, "--slo-target", value)
    assert code == 2 and "--slo-target must be in (0, 1]" in err


def test_models_whose_names_sanitise_alike_get_a_plot_each(
    files: dict[str, Path], tmp_path: Path
) -> None:
    report = tmp_path / "report"
    args = ["--fleet", str(files["fleet"]), "--autoscaler", "ours", "--report", str(report)]
    code, _, err = _run(
        "--trace", f"x y={files['azure']}", "--trace", f"x_y={files['azure']}", *args
    )
    assert code == 0, err
    page = (report / "index.html").read_text()
    plots = sorted(p.name for p in report.glob("timeline-*.png"))
    assert plots == ["timeline-1-x_y.png", "timeline-2-x_y.png"]
    assert all(name in page for name in plots)


def test_console_script(files: dict[str, Path]) -> None:
    exe = Path(sys.executable).with_name("gpucap")
    proc = subprocess.run(
        [
            str(exe),
            "simulate",
            "--trace",
            str(files["generic"]),
            "--fleet",
            str(files["fleet"]),
            "--autoscaler",
            "hpa",
            "--json",
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["autoscaler"] == "hpa"
