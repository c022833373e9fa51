"""The demo's load generator against emulated engines on their own loopback addresses
(runtimes/emulator.py), following a real gRPC server's ``WatchEndpoints``: requests at the
shape's rate, spread over a model's endpoints, an endpoint that appears used and one that
leaves no longer sent to, a model with nowhere to go counted as such, a dead engine
counted, and what it counted on the daemon's registry."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from controlplane.api import ControlPlaneService
from controlplane.demo.loadgen import NO_ENDPOINT, OK, REFUSED, LoadGenerator
from controlplane.grpc.server import serve
from controlplane.metrics_sources import TrafficShape
from controlplane.store.db import Store
from controlplane.store.models import Replica
from runtimes import ENGINES
from runtimes.emulator import EngineServer, EngineState, ServiceTime
from schema.runtime import Engine
from tests.component.oncall_kit import add_replica
from tests.policy_texts import engines_policy

CHAT, CODE = ("acme", "chat"), ("acme", "code")
POOL = "acme/acme-aws/us-east-1/p5.4xlarge"


def steady(rps: float) -> TrafficShape:
    """A constant rate (no burst, no wave within a test's seconds)."""
    return TrafficShape(base_rps=rps, service_s=0.05, burst_factor=1.0, wave_period_s=1e9)


@pytest.fixture
def engine() -> Iterator[Callable[[str, int], EngineServer]]:
    started: list[EngineServer] = []

    def start(host: str, port: int) -> EngineServer:
        state = EngineState(ENGINES[Engine.VLLM], "m", ServiceTime(0.05, 1000.0), slots=None)
        started.append(EngineServer(state, host, port))
        return started[-1]

    yield start
    for e in started:
        e.close()


def until(what: str, ok: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def set_state(store: Store, rid: str, state: str) -> None:
    with store.session() as s:
        r = s.get_one(Replica, rid)
        r.state = r.nodes[0].state = state


def ready(store: Store, rid: str, model: str, ip: str) -> None:
    add_replica(store, model, POOL, "ready", ["ready"], rid=rid, private_ip=ip)


def test_requests_follow_the_endpoints_gpucap_lists(
    sqlite_store: Store, engine: Callable[[str, int], EngineServer]
) -> None:
    store = sqlite_store
    # Each model's replicas listen on its one port, each at an address of its own.
    a = engine("127.0.0.2", 0)
    b = engine("127.0.0.3", a.port)
    c = engine("127.0.0.4", 0)
    svc = ControlPlaneService(store)
    ports = {"chat": ("vllm", a.port), "code": ("vllm", c.port)}
    svc.apply_policy(engines_policy(ports), source="test", applied_by="test")
    ready(store, "r1", "chat", "127.0.0.2")
    ready(store, "r2", "chat", "127.0.0.3")
    server = serve(svc, "127.0.0.1:0", stream_poll_s=0.05)
    registry = CollectorRegistry()
    gen = LoadGenerator(
        f"127.0.0.1:{server.port}",
        {CHAT: steady(40.0), CODE: steady(10.0)},
        registry=registry,
        report_every_s=1.0,
    )
    gen.start()
    try:
        began = time.monotonic()
        until("chat's requests served", lambda: gen.totals(CHAT).outcomes[OK] >= 80)
        rate = gen.totals(CHAT).sent / (time.monotonic() - began)
        assert 20 < rate < 80  # ~40/s (Poisson, and the first snapshot's wait)
        chat = gen.totals(CHAT)
        spread = chat.by_target
        assert set(spread) == {a.address, b.address}
        assert min(spread.values()) > 0.3 * sum(spread.values())  # both, about evenly
        code = gen.totals(CODE)
        assert code.outcomes[NO_ENDPOINT] > 0 and set(code.outcomes) == {NO_ENDPOINT}

        # code gets an endpoint: its requests go there from the next snapshot on.
        ready(store, "r3", "code", "127.0.0.4")
        until("code's requests served", lambda: gen.totals(CODE).outcomes[OK] >= 5)

        # r2 is drained: it leaves the endpoints, and nothing more is sent to it.
        set_state(store, "r2", "draining")
        until("r2 left the generator's list", lambda: gen.targets.of(CHAT) == (a.address,))
        time.sleep(0.2)  # (requests sent just before the snapshot finish)
        sent_to_b = gen.totals(CHAT).by_target[b.address]
        time.sleep(1.0)
        assert gen.totals(CHAT).by_target[b.address] == sent_to_b
        assert set(gen.totals(CHAT).outcomes) == {OK}  # none lost on the way

        # An engine that dies under load: its requests fail (counted), the generator goes on.
        c.close()
        until("code's failures counted", lambda: gen.totals(CODE).outcomes[REFUSED] > 0)
    finally:
        gen.stop()
        server.stop(grace=0)
    served = gen.totals(CHAT).outcomes[OK]
    assert served <= a.state.completions + b.state.completions  # each one the engines served
    assert registry.get_sample_value(
        "gpucap_demo_requests_total", {"customer": "acme", "model": "chat", "outcome": "ok"}
    ) == float(served)
    assert (registry.get_sample_value("gpucap_demo_request_seconds_count", {
        "customer": "acme", "model": "chat"}) or 0) == float(served)  # fmt: skip
