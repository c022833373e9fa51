"""Two daemons on one PostgreSQL database, in this process, probed as Kubernetes would:
``/healthz`` and ``/readyz`` over real HTTP and gRPC health, for a leader, a standby, a
stalled job and a store that went away (a TCP proxy in front of PostgreSQL, cut)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy.engine import make_url

from autoscaler.types import MetricsSample
from controlplane.daemon import Daemon, Wiring
from controlplane.loop import Tuning
from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.resolvers import SimHealth, SimResolver
from providers.sim import SimCloud
from schema.daemon_config import DaemonConfig, GrpcConfig, LeadershipConfig
from tests.component.test_control_loop import POLICY
from tests.component.test_leadership import pg_url  # noqa: F401  (fixture)

TTL = 1.0
FAST = replace(
    Tuning(),
    collect_s=0.2,
    decide_s=0.5,
    place_s=0.5,
    reconcile_s=0.5,
    offerings_every_s=5.0,
    staging_s=5.0,
    images_s=5.0,
)


class Stallable:
    """A metrics source that serves no data, and hangs while ``flowing`` is cleared: the
    collect job then never finishes its tick (what a hung query or socket does)."""

    def __init__(self) -> None:
        self.flowing = threading.Event()
        self.flowing.set()

    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        self.flowing.wait(timeout=60)
        return {}


def make_daemon(url: str, source: Stallable | None = None, **grpc_addr: str) -> Daemon:
    sim = SimCloud()
    wiring = Wiring(
        database_url=url,
        providers=SimResolver(sim),
        health=SimHealth(sim),
        metrics_source=source or Stallable(),
        tuning=FAST,
        policy_texts=[("demo", POLICY)],
    )
    config = DaemonConfig(
        grpc=GrpcConfig(addr=grpc_addr.get("addr", "127.0.0.1:0")),
        metrics_addr=grpc_addr.get("metrics", "127.0.0.1:0"),
        leadership=LeadershipConfig(ttl_s=TTL, ready_intervals=3),
    )
    return Daemon(config, wiring)


def get(d: Daemon, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}{path}", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def grpc_health(d: Daemon) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{d.grpc_port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        return int(stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status)


def until(what: Callable[[], bool], within: float, step: float = 0.05) -> float:
    """Seconds until ``what()`` held; fails after ``within``."""
    t0 = time.monotonic()
    while not what():
        assert time.monotonic() - t0 < within, f"not within {within} s"
        time.sleep(step)
    return time.monotonic() - t0


@pytest.fixture
def started() -> Iterator[Callable[[Daemon], Daemon]]:
    running: list[Daemon] = []

    def start(d: Daemon) -> Daemon:
        running.append(d)
        d.start()
        return d

    yield start
    for d in reversed(running):
        d.stop()


SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, 2


def test_leader_and_standby_are_ready_a_stalled_job_is_not_and_a_clean_stop_hands_over(
    pg_url: str,  # noqa: F811
    started: Callable[[Daemon], Daemon],
) -> None:
    source = Stallable()
    a = started(make_daemon(pg_url, source))
    b = started(make_daemon(pg_url))
    assert get(a, "/healthz") == (200, {"alive": True})
    code, body = get(a, "/readyz")
    assert (code, body["role"], body["failed"]) == (200, "leader", []), body
    assert "token 1" in body["checks"]["lease"]["detail"]
    code, body = get(b, "/readyz")
    assert (code, body["role"]) == (200, "standby"), body
    assert a.leadership is not None and a.leadership.holder in body["checks"]["lease"]["detail"]
    # gRPC health follows readiness as the daemon re-checks it: a job that waited for a
    # core on a loaded machine may flip it for a moment (seen in CI), so wait for both.
    until(lambda: grpc_health(a) == grpc_health(b) == SERVING, 10)
    # Only the leader's jobs act; the standby's fire (beats) without a tick of work.
    until(lambda: any(t.runs for t in a.job_ticks.snapshot()), 10)
    assert b.job_ticks.snapshot() == [] and b.job_ticks.beats()

    source.flowing.clear()  # A's collect hangs inside its tick
    until(lambda: get(a, "/readyz")[0] == 503, 10)
    code, body = get(a, "/readyz")
    assert body["failed"] == ["jobs"] and "collect_metrics" in body["checks"]["jobs"]["detail"]
    until(lambda: grpc_health(a) == NOT_SERVING, 5)
    assert get(a, "/healthz")[0] == 200  # alive all the same: restart is not the cure here
    assert get(b, "/readyz")[0] == 200

    source.flowing.set()
    a.stop()  # releases the lease: B takes over at its next look (TTL/3), not after a TTL
    took = until(lambda: get(b, "/readyz")[1]["role"] == "leader", 2 * TTL)
    assert took < TTL
    assert "token 2" in get(b, "/readyz")[1]["checks"]["lease"]["detail"]
    until(lambda: any(t.runs for t in b.job_ticks.snapshot()), 5)  # and acts


class Proxy:
    """A TCP forwarder to PostgreSQL that the test can cut: the database going away, as
    the daemon sees it, without stopping the shared server."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.open:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                return
            upstream = socket.create_connection(self.target)
            self.conns += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(src, dst), daemon=True).start()

    def cut(self) -> None:
        self.open = False
        self.listener.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass


def test_a_store_that_goes_away_makes_the_daemon_unready_and_it_stops_acting(
    pg_url: str,  # noqa: F811
    started: Callable[[Daemon], Daemon],
) -> None:
    url = make_url(pg_url)
    proxy = Proxy((url.host or "127.0.0.1", url.port or 5432))
    via_proxy = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    d = make_daemon(via_proxy)
    try:
        started(d)
        assert get(d, "/readyz")[0] == 200
        proxy.cut()
        code, body = get(d, "/readyz")
        assert code == 503 and "store" in body["failed"], body
        # The lease lapses on the daemon's own clock: it stops acting, then the lease
        # table's silence fails that check too.
        assert d.leadership is not None
        until(lambda: not d.leadership.acting(), 2 * TTL)  # type: ignore[union-attr]
        until(lambda: {"lease", "store"} <= set(get(d, "/readyz")[1]["failed"]), 3 * TTL)
        assert get(d, "/healthz")[0] == 200
    finally:
        proxy.cut()


def test_a_second_daemon_on_a_used_address_fails_to_start(
    pg_url: str,  # noqa: F811
    started: Callable[[Daemon], Daemon],
) -> None:
    a = started(make_daemon(pg_url))
    b = make_daemon(pg_url, addr=f"127.0.0.1:{a.grpc_port}")
    with pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1:\d+: address in use"):
        b.start()
    b.stop()
    c = make_daemon(pg_url, metrics=f"127.0.0.1:{a.metrics_port}")
    with pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1:\d+ for /metrics"):
        c.start()
    c.stop()
    assert get(a, "/readyz")[0] == 200  # the first one is untouched
