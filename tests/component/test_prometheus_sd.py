"""A real Prometheus configured with nothing but ``http_sd_configs`` pointing at gpucap's
``/sd/prometheus`` scrapes every engine gpucap lists, on both store backends.

Three fake engines (tests/fakes/engine_server.py: vLLM, SGLang and TensorRT-LLM, each on
its own port, serving its own metric names at its own metrics path) stand for three models'
replicas. The models' policy names each engine and port (``runtime: {engine, port}``); the
daemon's loop brings one replica of each to ready on the simulated cloud, whose instances
here report 127.0.0.1 as their private address (where the fakes listen). gpucap's HTTP
endpoint serves the discovery as the daemon serves it. Prometheus must find each engine
with the labels gpucap gave it and scrape its metrics at the path gpucap named (the
TensorRT-LLM fake answers 404 at ``/metrics``, so a lost ``__metrics_path__`` reads down),
and must keep the target of a replica on-call drains (``immediate``) while it drains, then
drop it once the replica is gone.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from autoscaler import GpucapAutoscaler
from controlplane import http_endpoint
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Account as AccountRow
from controlplane.telemetry import Metrics
from providers.base import CloudNode, CreateResult, NodeRequest, Provider
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimTimings
from tests.component.test_control_loop import TUNING, Clock, ScriptedLoad, run
from tests.fakes.engine_server import FakeEngine, fake_engines
from tests.tools import tool

CUSTOMER = "acme"
JOB = "gpucap-engines"
WAIT_S = 30.0
HERE = "127.0.0.1"


@pytest.fixture
def fake_engine() -> Iterator[Callable[..., FakeEngine]]:
    with fake_engines() as start:
        yield start


def policy(engines: Mapping[str, FakeEngine]) -> str:
    models = "".join(
        f"""
  - name: {name}
    shapes: [{{shape: 1xH100, max_concurrency: 16}}]
    min_replicas: 1
    max_replicas: 1
    clouds: [aws]
    runtime: {{engine: {e.spec.engine.value}, port: {e.port}}}
"""
        for name, e in engines.items()
    )
    return f"""customer: {CUSTOMER}
accounts:
  - name: acme-aws
    cloud: aws
    owner: customer
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::111122223333:role/gpucap-acme
models:{models}"""


class _OnThisHost:
    """One account of the simulated cloud whose instances are at 127.0.0.1."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner
        self.cloud, self.account = inner.cloud, inner.account

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_node(self, request: NodeRequest) -> CreateResult:
        result = self._inner.create_node(request)
        return replace(result, node=replace(result.node, private_ip=HERE))

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        node = self._inner.describe_node(region, instance_id)
        return None if node is None else replace(node, private_ip=HERE)

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return [replace(n, private_ip=HERE) for n in self._inner.list_nodes(region, tags)]


class OnThisHost:
    """The simulated cloud, every instance's private address this host's."""

    def __init__(self, sim: SimResolver) -> None:
        self._sim = sim

    def provider(self, customer: str, account: AccountRow) -> Provider:
        return _OnThisHost(self._sim.provider(customer, account))  # type: ignore[return-value]


def until(what: str, ok: Callable[[], tuple[bool, object]], log: Path) -> None:
    """Poll ``ok`` (-> done, what was seen) for up to WAIT_S seconds."""
    deadline = time.monotonic() + WAIT_S
    seen: object = None
    while time.monotonic() < deadline:
        done, seen = ok()
        if done:
            return
        time.sleep(0.25)
    tail = log.read_text()[-1500:] if log.exists() else ""
    raise AssertionError(f"after {WAIT_S:g} s, {what}; last seen: {seen!r}\nprometheus: {tail}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HERE, 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@contextlib.contextmanager
def prometheus(sd_url: str, workdir: Path) -> Iterator[tuple[str, Path]]:
    """Prometheus with one job discovered from ``sd_url`` only; yields (its URL, its log)."""
    binary = tool("prometheus")
    config = workdir / "prometheus.yml"
    job = {
        "job_name": JOB,
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "http_sd_configs": [{"url": sd_url, "refresh_interval": "1s"}],
    }
    config.write_text(json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": [job]}))
    log = workdir / "prometheus.log"
    for _attempt in range(3):  # a port taken between choosing and binding: choose again
        port = free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address={HERE}:{port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"http://{HERE}:{port}"
        try:
            deadline = time.monotonic() + WAIT_S
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    urllib.request.urlopen(f"{url}/-/ready", timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            if proc.poll() is None:
                yield url, log
                return
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    raise AssertionError(f"prometheus did not start: {log.read_text()[-1500:]}")


def active_targets(url: str) -> dict[str, tuple[str, str, dict[str, str]]]:
    """instance -> (health, scrape URL, labels) of every active target."""
    doc = get_json(f"{url}/api/v1/targets?state=active")
    return {
        t["labels"]["instance"]: (t["health"], t["scrapeUrl"], t["labels"])
        for t in doc["data"]["activeTargets"]
    }


def expected_targets(
    engines: Mapping[str, FakeEngine], models: Sequence[str]
) -> dict[str, tuple[str, str, dict[str, str]]]:
    return {
        e.address: (
            "up",
            e.url + e.spec.metrics.path,
            {
                "customer": CUSTOMER,
                "model": name,
                "engine": e.spec.engine.value,
                "instance": e.address,
                "job": JOB,
            },
        )
        for name, e in engines.items()
        if name in models
    }


def query(url: str, promql: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": promql})
    result: list[dict[str, Any]] = get_json(f"{url}/api/v1/query?{q}")["data"]["result"]
    return result


def test_prometheus_scrapes_every_engine_gpucap_discovers(
    store: Store, fake_engine: Callable[..., FakeEngine], tmp_path: Path
) -> None:
    engines = {
        f"chat-{kind}": fake_engine(kind, model_name=f"org/chat-{kind}")
        for kind in ("vllm", "sglang", "trtllm")
    }
    for n, e in enumerate(engines.values()):
        e.in_flight = 3 + 2 * n  # 3, 5, 7: a mixed-up port reads another model's value
    svc = ControlPlaneService(store)
    svc.apply_policy(policy(engines), source="test", applied_by="test")
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=2, serve_s=2, terminate_s=1), clock=clock)
    loop = ControlLoop(
        LoopContext(
            store=store,
            providers=OnThisHost(SimResolver(sim, retry=NO_RETRY)),
            metrics_source=ScriptedLoad(),
            health=SimHealth(sim),
            autoscaler=GpucapAutoscaler(),
            telemetry=Metrics(),
            tuning=TUNING,
            clock=clock,
        )
    )
    run(loop, clock, 15)
    ready = {e.model: e for e in svc.list_endpoints()}
    assert {m: (e.address, e.port) for m, e in ready.items()} == {
        m: (HERE, e.port) for m, e in engines.items()
    }

    wsgi = http_endpoint.app(CollectorRegistry(), svc.report_node_phase, svc.prometheus_sd)
    server, _ = http_endpoint.serve(HERE, 0, wsgi)
    sd_url = f"http://{HERE}:{server.server_address[1]}{http_endpoint.SD_PATH}"
    try:
        with prometheus(sd_url, tmp_path) as (prom, log):
            want = expected_targets(engines, list(engines))
            until(
                "every engine is an active target, up, labelled as gpucap listed it",
                lambda: (active_targets(prom) == want, active_targets(prom)),
                log,
            )
            for name, e in engines.items():
                promql = f'{e.spec.metrics.running}{{model="{name}"}}'

                def scraped(promql: str = promql, e: FakeEngine = e) -> tuple[bool, object]:
                    got = query(prom, promql)
                    values = [(r["metric"].get("model_name"), r["value"][1]) for r in got]
                    return values == [(e.model_name, f"{e.in_flight:g}")], got

                until(f"{promql} reads the engine's {e.in_flight}", scraped, log)

            drained = "chat-sglang"
            # Drained now, not surge-first (which serves on until a replacement, here at
            # the same address, is ready): the replica leaves the routers' endpoints at
            # once, but stays scraped while its engine finishes its in-flight requests, so
            # its last completions stay in the rates.
            svc.drain_node(ready[drained].node_id, "test: on-call drains it", immediate=True)
            assert drained not in {e.model for e in svc.list_endpoints()}
            assert drained in {e.model for e in svc.scrape_targets()}
            time.sleep(1.5)  # (more than Prometheus' refresh_interval of the discovery)
            assert active_targets(prom) == want
            # Once the replica is gone (held at none, so no replacement comes to the same
            # address), so is its target.
            svc.pin_model(ready[drained].customer, drained, 0)
            run(loop, clock, 10)
            assert drained not in {e.model for e in svc.scrape_targets()}
            rest = expected_targets(engines, [m for m in engines if m != drained])
            until(
                f"{drained}'s target is dropped once its replica is gone, the others stay up",
                lambda: (active_targets(prom) == rest, active_targets(prom)),
                log,
            )
            assert engines[drained].serving  # (it went for gpucap's list, not its health)
    finally:
        server.shutdown()
        server.server_close()
