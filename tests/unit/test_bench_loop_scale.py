"""bench/loop_scale.py at a tiny size on SQLite, so the script does not rot: the seeding
builds the steady fleet it claims (rows, and one serving instance per node on the simulated
cloud), the measured round changes nothing (no create, no terminate, the rows as seeded),
every job is measured, and the page section renders."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from sqlalchemy import func, select

from controlplane.store.models import Node, Replica

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("loop_scale", BENCH / "loop_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["loop_scale"] = module
    spec.loader.exec_module(module)
    return module


def test_seed_and_measure_tiny(tmp_path: Path) -> None:
    ls = _load()
    size = ls.SIZES["20"]
    world = ls.seed(f"sqlite:///{tmp_path / 'scale.db'}", size, ls.Clock())
    assert world.counts == {"models": 20, "pools": 2, "replicas": 40, "nodes": 40}
    instances = {i for i in world.sim.instances if world.sim.serving(i)}
    with world.store.session() as s:
        assert set(s.scalars(select(Node.instance_id))) == instances

    jobs = ls.measure(world, ls.PgBackends(None))

    assert [name for name, _ in ls.JOBS] == list(jobs)
    for name, j in jobs.items():
        assert j["statements"] > 0, name
        assert j["cpu_s"] >= 0 and j["server_cpu_s"] is None
        # the simulated cloud's share is part of the process's CPU, and left out of the
        # daemon's own figure
        assert 0 <= j["sim_probe_cpu_s"] <= j["sim_cpu_s"] <= j["cpu_s"] + 0.01, name
        assert j["daemon_cpu_s_per_s"] <= j["cpu_s_per_s"], name
        assert 0 <= j["gc_cpu_s"] <= j["cpu_s"] + 0.01, name
    verbs = {v for j in jobs.values() for v in j["cloud_calls_by_verb"]}
    assert not verbs & {"create_node", "terminate_node", "start_node", "stop_node"}
    with world.store.session() as s:
        rows = s.execute(select(Replica.state, func.count()).group_by(Replica.state))
        states = {state: n for state, n in rows}
        assert states == {"ready": 40}
        assert s.scalar(select(func.count()).select_from(Node).where(Node.state == "ready")) == 40


def test_main_writes_results_and_section(tmp_path: Path) -> None:
    ls = _load()
    out = tmp_path / "r.json"
    ls.main(["--sizes", "20", "--stores", "sqlite", "--out", str(out), "--no-page"])
    saved = json.loads(out.read_text())
    assert [r["models"] for r in saved["runs"]] == [20]
    page = "\n".join(ls.render(saved, {}))
    assert "## The loop and the API at fleet scale" in page
    assert "| sqlite | 20 | 40 | 2 | 20 | reconcile |" in page
    assert "of which in the simulated cloud" in page
    run = saved["runs"][0]
    assert run["daemon_cpu_s_per_s"] <= run["cpu_s_per_s"]
    # the simulated cloud's 40 instances, their tags and index entries, at least
    assert 40 < run["heap_objects"]["simulated_cloud"] < run["heap_objects"]["tracked"]
    assert "of which in the garbage collector" in page
