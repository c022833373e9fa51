"""The demo's wiring: the simulated clouds' nodes as local processes (``providers.sim.local``)
booting from their rendered user data (a node token each, their phases reported to the
daemon's own HTTP port), probed over HTTP as real nodes are, their metrics read by a real
Prometheus or the built-in scraper (``controlplane.demo.metrics``), and the load generator
sending them requests. Each run starts a fresh world: the simulated cloud lives in memory,
so an earlier run's database or series would describe instances that exist nowhere.

With ``sim_state`` the simulated cloud lives in that file instead (``providers.sim.state``),
and nothing is wiped: a restarted daemon, or a second one on the same database, finds the
cloud as it was. Its local nodes' disks are beside it (``<file>.nodes/``), so a daemon that
takes over a node (``providers.sim.shared``) boots it from the same folder."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path

from controlplane.daemon import Companion, Wiring
from controlplane.demo import NODES_SUBDIR
from controlplane.demo.companions import DemoLoad, LocalNodesRunning
from controlplane.demo.metrics import DemoMetrics
from controlplane.demo.traffic import DEMO_SHAPES, EMULATOR_ARGS
from controlplane.loop import Tuning
from controlplane.loop.context import BootConfig
from controlplane.metrics_sources import ModelKey, TrafficShape
from controlplane.node_tokens import NODE_TOKEN_KEY_FILE, NodeTokens
from controlplane.probes import HttpProber
from controlplane.resolvers import SimResolver
from controlplane.telemetry import Metrics
from providers.credentials import load_or_create_key
from providers.sim import SimCloud, SimTimings
from providers.sim.cloud import open_shared
from providers.sim.local import LocalNodes
from providers.sim.shared import SharedLocalNodes
from schema.types import Cloud

NETWORK_ENV = "GPUCAP_DEMO_NETWORK"  # the local nodes' addresses (default: 127/8)

# The loop's intervals and TTLs compressed so the demo moves in seconds.
DEMO_TUNING = replace(
    Tuning(),
    collect_s=1.0,
    decide_s=2.0,
    place_s=2.0,
    reconcile_s=1.0,
    offerings_every_s=10.0,
    gc_every_s=20.0,
    capacity_block_s=30.0,
    quota_block_s=60.0,
    auth_block_s=60.0,
    stable_window_s=12.0,
    burst_window_s=3.0,
    scale_down_delay_s=20.0,
    backoff_base_s=0.5,
    backoff_max_s=5.0,
    cold_start_scale=5.0 / 1500.0,  # ~5 s instead of ~25 min: a local node boots in seconds
    provision_timeout_s=120.0,
    surge_timeout_s=60.0,
)

Capacity = Mapping[tuple[Cloud, str, str], int]  # (cloud, region, instance type) -> nodes


def local_wiring(
    state_dir: Path,
    policy: tuple[str, str],
    tuning: Tuning,
    *,
    shapes: Mapping[ModelKey, TrafficShape] | None,
    network: str = "127.0.0.0/8",
    default_capacity: int = 64,
    capacity: Capacity | None = None,
    sim_state: Path | None = None,
    database_url: str | None = None,
) -> Wiring:
    """``policy``: (source, YAML); ``shapes``: the load generator's (None: none runs).
    ``sim_state``: the simulated cloud's state file (None: in memory, a fresh world);
    ``database_url``: the store (None: ``demo.db`` in ``state_dir``, emptied first unless
    the cloud persists)."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    db = state_dir / "demo.db"
    if sim_state is None and database_url is None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{db}{suffix}")
    shutil.rmtree(state_dir / "prometheus", ignore_errors=True)
    nodes_root = state_dir / NODES_SUBDIR if sim_state is None else Path(f"{sim_state}.nodes")
    nodes = LocalNodes(nodes_root, network=network, emulator_args=EMULATOR_ARGS, ready_poll_s=0.2)
    # An instance "runs" a second after its create; its node is ready once its bootstrap
    # has started the engine and the engine answers the daemon's probe.
    timings = SimTimings(boot_s=1.0, serve_s=0.0, terminate_s=1.0)
    if sim_state is None:
        world = SimCloud(timings=timings, default_capacity=default_capacity, local_nodes=nodes)
    else:  # (on wall time: the file's timestamps outlive this process)
        world = open_shared(
            sim_state, timings=timings, default_capacity=default_capacity, local_nodes=nodes
        )
    for (cloud, region, instance_type), n in (capacity or {}).items():
        world.set_capacity(cloud, region, instance_type, n)
    telemetry = Metrics()
    metrics = DemoMetrics(state_dir, telemetry)
    # Started in this order, stopped in the reverse: the load first, the nodes last.
    running: Companion = LocalNodesRunning(nodes) if sim_state is None else SharedLocalNodes(world)
    companions: list[Companion] = [running, metrics]
    if shapes is not None:
        companions.append(DemoLoad(shapes))
    return Wiring(
        database_url=database_url or f"sqlite:///{db}",
        providers=SimResolver(world),
        health=HttpProber(),
        metrics_source=metrics,
        tuning=tuning,
        policy_texts=[policy],
        telemetry=telemetry,
        boot=BootConfig(NodeTokens(load_or_create_key(state_dir / NODE_TOKEN_KEY_FILE))),
        boot_reports_here=True,
        companions=companions,
    )


def demo_wiring(
    state_dir: Path, *, sim_state: Path | None = None, database_url: str | None = None
) -> Wiring:
    """``gpucap daemon --demo``: the demo policy and traffic. Small pools, so bursts spill
    from the customer's AWS to its GCP and then to shared OCI, as real stockouts make them."""
    text = resources.files("controlplane.demo").joinpath("local-policy.yaml").read_text()
    return local_wiring(
        state_dir,
        ("demo/local-policy.yaml", text),
        DEMO_TUNING,
        shapes=DEMO_SHAPES,
        network=os.environ.get(NETWORK_ENV, "127.0.0.0/8"),
        default_capacity=1,
        capacity={(Cloud.AWS, "us-east-1", "p5.4xlarge"): 6},
        sim_state=sim_state,
        database_url=database_url,
    )
