"""A local node of the simulated cloud (providers/sim/local.py), for real: a create through
the sim provider carrying a node's rendered user data boots a process tree on a loopback
address of its own, running bootstrap/node.sh with the engine emulator as its container. It
fetches its weights from a file:// URI into its own folder, reports every phase to the
daemon's HTTP port with its token; its engine answers health, metrics and a completion at
the node's address; a killed engine fails the daemon's HTTP probe; a terminate, whether the
node serves or still boots, leaves no process of it alive. A node stopped and started again
boots as a cloud's does (cloud-init's per-boot scripts, not the whole document again): it
runs its bootstrap again, fetches the weights the stop wiped and reports every phase again.
(SQLite only: the phase reports' store is tested on both backends in test_node_phases.)"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bootstrap import NodeBoot, render
from controlplane.api import ControlPlaneService
from controlplane.lifecycle.health import Probe
from controlplane.probes import HttpProber, ProbeTarget
from controlplane.store.db import Store
from controlplane.store.models import NodePhaseReport
from providers.base import NodeRequest
from providers.sim import SimCloud, SimProvider, SimTimings
from providers.sim.local import LocalNodes
from providers.sim.standins import alive, engine_pid
from runtimes import ENGINES, resolve
from schema.catalog import parse_gpu_shape
from schema.runtime import Engine, Runtime
from schema.types import Cloud
from tests.component.test_node_phases import TOKENS, booting_node, phases, phases_endpoint
from tests.unit.test_bootstrap import reports_endpoint

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux routes 127/8 to lo")

PHASES = ["booted", "driver_ok", "image_pulled", "weights_fetched", "engine_started", "ready"]
SPEC = ENGINES[Engine.VLLM]
RUNNING = "{{.State.Running}}"


def network() -> str:
    """A /24 of 127/8 of this test's own (tests run in parallel, each with its nodes)."""
    return f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.0/24"


def user_data(
    node_id: str,
    report_url: str | None = None,
    weights: str | None = None,
    fallbacks: tuple[str, ...] = (),
) -> str:
    return render(
        NodeBoot(
            node_id=node_id,
            customer="acme",
            model="chat-8b",
            cloud=Cloud.AWS,
            gpus=8,
            launch=resolve(Runtime(engine=Engine.VLLM), parse_gpu_shape("8xH100"), "chat-8b"),
            weights_uri=weights,
            weights_fallbacks=fallbacks,
            report_url=report_url,
            token=TOKENS.for_node(node_id) if report_url else None,
            ready_timeout_s=60,
        )
    )


def create(provider: SimProvider, node_id: str, data: str) -> tuple[str, str]:
    """(instance id, private address) of a new p5.48xlarge (8 H100)."""
    req = NodeRequest(node_id, "p5.48xlarge", "us-east-1", user_data=data)
    node = provider.create_node(req).node
    assert node.private_ip is not None
    return node.instance_id, node.private_ip


def until(what: str, ok: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def probe(node_id: str, instance_id: str, address: str) -> Probe:
    target = ProbeTarget(
        node_id,
        instance_id,
        address,
        SPEC.port,
        SPEC.health_path,
        SPEC.metrics.path,
        (SPEC.metrics.running, SPEC.metrics.waiting),
        read_load=True,
    )
    return HttpProber().probe([target])[node_id]


def group_alive(group: int) -> list[int]:
    """The processes of a process group still running (zombies are not)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == group and alive(int(proc.name)):
            out.append(int(proc.name))
    return out


def tool(home: Path, name: str, *args: str) -> str:
    """What one of the node's stand-in tools prints."""
    argv = [str(home / "bin" / name), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def complete(address: str) -> dict[str, Any]:
    body = json.dumps({"model": "chat-8b", "prompt": "hello there", "max_tokens": 4}).encode()
    url = f"http://{address}:{SPEC.port}/v1/completions"
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer: dict[str, Any] = json.loads(r.read())
        return answer


def test_a_local_node_boots_reports_serves_and_leaves_nothing(store: Store, tmp_path: Path) -> None:
    booting_node(store, "n-3")
    weights = tmp_path / "nfs" / "chat-8b"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text("{}")
    with (
        phases_endpoint(ControlPlaneService(store)) as report_url,
        LocalNodes(tmp_path / "nodes", network=network()) as nodes,
    ):
        world = SimCloud(timings=SimTimings(boot_s=0, serve_s=0), local_nodes=nodes)
        provider = SimProvider(Cloud.AWS, "acme-aws", world)
        started = time.monotonic()
        iid, address = create(provider, "n-3", user_data("n-3", report_url, f"file://{weights}"))
        assert address.startswith("127.") and address != "127.0.0.1"
        assert nodes.address_of(iid) == address

        until("the node reported ready", lambda: ("n-3", "ready") in phases(store))
        took = time.monotonic() - started
        assert [p for n, p in phases(store) if n == "n-3"] == sorted(PHASES)
        with store.session() as s:  # (the daemon keeps where the weights came from)
            detail = s.scalar(
                select(NodePhaseReport.detail).where(NodePhaseReport.phase == "weights_fetched")
            )
        assert detail == f"file://{weights}"
        assert probe("n-3", iid, address) == Probe(True, 0)
        answer = complete(address)
        assert answer["model"] == "chat-8b" and answer["usage"]["completion_tokens"] == 4
        assert took < 15, f"{took:.1f} s from create to ready"

        home = tmp_path / "nodes" / iid
        assert (home / "mnt/gpucap/weights/config.json").read_text() == "{}"  # (file://)
        assert tool(home, "hostname", "-I").split() == [address]
        gpus = tool(home, "nvidia-smi", "--query-gpu=name", "--format=csv,noheader")
        assert gpus.splitlines() == ["NVIDIA H100"] * 8
        engine = engine_pid(home)
        assert engine is not None and alive(engine)
        group = os.getpgid(engine)  # the bootstrap's: it ran the engine's "docker run"
        assert tool(home, "docker", "inspect", "-f", RUNNING, "gpucap-engine") == "true\n"
        assert nodes.kill_engine(iid)
        assert probe("n-3", iid, address) == Probe(False)
        assert tool(home, "docker", "inspect", "-f", RUNNING, "gpucap-engine") == "false\n"
        assert not nodes.kill_engine(iid)  # (dead already)

        provider.terminate_node("us-east-1", iid)
        assert nodes.address_of(iid) is None
        assert group_alive(group) == []


def test_a_node_terminated_while_it_boots_leaves_no_process(tmp_path: Path) -> None:
    """Its engine still loading: the bootstrap polls its health, the engine lives."""
    with LocalNodes(
        tmp_path / "nodes", network=network(), emulator_args=["--load-s", "60"]
    ) as nodes:
        world = SimCloud(local_nodes=nodes)
        provider = SimProvider(Cloud.AWS, "acme-aws", world)
        iid, address = create(provider, "n-5", user_data("n-5"))
        home = tmp_path / "nodes" / iid
        until("the engine started", lambda: engine_pid(home) is not None)
        engine = engine_pid(home)
        assert engine is not None
        group = os.getpgid(engine)
        until("the bootstrap polls", lambda: "engine_started" in (home / "boot.log").read_text())
        assert len(group_alive(group)) >= 2  # the bootstrap and the engine (and its tools)
        assert probe("n-5", iid, address) == Probe(False)

        provider.terminate_node("us-east-1", iid)
        assert group_alive(group) == []
        assert "phase ready" not in (home / "boot.log").read_text()


def test_a_stopped_and_started_node_boots_again_and_fetches_the_wiped_weights(
    tmp_path: Path,
) -> None:
    """Its disk (the folder) stays, its instance store (the weights) does not: the second
    boot runs the bootstrap from cloud-init's per-boot directory (the document's files are
    not written again), reports every phase again, fetches the weights again from the
    first source that has them, and serves at the address the node had."""
    weights = tmp_path / "nfs" / "chat-8b"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text('{"layers": 32}')
    with (
        reports_endpoint() as (report_url, got),
        LocalNodes(tmp_path / "nodes", network=network()) as nodes,
    ):
        timings = SimTimings(boot_s=0, serve_s=0, terminate_s=0, start_s=0)
        world = SimCloud(timings=timings, local_nodes=nodes)
        provider = SimProvider(Cloud.AWS, "acme-aws", world)
        sources = f"file://{tmp_path}/gone", (f"file://{weights}",)
        iid, address = create(provider, "n-8", user_data("n-8", report_url, *sources))
        home = tmp_path / "nodes" / iid
        served = home / "mnt/gpucap/weights/config.json"
        until("the node reported ready", lambda: "ready" in [r["phase"] for r in got])
        assert served.read_text() == '{"layers": 32}'
        (home / "etc/gpucap/engine.env").write_text("ON_DISK=1\n")  # (the disk's, kept)

        provider.stop_node("us-east-1", iid)
        assert nodes.address_of(iid) is None and probe("n-8", iid, address) == Probe(False)
        first = list(got)
        got.clear()
        provider.start_node("us-east-1", iid)
        assert nodes.address_of(iid) == address
        until("the node reported ready again", lambda: "ready" in [r["phase"] for r in got])

        assert [r["phase"] for r in first] == [r["phase"] for r in got] == PHASES
        [fetched] = [r["detail"] for r in got if r["phase"] == "weights_fetched"]
        assert fetched == f"file://{weights}"  # (fetched again: the stop wiped them)
        assert served.read_text() == '{"layers": 32}'
        assert (home / "etc/gpucap/engine.env").read_text() == "ON_DISK=1\n"
        assert probe("n-8", iid, address) == Probe(True, 0)
        log = (home / "boot.log").read_text()
        assert log.count("phase booted") == 2
        assert log.count(f"weights not fetched from file://{tmp_path}/gone") == 2


def test_without_local_nodes_or_user_data_an_instance_lives_in_memory(tmp_path: Path) -> None:
    with LocalNodes(tmp_path / "nodes", network=network()) as nodes:
        provider = SimProvider(Cloud.AWS, "acme-aws", SimCloud(local_nodes=nodes))
        iid, address = create(provider, "n-6", "")
        assert nodes.address_of(iid) is None and address.startswith("10.0.")
        assert not (tmp_path / "nodes" / iid).exists()
    iid, address = create(SimProvider(Cloud.AWS, "a", SimCloud()), "n-7", user_data("n-7"))
    assert address.startswith("10.0.")
