"""bench/coldstart_bench.py and the replay it makes: a simulation whose pools carry cold-start
techniques, and the page's targets computed from saved rows."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from typer.testing import CliRunner

from autoscaler.baselines import REGISTRY
from controlplane.cli.main import app
from controlplane.simulator.runner import Simulation
from controlplane.simulator.techniques import (
    PROFILE_8B,
    Techniques,
    TechniquesCapacity,
    parse_techniques,
)
from controlplane.simulator.traces import TraceSpec, read_trace
from schema.fleet import parse_fleet

BENCH = Path(__file__).resolve().parents[3] / "bench"

FLEET = """
name: techniques
models:
  - name: bursty
    shape: 1xH100
    slots: 4
    slo_s: 0.5
    service: {per_request_s: 2.0}
    min_replicas: 0
    scale_to_zero_grace_s: 60
"""


@pytest.fixture(scope="module")
def coldstart_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("coldstart_bench", BENCH / "coldstart_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["coldstart_bench"] = module
    spec.loader.exec_module(module)
    return module


def _simulation(tmp_path: Path) -> Simulation:
    """Three bursts an hour apart with quiet between: each burst scales from zero."""
    rng = np.random.default_rng(5)
    t = np.sort(np.concatenate([rng.uniform(s, s + 300, 600) for s in (0, 3600, 7200)]))
    lines = ["timestamp,model,input_tokens,output_tokens,service_s"]
    lines += [f"{x:.3f},bursty,,,2.0" for x in t]
    path = tmp_path / "bursts.csv"
    path.write_text("\n".join(lines) + "\n")
    return Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(path))]))


def _replay(sim: Simulation, tech: Techniques) -> tuple[float, float, dict[str, float]]:
    cap = TechniquesCapacity({"bursty": (PROFILE_8B, tech)}, measure_from_s=sim.warmup_s)
    s = sim.run_autoscaler(REGISTRY["ours"](), capacity=cap).summary()
    return s.slo_attainment, s.gpu_hours, cap.costs(sim.end_s)["bursty"]


def test_techniques_shorten_the_replays_cold_starts(tmp_path: Path) -> None:
    sim = _simulation(tmp_path)
    naive_slo, naive_h, naive_c = _replay(sim, Techniques())
    all_slo, all_h, all_c = _replay(sim, Techniques(True, True, 2, True))
    assert naive_c["cold_launches"] > 0 and naive_c["warm_launches"] == 0
    assert all_c["warm_launches"] > 0
    assert all_slo >= naive_slo
    assert all_h < naive_h  # replicas wait less for their nodes, billed from the request
    assert all_c["stopped_nodes_usd"] > 0 and all_c["staged_weights_usd"] > 0


def test_targets_from_saved_rows(coldstart_bench: ModuleType) -> None:
    row: dict[str, object] = {"floor_s": 200.0, "floor_weights_s": 2.5, "floor_init_s": 197.5}
    row |= {"floor_tier": "t", "floor_row": "r", "p99_s": 1.0}
    ready = [
        {**row, "model": "70B (140 GB, 8xH100)", "config": "naive", "p50_s": 2000.0},
        {**row, "model": "70B (140 GB, 8xH100)", "config": "all combined", "p50_s": 400.0},
    ]
    trace: dict[str, object] = {"scenario": "x", "launches": 3, "gpu_usd": 100.0}
    trace |= {"storage_usd": 1.0, "idle_usd": 9.0}
    saved = {
        "time_to_ready": ready,
        "traces": [
            {**trace, "config": "naive", "total_usd": 100.0, "storage_usd": 0.0, "idle_usd": 0.0},
            {**trace, "config": "all combined", "total_usd": 80.0, "gpu_usd": 70.0},
        ],
    }
    tg = coldstart_bench.targets(saved)
    assert tg["ratio_70b"] == 5.0 and tg["over_floor_70b"] == 2.0
    assert tg["savings"]["x"] == {
        "scales": True,
        "net_usd": 20.0,
        "gpu_usd_saved": 30.0,
        "storage_idle_usd": 10.0,
    }


def test_savings_at_equal_service_in_words(coldstart_bench: ModuleType) -> None:
    def run(total: float, slo: float) -> dict[str, float]:
        return {"knob": 0.5, "slo_attainment": slo, "total_usd": total}

    def entry(sc: str, config: str, best: float | None, slo: float) -> dict[str, object]:
        got = run(best or 0.0, slo)
        return {"scenario": sc, "config": config, "best": got if best else None, "closest": got}

    saved = {
        "equal": [
            entry("a", "naive", 120.0, 0.99),
            entry("a", "all combined", 100.0, 0.995),
            entry("b", "naive", None, 0.97),
            entry("b", "all combined", 90.0, 0.99),
            entry("c", "naive", 50.0, 0.99),
            entry("c", "all combined", 60.0, 0.99),
        ]
    }
    words = coldstart_bench.equal_savings(saved)
    assert words["a"].startswith("the combination saves $20 net")
    assert words["b"] == "only the combination reaches it ($90); naive tops out at 0.9700"
    assert words["c"].startswith("the combination costs $10 more net")


def test_parse_techniques() -> None:
    assert parse_techniques("naive") == Techniques()
    assert parse_techniques("staged, baked,warm=3,local") == Techniques(True, True, 3, True)
    for bad in ("warm", "warm=-1", "fast", "staged=1", ""):
        with pytest.raises(ValueError):
            parse_techniques(bad)


def test_a_simulation_with_techniques_counts_their_costs(tmp_path: Path) -> None:
    base = _simulation(tmp_path)
    sim = Simulation(base.fleet, base.trace, techniques=Techniques(baked_image=True, warm_nodes=2))
    out = sim.run("ours")
    costs = sim.technique_costs(out)
    assert costs is not None and costs["bursty"]["warm_launches"] > 0
    assert costs["bursty"]["image_usd"] > 0
    assert base.technique_costs(base.run("ours")) is None
    with pytest.raises(ValueError):
        sim.run("oracle")


def test_gpucap_simulate_techniques(tmp_path: Path) -> None:
    _simulation(tmp_path)  # writes the trace
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    args = ["simulate", "--trace", str(tmp_path / "bursts.csv"), "--fleet", str(fleet)]
    ok = CliRunner().invoke(app, [*args, "--techniques", "warm=2,local", "--json"])
    assert ok.exit_code == 0, ok.output
    payload = json.loads(ok.stdout)
    assert payload["techniques"] == "warm=2+local"
    names = [r["autoscaler"] for r in payload["results"]]
    assert "oracle" not in names and "ours" in names
    ours = next(r for r in payload["results"] if r["autoscaler"] == "ours")
    assert ours["techniques"]["bursty"]["warm_launches"] > 0
    bad = CliRunner().invoke(app, [*args, "--techniques", "fast"])
    assert bad.exit_code == 2
    oracle = CliRunner().invoke(app, [*args, "--autoscaler", "oracle", "--techniques", "baked"])
    assert oracle.exit_code == 2
