"""bench/simulate_bench.py --reuse: which changes keep the other autoscalers' saved rows
valid, and how a re-run's rows are completed from the saved ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_only_changes_that_replay_nothing_kept_keep_rows(bench: ModuleType) -> None:
    changed = [
        "tests/unit/autoscaler/test_gpucap.py",
        "docs/benchmarks.md",
        "README.md",
        "bench/simulate_bench.py",
        "autoscaler/gpucap.py",
        "autoscaler/forecast.py",
        "autoscaler/baselines/knative.py",
        "controlplane/simulator/engine.py",
        "examples/fleet-gpu-mix.yaml",
        "constraints.txt",
    ]
    shared = ["controlplane/simulator/engine.py", "examples/fleet-gpu-mix.yaml", "constraints.txt"]
    assert bench.blocking_changes(changed, ["ours"]) == [
        "autoscaler/baselines/knative.py",
        *shared,
    ]
    # Re-running Knative's rows: its module no longer blocks, gpucap's do.
    assert bench.blocking_changes(changed, ["knative"]) == [
        "autoscaler/gpucap.py",
        "autoscaler/forecast.py",
        *shared,
    ]
    assert bench.blocking_changes(changed, ["ours", "knative"]) == shared
    # Keeping every row: every decider's own modules block as well.
    assert bench.blocking_changes(changed) == [
        "autoscaler/gpucap.py",
        "autoscaler/forecast.py",
        "autoscaler/baselines/knative.py",
        *shared,
    ]
    assert bench.blocking_changes(["tests/x.py", "docs/a.md"]) == []


def _scenario(rows: dict[str, float], commit: str, requests: int = 100) -> dict[str, Any]:
    return {
        "scenario": "s",
        "requests": requests,
        "replayed_with_warmup": requests + 10,
        "warmup_s": 60.0,
        "rows": [{"autoscaler": n, "gpu_hours": g, "commit": commit} for n, g in rows.items()],
    }


def test_merge_keeps_the_table_order_and_refuses_another_replay(bench: ModuleType) -> None:
    saved = _scenario({n: 1.0 for n in bench.ALL}, "old")
    fresh = {**_scenario({"ours": 2.0}, "new"), "seed": bench.SEED, "slo_target": 0.99}
    merged = bench.merge_rows(fresh, saved)
    assert [r["autoscaler"] for r in merged["rows"]] == list(bench.ALL)
    by = {r["autoscaler"]: r for r in merged["rows"]}
    assert by["ours"] == {"autoscaler": "ours", "gpu_hours": 2.0, "commit": "new"}
    assert {by[n]["commit"] for n in bench.ALL if n != "ours"} == {"old"}
    with pytest.raises(SystemExit, match="requests was 100, now 101"):
        bench.merge_rows({**fresh, "requests": 101}, saved)
    with pytest.raises(SystemExit, match="seed was"):
        bench.merge_rows({**fresh, "seed": bench.SEED + 1}, saved)


def test_reuse_checks_the_commit_each_kept_row_was_measured_at(
    bench: ModuleType, tmp_path: Path
) -> None:
    root = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if root.returncode != 0 or not root.stdout.strip():
        pytest.skip("not a git checkout with history")
    first = root.stdout.split()[0]  # everything has changed since the first commit
    results = [_scenario({n: 1.0 for n in bench.ALL}, first)]
    saved = {"results": results, "commit": first, "wall_s": 60.0}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(saved))
    chosen = [bench.Scenario("s", (), "note")]
    with pytest.raises(SystemExit, match="autoscaler/baselines/"):
        bench._reusable(path, chosen, ("ours",))
    with pytest.raises(SystemExit, match="has no rows for other"):
        bench._reusable(path, [bench.Scenario("other", (), "note")], ("ours",))


def test_with_the_files_a_run_replayed_only_those_block(bench: ModuleType) -> None:
    replayed = ["autoscaler/gpucap.py", "controlplane/simulator/engine.py", "schema/fleet.py"]
    replayed += ["examples/fleet-gpu-mix.yaml"]
    changed = [
        "controlplane/loop/views.py",  # the daemon's, never imported by a replay
        "controlplane/grpc/convert.py",
        "examples/policy.yaml",
        "schema/fleet.py",
        "examples/fleet-gpu-mix.yaml",
        "autoscaler/gpucap.py",
        "pyproject.toml",  # dependency pins: always
    ]
    assert bench.blocking_changes(changed, ["ours"], replayed=replayed) == [
        "schema/fleet.py",
        "examples/fleet-gpu-mix.yaml",
        "pyproject.toml",
    ]
    assert "autoscaler/gpucap.py" in bench.blocking_changes(changed, (), replayed)


def test_a_run_records_its_import_closure_and_fleet() -> None:
    # In a fresh interpreter: what importing the bench (and so the simulator) pulls in.
    script = str(ROOT / "bench" / "simulate_bench.py")
    code = (
        "import importlib.util, json, sys; "
        f"spec = importlib.util.spec_from_file_location('b', {script!r}); "
        "b = importlib.util.module_from_spec(spec); sys.modules['b'] = b; "
        "spec.loader.exec_module(b); "
        "print(json.dumps(b.replayed_files(b.ROOT / 'examples' / 'fleet-llm.yaml')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout)
    assert {"controlplane/simulator/engine.py", "autoscaler/gpucap.py"} <= set(files)
    assert "examples/fleet-llm.yaml" in files
    assert not [f for f in files if f.startswith(("tests/", "bench/", ".venv/"))]
    # the daemon's loop, gRPC and providers are not part of a replay
    assert not [f for f in files if f.startswith(("controlplane/loop/", "controlplane/grpc/"))]
    assert not [f for f in files if f.startswith("providers/")]


def test_merged_rows_replayed_both_runs_files_or_unknown(bench: ModuleType) -> None:
    base = {"seed": bench.SEED, "slo_target": 0.99}
    saved = {**_scenario({n: 1.0 for n in bench.ALL}, "old"), **base, "replayed_files": ["a"]}
    fresh = {**_scenario({"ours": 2.0}, "new"), **base, "replayed_files": ["b"]}
    assert bench.merge_rows(fresh, saved)["replayed_files"] == ["a", "b"]
    unknown = {k: v for k, v in saved.items() if k != "replayed_files"}
    assert bench.merge_rows(fresh, unknown)["replayed_files"] is None


def test_the_longest_scenarios_run_first(bench: ModuleType, tmp_path: Path) -> None:
    by_name = {s.name: s for s in bench.SCENARIOS}
    chosen = [by_name[n] for n in ("azure-code", "servegen-m-large", "azure-conv", "azure-both")]
    saved = tmp_path / "results.json"
    took = {"azure-code": [30.0, 40.0], "servegen-m-large": [50.0], "azure-conv": [200.0]}
    results = [
        {"scenario": n, "rows": [{"sweep_s": t} for t in times]} for n, times in took.items()
    ]
    saved.write_text(json.dumps({"results": results}))
    # azure-both has no record: it goes first; then 200 s, 70 s (two rows), 50 s.
    order = [s.name for s in bench.longest_first(chosen, saved)]
    assert order == ["azure-both", "azure-conv", "azure-code", "servegen-m-large"]
    # No record (or an unreadable one): the ServeGen scenarios first, in table order.
    expected = ["servegen-m-large", "azure-code", "azure-conv", "azure-both"]
    assert [s.name for s in bench.longest_first(chosen, tmp_path / "none.json")] == expected
    saved.write_text("[1, 2")
    assert [s.name for s in bench.longest_first(chosen, saved)] == expected
