"""The daemon on local nodes, end to end, as the demo runs it (controlplane/demo/wiring.py)
with a small policy and fast tuning: nodes are real processes booting from their rendered
user data (bootstrap/node.sh, the engine emulated), a real Prometheus discovers them from
the daemon's /sd/prometheus, and the demo's load generator sends them real requests from
WatchEndpoints.

The chain: deploy -> every boot phase reported -> ready -> the endpoints in WatchEndpoints
and /sd/prometheus -> Prometheus scrapes the engines -> the autoscaler scales up on those
metrics (its decision says so) -> `gpucap demo kill-engine` crashes one: the node fails its
health checks and is replaced, with a ready replica at every sample -> the load falls and a
scale-down drains a replica, which waits for the requests it holds (none is lost) -> the
daemon stops and no process of it is left."""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from typer.testing import CliRunner

from controlplane.api import ControlPlaneService
from controlplane.cli.main import app
from controlplane.daemon import Daemon
from controlplane.demo import NODES_SUBDIR
from controlplane.demo.loadgen import OK, LoadGenerator
from controlplane.demo.metrics import BINARY_ENV, DemoMetrics
from controlplane.demo.traffic import DECODE_TOKENS_PER_S, PREFILL_S
from controlplane.demo.wiring import DEMO_TUNING, local_wiring
from controlplane.grpc.client import ControlPlaneClient
from controlplane.metrics_sources import TrafficShape
from controlplane.prometheus_source import PrometheusSource
from providers.sim.standins import alive, engine_pid
from schema.daemon_config import DaemonConfig, GrpcConfig
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.tools import tool

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]

CHAT = ("acme", "chat")
PHASES = ["booted", "driver_ok", "image_pulled", "weights_fetched", "engine_started", "ready"]
POLICY = """customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    owner: customer
    regions: [us-east-1]
    credentials: {role_arn: "arn:aws:iam::111122223333:role/gpucap-acme"}
models:
  - name: chat
    shapes: [{shape: 1xH100, max_concurrency: 8}]
    min_replicas: 2
    max_replicas: 4
    clouds: [aws]
    runtime: {engine: vllm}
    health: {failure_threshold: 2, timeout_s: 1, drain_timeout_s: 30}
"""
TUNING = replace(
    DEMO_TUNING, decide_s=1.0, place_s=1.0, stable_window_s=8.0, scale_down_delay_s=5.0
)
# 2 requests/s of 4 s each (8 in flight: the two replicas of the minimum), three times that
# for the first 25 s (24 in flight: more than three replicas' 5.6 each at 70 %).
SERVICE_TOKENS = 400
LOAD = TrafficShape(
    base_rps=2.0,
    service_s=PREFILL_S + SERVICE_TOKENS / DECODE_TOKENS_PER_S,
    tokens_per_request=SERVICE_TOKENS,
    burst_factor=3.0,
    first_burst_s=0.0,
    burst_len_s=25.0,
    burst_every_s=1e6,
    wave_period_s=1e9,
    phase_s=0.0,
)


@dataclass
class Watched:
    """Every WatchEndpoints snapshot, as a router would follow them."""

    snapshots: list[tuple[float, set[str]]] = field(default_factory=list)

    def targets(self) -> set[str]:
        return self.snapshots[-1][1] if self.snapshots else set()


def watch(addr: str, into: Watched, stop: threading.Event) -> None:
    with ControlPlaneClient(addr) as c:
        stream = c.stub.WatchEndpoints(pb.WatchEndpointsRequest(customer="acme"))
        threading.Thread(target=lambda: (stop.wait(), stream.cancel()), daemon=True).start()
        try:
            for snap in stream:
                into.snapshots.append(
                    (time.monotonic(), {f"{e.address}:{e.port}" for e in snap.endpoints})
                )
        except grpc.RpcError:
            pass  # (cancelled at the end)


def until(
    what: str,
    ok: Callable[[], Any],
    timeout_s: float,
    every_s: float = 0.2,
    seen: Callable[[], object] = lambda: "",
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = ok()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {timeout_s:g} s: {what}\n{seen()}"
        time.sleep(every_s)


def story(svc: ControlPlaneService) -> str:
    """The model's last decisions and its nodes, for a failure's message."""
    decisions = svc.list_decisions("acme", "chat", "autoscale")[-6:]
    lines = [f"{d.at} {d.desired} {d.reason}: {d.detail}" for d in decisions]
    nodes = svc.list_nodes("acme", "chat", include_terminal=True)
    return "\n".join(lines + [f"{v.row.id} {v.row.state} {v.row.error or ''}" for v in nodes])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    monkeypatch.setenv(BINARY_ENV, tool("prometheus"))
    network = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.0/24"  # (this test's)
    wiring = local_wiring(tmp_path / "demo", ("test", POLICY), TUNING, shapes=None, network=network)
    config = DaemonConfig(grpc=GrpcConfig(addr="127.0.0.1:0"), metrics_addr="127.0.0.1:0")
    d = Daemon(config, wiring)
    try:
        d.start()
        yield d
    finally:
        d.stop()


@dataclass(frozen=True)
class Drain:
    node: str
    target: str
    holding: int  # the load generator's requests on it when it began draining


class Sampler:
    """Every 0.1 s: the ready replicas (the lowest count since ``lowest_ready`` was set)
    and each healthy node's start of draining, with the requests it then held."""

    def __init__(self, svc: ControlPlaneService, load: LoadGenerator) -> None:
        self.svc, self.load = svc, load
        self.lowest_ready = 10**6
        self.drains: list[Drain] = []
        self._ready: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.lowest_ready = min(self.lowest_ready, len(self.svc.list_endpoints("acme")))
            views = self.svc.list_nodes("acme", "chat", states=["ready", "draining"])
            for v in views:
                if v.row.state == "ready":
                    self._ready.add(v.row.id)
                elif v.row.id in self._ready and v.row.failed_at is None:
                    self._ready.discard(v.row.id)
                    target = f"{v.row.private_ip}:8000"
                    self.drains.append(Drain(v.row.id, target, self.load.targets.in_flight(target)))


def ready_nodes(svc: ControlPlaneService) -> dict[str, Any]:
    return {v.row.id: v for v in svc.list_nodes("acme", "chat", states=["ready"])}


def test_local_nodes_boot_serve_scale_fail_and_drain(daemon: Daemon, tmp_path: Path) -> None:
    svc = daemon.service
    assert svc is not None and daemon.grpc_port and daemon.metrics_port
    metrics = daemon.wiring.metrics_source
    assert isinstance(metrics, DemoMetrics) and isinstance(metrics.source, PrometheusSource)
    assert metrics.prometheus is not None and metrics.prometheus.url is not None
    prom = metrics.prometheus.url
    addr = f"127.0.0.1:{daemon.grpc_port}"
    began = time.monotonic()
    watched, stop_watch = Watched(), threading.Event()
    threading.Thread(target=watch, args=(addr, watched, stop_watch), daemon=True).start()
    load = LoadGenerator(addr, {CHAT: LOAD}, report_every_s=5.0)
    sampler: Sampler | None = None
    try:
        # Deploy -> phases -> ready: both replicas of the minimum, within seconds.
        first = until(
            "two ready nodes", lambda: len(ready_nodes(svc)) >= 2 and ready_nodes(svc), 30
        )
        booted_s = time.monotonic() - began

        def reported() -> bool:  # (the node's "ready" may come after the daemon's probe)
            views = ready_nodes(svc)
            return all(n in views and [p.phase for p in views[n].phases] == PHASES for n in first)

        until("every phase reported", reported, 10, seen=lambda: ready_nodes(svc))
        targets = {f"{v.row.private_ip}:8000" for v in first.values()}
        until("both in WatchEndpoints", lambda: targets <= watched.targets(), 10)
        sd = f"http://127.0.0.1:{daemon.metrics_port}/sd/prometheus"
        listed = {t for group in get_json(sd) for t in group["targets"]}
        assert targets <= listed

        # Prometheus scrapes the engines gpucap discovered, under the engine's own names.
        def scraped() -> set[str]:
            q = urllib.parse.urlencode({"query": 'vllm:num_requests_running{model="chat"}'})
            result = get_json(f"{prom}/api/v1/query?{q}")["data"]["result"]
            return {r["metric"]["instance"] for r in result}

        until("Prometheus has both engines' series", lambda: targets <= scraped(), 15)

        # Load: the autoscaler scales up on what Prometheus read from the engines.
        sampler = Sampler(svc, load)
        load.start()
        sampler.start()
        until(
            "a third ready replica", lambda: len(ready_nodes(svc)) >= 3, 40, seen=lambda: story(svc)
        )
        ups = [d for d in svc.list_decisions("acme", "chat", "autoscale") if d.desired > 2]
        assert ups and ups[0].reason.startswith("scale_up"), [(d.reason, d.detail) for d in ups]
        assert "peak load" in ups[0].detail and "queue" in ups[0].detail
        scaled_s = time.monotonic() - began

        # A crashed engine: failed, replaced, and a replica ready all the while.
        before = ready_nodes(svc)
        victim = sorted(before)[0]
        victim_target = f"{before[victim].row.private_ip}:8000"
        sampler.lowest_ready = len(before)
        kill = ["demo", "kill-engine", victim, "--addr", addr]
        result = CliRunner().invoke(app, [*kill, "--state-dir", str(tmp_path / "demo")])
        assert result.exit_code == 0 and "killed the engine" in result.output, result.output

        def replaced() -> bool:
            now = ready_nodes(svc)
            return victim not in now and bool(set(now) - set(before))

        until("the crashed node replaced", replaced, 40, seen=lambda: story(svc))
        assert sampler.lowest_ready >= 1
        (gone,) = [v for v in svc.list_nodes(include_terminal=True) if v.row.id == victim]
        assert gone.row.failed_at is not None and "health checks" in (gone.row.error or "")

        # The load falls: a scale-down drains a replica while it holds requests, and it
        # goes only once they are served.
        def drained() -> list[Drain]:
            past = {  # (its drain is over once it leaves draining)
                v.row.id
                for v in svc.list_nodes("acme", "chat", include_terminal=True)
                if v.row.state in ("terminating", "terminated")
            }
            return [d for d in sampler.drains if d.node in past and d.holding > 0]

        # (A bound for a loaded machine: alone, the drain is over about 35 s after this.)
        waited = time.monotonic()
        until("a scale-down drain, done", drained, 90, seen=lambda: (sampler.drains, story(svc)))
        drained_s = time.monotonic() - waited
        for d in drained():
            assert load.targets.in_flight(d.target) == 0
        totals = load.totals(CHAT)
        # The only requests lost are the crashed engine's.
        assert set(totals.failed_by_target) <= {victim_target}, totals.failed_by_target
        assert totals.outcomes[OK] > 100
    finally:
        load.stop()
        stop_watch.set()
        if sampler is not None:
            sampler.stop()

    # The daemon stops every local node and its Prometheus: no process of it is left.
    prom_pid = metrics.prometheus.pid
    assert prom_pid is not None
    homes = list((tmp_path / "demo" / NODES_SUBDIR).iterdir())
    pids = [p for h in homes if (p := engine_pid(h)) is not None]
    daemon.stop()
    assert not alive(prom_pid)
    assert pids and not [p for p in pids if alive(p)]
    print(
        f"ready after {booted_s:.1f} s, scaled up after {scaled_s:.1f} s, "
        f"drained {drained_s:.1f} s later"
    )
