"""The HTTP prober against wire-level fake engines (``tests/fakes/engine_server.py``): what
a probe says of a serving, dead, killed and hung engine, the requests a draining engine
holds read from its own metrics, and the per-pass budget taken least recently probed
first."""

from __future__ import annotations

import time

from controlplane.lifecycle.health import Probe
from controlplane.probes import HttpProber, ProbeTarget, in_flight
from runtimes import ENGINES
from schema.runtime import Engine
from tests.fakes.engine_server import FakeEngine, fake_engines


def target(e: FakeEngine, node: str, *, read_load: bool = False, timeout_s: float = 1.0):
    spec = e.spec
    return ProbeTarget(
        node_id=node,
        instance_id=f"i-{node}",
        address="127.0.0.1",
        port=e.port,
        health_path=spec.health_path,
        metrics_path=spec.metrics.path,
        load_metrics=(spec.metrics.running, spec.metrics.waiting),
        timeout_s=timeout_s,
        read_load=read_load,
    )


def test_a_probe_tells_serving_dead_killed_and_hung_engines_apart() -> None:
    with fake_engines() as start:
        up, dead, killed, hung = (start() for _ in range(4))
        dead.serving = False
        killed.kill()
        hung.hang()
        targets = [target(up, "up"), target(dead, "dead"), target(killed, "killed")]
        targets.append(target(hung, "hung", timeout_s=0.3))
        began = time.monotonic()
        got = HttpProber().probe(targets)
        took = time.monotonic() - began
    assert got == {
        "up": Probe(True),
        "dead": Probe(False),
        "killed": Probe(False),
        "hung": Probe(False),
    }
    assert took < 2.0  # concurrent: the hung engine costs its timeout once, not per target


def test_a_draining_engine_reports_what_it_holds_on_every_engine() -> None:
    with fake_engines() as start:
        engines = [start(e) for e in (Engine.VLLM, Engine.SGLANG, Engine.TRTLLM)]
        for i, e in enumerate(engines):
            e.in_flight, e.waiting = i + 1, 2
        got = HttpProber().probe([target(e, e.spec.engine.value, read_load=True) for e in engines])
    assert got == {
        "vllm": Probe(True, 3),
        "sglang": Probe(True, 4),
        "trtllm": Probe(True, 5),
    }


def test_a_budget_probes_the_least_recently_probed_first() -> None:
    with fake_engines() as start:
        e = start()
        targets = [target(e, f"n{i}") for i in range(5)]
        prober = HttpProber(budget=2)
        passes = [set(prober.probe(targets)) for _ in range(3)]
    assert passes[0] == {"n0", "n1"} and passes[1] == {"n2", "n3"}
    assert "n4" in passes[2]  # never probed yet: it goes before any probed again
    seen = set().union(*passes)
    assert seen == {t.node_id for t in targets}


def test_targets_without_an_address_are_not_probed() -> None:
    t = ProbeTarget("n", "i", None, 8000, "/health", "/metrics", ("a",))
    assert HttpProber().probe([t]) == {}


def test_in_flight_sums_the_named_gauges_over_their_series() -> None:
    m = ENGINES[Engine.VLLM].metrics
    text = (
        f'{m.running}{{model_name="a"}} 2\n{m.running}{{model_name="b"}} 1\n'
        f'{m.waiting}{{model_name="a"}} 4\nother_gauge 9\n'
    )
    assert in_flight(text, (m.running, m.waiting)) == 7
    assert in_flight("other_gauge 9\n", (m.running,)) is None
