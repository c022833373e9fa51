"""The daemon as a user runs it: a subprocess, driven through the CLI over gRPC, scraped on
/metrics, stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]

GPUCAP = [sys.executable, "-m", "controlplane.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(addr: str, *args: str) -> dict:
    out = subprocess.run(
        [*GPUCAP, *args, "--addr", addr, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(out.stdout)


class Running:
    def __init__(self, proc: subprocess.Popen[str], addr: str, metrics: int, log: Path) -> None:
        self.proc, self.addr, self.metrics, self.log = proc, addr, metrics, log

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def start(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Running:
    grpc_port, metrics_port = free_port(), free_port()
    addr = f"127.0.0.1:{grpc_port}"
    log = tmp_path / "daemon.log"
    env = {**os.environ, "GPUCAP_STATE_DIR": str(tmp_path / "state"), **(env or {})}
    proc = subprocess.Popen(
        [
            *GPUCAP,
            "daemon",
            *args,
            "--grpc-addr",
            addr,
            "--metrics-addr",
            f"127.0.0.1:{metrics_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited early:\n{log.read_text()}")
        try:
            cli(addr, "status")
            return Running(proc, addr, metrics_port, log)
        except subprocess.CalledProcessError:
            time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"daemon did not answer within 30 s:\n{log.read_text()}")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Running]:
    # Its nodes are local processes on a /24 of this test's own; its metrics come from the
    # built-in scraper (tests/e2e/test_demo_local_nodes.py runs the demo's Prometheus).
    network = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.0/24"
    env = {"GPUCAP_DEMO_PROMETHEUS": "", "GPUCAP_DEMO_NETWORK": network}
    d = start(tmp_path, "--demo", env=env)
    yield d
    if d.proc.poll() is None:
        d.proc.kill()


# The demo runs in real time: alone, its first node is ready about 6 s in, a model scales up
# at about 15 s and its second cloud's node is ready about 30 s in. The deadline leaves room
# for a loaded 2-core CI machine (two test workers beside the daemon, its local nodes and
# each CLI call's own process); it bounds the wait, it does not measure the demo.
DEMO_DEADLINE_S = 120


def test_demo_scales_across_two_clouds_and_stops_cleanly(demo: Running):
    t0 = time.monotonic()
    clouds: set[str] = set()
    scaled = False
    while time.monotonic() - t0 < DEMO_DEADLINE_S and not (scaled and len(clouds) >= 2):
        models = cli(demo.addr, "models")["models"]
        scaled = any(int(m.get("desired_replicas", 0)) > 1 for m in models)
        nodes = cli(demo.addr, "nodes")["nodes"]
        clouds = {n["cloud"] for n in nodes if n["state"] == "ready"}
        time.sleep(1)
    assert scaled, f"no model scaled above one replica within {DEMO_DEADLINE_S} s"
    assert len(clouds) >= 2, f"ready nodes in {clouds} only"

    metrics = urllib.request.urlopen(f"http://127.0.0.1:{demo.metrics}/metrics").read().decode()
    for name in (
        'gpucap_job_tick_seconds_count{job="reconcile"}',
        "gpucap_model_desired_replicas{",
        "gpucap_model_ready_replicas{",
        'gpucap_nodes{pool="demo/',
        'gpucap_demo_requests_total{customer="demo",model="chat-8b",outcome="ok"}',
    ):
        assert name in metrics, name

    events = cli(demo.addr, "events")["events"]
    assert {"replica.launch", "node.created", "node.ready"} <= {e["kind"] for e in events}
    # Its nodes booted for real: each reported its boot to the daemon, phase by phase.
    ready = [n for n in cli(demo.addr, "nodes")["nodes"] if n["state"] == "ready"]
    assert ready and all(n["phases"][-1]["phase"] == "ready" for n in ready), ready

    # The daemon records its own job ticks (controlplane/jobticks.py); status shows them.
    jobs = {j["job"]: j for j in cli(demo.addr, "status")["jobs"]}
    assert {"collect_metrics", "decide", "place", "reconcile"} <= set(jobs)
    assert all(int(j["runs"]) >= 1 for j in jobs.values()), jobs

    # On-call's audit lists the demo's clouds through the daemon's own resolver: every
    # instance is one the store tracks (exit 0, or check=True raises).
    audit = cli(demo.addr, "audit")
    assert audit["clean"] is True, audit
    assert sum(int(site.get("tracked", 0)) for site in audit["sites"]) >= len(ready), audit

    assert demo.stop() == 0
    lines = [json.loads(x) for x in demo.log.read_text().splitlines() if x.startswith("{")]
    assert lines, "no structured log lines"
    assert lines[-1]["event"] == "daemon.stopped"


def test_refuses_a_public_address_without_tls_and_token(tmp_path: Path):
    out = subprocess.run(
        [*GPUCAP, "daemon", "--demo", "--grpc-addr", "0.0.0.0:0", "--metrics-addr", ""],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GPUCAP_STATE_DIR": str(tmp_path)},
    )
    assert out.returncode != 0
    assert "0.0.0.0" in out.stderr and "TLS" in out.stderr


def test_sighup_with_a_bad_policy_keeps_the_last_good_one(tmp_path: Path):
    from importlib import resources

    good = resources.files("controlplane.demo").joinpath("policy.yaml").read_text()
    policy = tmp_path / "demo.yaml"
    policy.write_text(good)
    config = tmp_path / "daemon.yaml"
    config.write_text(
        "provider_mode: sim\n"
        f"database_url: sqlite:///{tmp_path / 'db.sqlite'}\n"
        "policies: [demo.yaml]\n"
        "intervals: {collect_s: 1, decide_s: 1, place_s: 1, reconcile_s: 1}\n"
    )
    d = start(tmp_path, "--config", str(config))
    try:
        before = cli(d.addr, "policy", "show", "demo")
        policy.write_text(good.replace("max_replicas: 12", "max_replicas: -3"))
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 15
        while "policy.rejected" not in d.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.3)
        log = d.log.read_text()
        assert "policy.rejected" in log and "max_replicas" in log
        after = cli(d.addr, "policy", "show", "demo")
        assert after == before
    finally:
        assert d.stop() == 0
