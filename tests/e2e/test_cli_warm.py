"""``gpucap warm [MODEL]`` (and gRPC ListWarmPools) against a running API server, on warm
replicas the control loop made on the simulated cloud: a stopped-mode pool fills (booting,
stopping, stopped) and a ready-mode one waits ready, each priced as the place job's gauges
price it; a launch resumes a warm replica (resuming, no longer billed as waiting) while the
pool refills; filters by customer and model; an unknown customer or model is NOT_FOUND."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from autoscaler import GpucapAutoscaler
from controlplane.loop import ControlLoop, LoopContext
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.models import Pool, Replica
from controlplane.telemetry import Metrics
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimTimings
from schema.policy import BLOCK_USD_PER_GB_MONTH
from schema.types import Cloud
from tests.component.test_control_loop import POLICY, TUNING, Clock, ScriptedLoad, run
from tests.e2e.conftest import Daemon, Gpucap

# The demo policy with a stopped-mode warm pool for chat-8b (one 1xH100 node) and a
# ready-mode one for coder-32b (one 8xH200 node).
DEMO = POLICY.replace(
    "    scale_to_zero_grace_s: 60\n  - name: llama-70b",
    "    scale_to_zero_grace_s: 60\n    warm_pool: {max_nodes: 1}\n  - name: llama-70b",
    1,
).replace(
    "    priority: 50\n    scale_to_zero_grace_s: 60\n",
    "    priority: 50\n    scale_to_zero_grace_s: 60\n"
    "    warm_pool: {max_nodes: 1, mode: ready, disk_gb: 500}\n",
    1,
)
# A second customer with a model of the same name, so the filters have something to drop.
BETA = """\
customer: beta
accounts:
  - name: beta-aws
    cloud: aws
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::444455556666:role/gpucap
models:
  - name: chat-8b
    shapes:
      - shape: 1xH100
        max_concurrency: 32
    warm_pool: {max_nodes: 1, disk_gb: 100}
"""
STOPPED_USD_PER_HOUR = 200 * BLOCK_USD_PER_GB_MONTH[Cloud.AWS] / 730  # one 200 GB volume


@dataclass
class Fleet:
    api: Daemon
    loop: ControlLoop
    load: ScriptedLoad
    clock: Clock
    telemetry: Metrics

    def run(self, seconds: int) -> None:
        run(self.loop, self.clock, seconds)

    def at(self) -> str:
        """The loop clock now, as the JSON of a protobuf Timestamp spells it."""
        return datetime.fromtimestamp(self.clock.t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def gauge(self, name: str, p: dict[str, Any]) -> float | None:
        labels = {"customer": p["customer"], "model": p["model"], "pool": p["pool_id"]}
        return self.telemetry.registry.get_sample_value(name, labels)


@pytest.fixture
def fleet(api: Daemon) -> Iterator[Fleet]:
    assert DEMO.count("warm_pool") == 2
    api.service.apply_policy(DEMO, "demo.yaml", "alice")
    api.service.apply_policy(BETA, "beta.yaml", "alice")
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
    load = ScriptedLoad()
    telemetry = Metrics()
    ctx = LoopContext(
        store=api.store,
        providers=SimResolver(sim, retry=NO_RETRY),
        metrics_source=load,
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=telemetry,
        tuning=TUNING,
        clock=clock,
    )
    yield Fleet(api, ControlLoop(ctx), load, clock, telemetry)


def _listing(gpucap: Gpucap, *args: str) -> dict[str, Any]:
    out = gpucap("warm", *args, "-o", "json")
    assert out.exit_code == 0, out.output
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def _entry(data: dict[str, Any], customer: str, model: str) -> dict[str, Any]:
    [entry] = [p for p in data["pools"] if (p["customer"], p["model"]) == (customer, model)]
    return entry


def test_each_pool_fills_and_waits_priced_as_its_mode(gpucap: Gpucap, fleet: Fleet) -> None:
    # Before the loop ran: each warm pool the policies ask for, with nothing in it yet.
    empty = _listing(gpucap)
    assert [(p["customer"], p["model"], p["pool_id"], p["nodes"]) for p in empty["pools"]] == [
        ("beta", "chat-8b", "", 0),
        ("demo", "chat-8b", "", 0),
        ("demo", "coder-32b", "", 0),
    ]
    assert (empty["nodes"], empty["usd_per_hour"]) == (0, 0.0)

    launched_at = fleet.at()
    fleet.run(1)
    seen: dict[str, list[str]] = {}  # chat-8b's warm replica: its states, in order
    since: dict[str, str] = {}  # and when each began
    for _ in range(20):
        data = _listing(gpucap, "demo/chat-8b")
        [replica] = _entry(data, "demo", "chat-8b")["replicas"]
        states = seen.setdefault(replica["id"], [])
        if not states or states[-1] != replica["state"]:
            states.append(replica["state"])
            since[replica["state"]] = replica["since"]
        if replica["state"] == "stopped":
            break
        fleet.run(1)
    assert list(seen.values()) == [["filling", "stopping", "stopped"]], seen
    assert since["filling"] == launched_at  # filling since the place job launched it
    assert since["filling"] < since["stopping"] < since["stopped"]

    data = _listing(gpucap)
    chat = _entry(data, "demo", "chat-8b")
    assert (chat["mode"], chat["max_nodes"], chat["disk_gb"], chat["nodes"]) == (
        "stopped",
        1,
        200,
        1,
    )
    [parked] = chat["replicas"]
    assert (parked["state"], parked["replica_state"], parked["nodes"]) == ("stopped", "stopped", 1)
    assert chat["usd_per_hour"] == pytest.approx(STOPPED_USD_PER_HOUR)
    assert parked["usd_per_hour"] == pytest.approx(STOPPED_USD_PER_HOUR)
    assert chat["block_usd_per_gb_month"] == BLOCK_USD_PER_GB_MONTH[Cloud.AWS]

    coder = _entry(data, "demo", "coder-32b")
    [waiting] = coder["replicas"]
    with fleet.api.store.session() as s:
        pool = s.get(Pool, coder["pool_id"])
        assert pool is not None
        replica = s.get(Replica, waiting["id"])
        assert replica is not None and replica.ready_at is not None
        ready_at = replica.ready_at.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Ready mode: the running node's price, whatever its disk (500 GB here).
    assert (coder["mode"], coder["disk_gb"], waiting["state"], waiting["since"]) == (
        "ready",
        500,
        "ready",
        ready_at,
    )
    assert coder["usd_per_hour"] == pytest.approx(pool.price_usd_per_hour) and pool.cloud == "aws"
    assert coder["node_usd_per_hour"] == pool.price_usd_per_hour

    beta = _entry(data, "beta", "chat-8b")
    assert beta["usd_per_hour"] == pytest.approx(100 * BLOCK_USD_PER_GB_MONTH[Cloud.AWS] / 730)
    assert data["nodes"] == 3 and isinstance(data["nodes"], int)  # (a number, not a string)
    assert data["usd_per_hour"] == pytest.approx(sum(p["usd_per_hour"] for p in data["pools"]))
    # The same figures the place job puts on its gauges (computed apart, from the store),
    # once a place tick has seen what the last reconcile did (the stop completed).
    fleet.loop.place()
    for p in data["pools"]:
        assert fleet.gauge("gpucap_warm_nodes", p) == p["nodes"]
        assert fleet.gauge("gpucap_warm_usd_per_hour", p) == pytest.approx(p["usd_per_hour"])

    table = gpucap("warm")
    assert table.exit_code == 0, table.output
    for p in data["pools"]:  # whole ids: on-call pastes them into other commands
        assert p["pool_id"] in table.stdout
        assert all(r["id"] in table.stdout for r in p["replicas"])
    assert "stopped=1" in table.stdout and "ready=1" in table.stdout
    assert f"total: 3 warm nodes, ${data['usd_per_hour']:.4f}/hour" in table.stdout


def test_a_launch_resumes_the_warm_replica_and_the_pool_refills(
    gpucap: Gpucap, fleet: Fleet
) -> None:
    fleet.load.load[("demo", "chat-8b")] = 5.0
    fleet.run(15)
    [parked] = _entry(_listing(gpucap, "demo/chat-8b"), "demo", "chat-8b")["replicas"]
    assert parked["state"] == "stopped"

    # A scale-up: the place job resumes the warm replica instead of a create, and fills
    # the pool again. Listed before the reconciler asks the cloud to start it.
    fleet.load.load[("demo", "chat-8b")] = 40.0
    for _ in range(5):
        fleet.loop.collect_metrics()
        fleet.loop.decide()
        fleet.loop.place()
        entry = _entry(_listing(gpucap, "demo/chat-8b"), "demo", "chat-8b")
        if len(entry["replicas"]) > 1:
            break
        fleet.loop.reconcile()
        fleet.clock.t += 1
    by_id = {r["id"]: r for r in entry["replicas"]}
    resumed = by_id.pop(parked["id"])
    assert (resumed["state"], resumed["replica_state"], resumed["usd_per_hour"]) == (
        "resuming",
        "resuming",
        0.0,
    )
    assert resumed["since"] == fleet.at()
    [refill] = by_id.values()
    assert refill["state"] == "filling" and refill["since"] == fleet.at()
    # Only the refill waits in the pool: the resumed node is the model's capacity now. It
    # runs until it is stopped, so it costs the node's price until then.
    assert entry["nodes"] == 1
    assert entry["usd_per_hour"] == pytest.approx(entry["node_usd_per_hour"])
    assert refill["usd_per_hour"] == pytest.approx(entry["node_usd_per_hour"])

    fleet.run(10)  # started, then ready: out of the listing, the refill parked
    [again] = _entry(_listing(gpucap, "demo/chat-8b"), "demo", "chat-8b")["replicas"]
    assert again["id"] == refill["id"] and again["state"] == "stopped"


def test_filters_and_unknown_names(gpucap: Gpucap, fleet: Fleet) -> None:
    fleet.run(2)

    def keys(*args: str) -> list[tuple[str, str]]:
        return [(p["customer"], p["model"]) for p in _listing(gpucap, *args)["pools"]]

    assert keys() == [("beta", "chat-8b"), ("demo", "chat-8b"), ("demo", "coder-32b")]
    assert keys("chat-8b") == [("beta", "chat-8b"), ("demo", "chat-8b")]  # every customer's
    assert keys("--customer", "demo") == [("demo", "chat-8b"), ("demo", "coder-32b")]
    assert keys("chat-8b", "--customer", "beta") == [("beta", "chat-8b")]
    assert keys("demo/coder-32b") == [("demo", "coder-32b")]
    only = _listing(gpucap, "demo/coder-32b")
    assert only["nodes"] == only["pools"][0]["nodes"] == 1  # totals of the selection
    assert keys("demo/llama-70b") == []  # a model without a warm pool: none

    none = gpucap("warm", "demo/llama-70b")
    assert none.exit_code == 0 and "no warm pools" in none.stdout
    for args, what in (
        (("nope",), "model 'nope' not found"),
        (("beta/coder-32b",), "model 'beta/coder-32b' not found"),
        (("--customer", "ghost"), "customer 'ghost' not found"),
    ):
        out = gpucap("warm", *args)
        assert out.exit_code == 1, out.output
        assert f"not found: {what}" in out.output
