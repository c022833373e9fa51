"""The reconcile job observes nodes from one ``list_nodes`` per (account, region) per pass,
through the real control loop on the simulated cloud and a real database (both backends),
on a hand-driven clock. The calls are read off the cloud-call counter every provider the
resolvers hand out is metered by (``providers.metered``, exported by
``controlplane.telemetry`` as ``gpucap_cloud_calls_total``), not off a mock: they do not
grow with the nodes; a node deleted behind gpucap's back is still failed and replaced; a
fresh create the listing does not show yet is not failed; a listing that fails leaves its
nodes as they are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.lifecycle.node import DISAPPEARED
from controlplane.loop import ControlLoop, LoopContext
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Account as AccountRow
from controlplane.store.models import Node, UnavailableOffering
from controlplane.telemetry import Metrics
from providers.base import CloudNode, Provider
from providers.errors import TransientError
from providers.ratelimit import BucketSize, CallKind, RateLimiter
from providers.sim import SimCloud, SimProvider, SimTimings
from schema.types import Cloud, NodeState
from tests.component.test_control_loop import TUNING, Clock, ScriptedLoad, live_nodes, run

CUSTOMER, ACCOUNT, REGION = "fleet", "fleet-aws", "us-east-1"
BUDGET = f"{CUSTOMER}/{ACCOUNT}"  # the simulated account of a customer-owned account
# gc (its own listing, every 120 s in production) runs once at the start, not in the passes
# measured.
FLEET_TUNING = replace(TUNING, gc_every_s=3600.0)


def policy(replicas: int) -> str:
    return f"""
customer: {CUSTOMER}
accounts:
  - name: {ACCOUNT}
    cloud: aws
    owner: customer
    regions: [{REGION}]
    credentials:
      role_arn: arn:aws:iam::111122223333:role/gpucap-fleet
models:
  - name: chat-8b
    shapes:
      - shape: 1xH100
        max_concurrency: 32
    min_replicas: {replicas}
    max_replicas: {replicas}
    latency_slo_ms: 500
    clouds: [aws]
"""


@dataclass
class Faulty:
    """The resolver's provider with a listing that lags or fails (the test's knobs); every
    other verb as the simulated cloud answers. Implements the Provider protocol by
    forwarding, so the calls it makes are still metered underneath."""

    inner: Provider
    lag_listings: int = 0  # an instance is left out of its first N listings
    failing: bool = False
    listed: dict[str, int] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        if self.failing:
            raise TransientError("the listing timed out", code="RequestTimeout", region=region)
        out = []
        for node in self.inner.list_nodes(region, tags):
            seen = self.listed.get(node.instance_id, 0)
            self.listed[node.instance_id] = seen + 1
            if seen >= self.lag_listings:
                out.append(node)
        return out


@dataclass
class FaultyResolver:
    sim: SimResolver
    faults: dict[str, Faulty] = field(default_factory=dict)
    lag_listings: int = 0

    def provider(self, customer: str, account: AccountRow) -> Provider:
        key = f"{customer}/{account.name}"
        if key not in self.faults:
            self.faults[key] = Faulty(self.sim.provider(customer, account), self.lag_listings)
        return self.faults[key]  # type: ignore[return-value]


@dataclass
class Fleet:
    loop: ControlLoop
    clock: Clock
    sim: SimCloud
    resolver: FaultyResolver
    telemetry: Metrics

    def faulty(self) -> Faulty:
        return self.resolver.faults[BUDGET]

    def pass_calls(self) -> dict[str, int]:
        """The cloud calls of one reconcile pass, by verb, for the fleet's (account,
        region), read off the exported counter."""
        before = self._calls()
        self.loop.reconcile()
        self.clock.t += 1
        after = self._calls()
        return {v: after[v] - before.get(v, 0) for v in after if after[v] != before.get(v, 0)}

    def _calls(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for metric in self.telemetry.registry.collect():
            for sample in metric.samples:
                labels = sample.labels
                if sample.name == "gpucap_cloud_calls_total" and (
                    labels["account"],
                    labels["region"],
                ) == (BUDGET, REGION):
                    out[labels["verb"]] = int(sample.value)
        return out


def fleet(
    store: Store, replicas: int, lag_listings: int = 0, budget: BucketSize | None = None
) -> Fleet:
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
    svc = ControlPlaneService(store, clock=lambda: datetime.fromtimestamp(clock.t, UTC))
    svc.apply_policy(policy(replicas), source="fleet", applied_by="test")
    load = ScriptedLoad()
    # A write budget on the test's clock (the simulated cloud has none of its own).
    limiter = (
        RateLimiter({Cloud.AWS: {CallKind.WRITE: budget}}, max_wait_s=0.0, clock=clock)
        if budget
        else None
    )
    resolver = FaultyResolver(SimResolver(sim, limiter=limiter), lag_listings=lag_listings)
    telemetry = Metrics()
    ctx = LoopContext(
        store=store,
        providers=resolver,
        metrics_source=load,
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=telemetry,
        tuning=FLEET_TUNING,
        clock=clock,
    )
    return Fleet(ControlLoop(ctx), clock, sim, resolver, telemetry)


def ready(store: Store) -> list[Node]:
    return [n for n in live_nodes(store) if n.state == NodeState.READY]


def behind_our_back(sim: SimCloud) -> SimProvider:
    """The same account as an operator's console sees it (not through gpucap's seam)."""
    return SimProvider(Cloud.AWS, BUDGET, sim)


@pytest.mark.parametrize("replicas", [5, 50])
def test_one_listing_per_account_region_per_pass_whatever_the_nodes(
    store: Store, replicas: int
) -> None:
    f = fleet(store, replicas)
    run(f.loop, f.clock, 20)
    assert len(ready(store)) == replicas
    before = {n.id: (n.state, n.version) for n in live_nodes(store)}
    for _ in range(3):  # steady passes: each one listing, nothing else
        assert f.pass_calls() == {"list": 1}
    after = {n.id: (n.state, n.version) for n in live_nodes(store)}
    assert after == before  # and nothing moved for want of a describe


def test_a_node_deleted_behind_our_back_is_failed_and_replaced(store: Store) -> None:
    f = fleet(store, 5)
    run(f.loop, f.clock, 20)
    victim = sorted(ready(store), key=lambda n: n.id)[0]
    assert victim.instance_id is not None
    behind_our_back(f.sim).terminate_node(REGION, victim.instance_id)
    f.clock.t += 2  # (the simulated cloud takes terminate_s to finish it)
    # Not in the listing: described once to be sure, then failed.
    assert f.pass_calls() == {"list": 1, "describe": 1}
    with store.session() as s:
        row = s.get(Node, victim.id)
        assert row is not None and row.state == NodeState.FAILED
        assert row.error == DISAPPEARED and row.failed_at is not None
    run(f.loop, f.clock, 20)
    nodes = ready(store)
    assert len(nodes) == 5 and victim.id not in {n.id for n in nodes}
    assert f.pass_calls() == {"list": 1}


def test_a_fresh_create_the_listing_does_not_show_yet_is_not_failed(store: Store) -> None:
    f = fleet(store, 3, lag_listings=3)  # each instance missing from its first 3 listings
    run(f.loop, f.clock, 20)
    nodes = live_nodes(store)
    assert len(nodes) == 3 and all(n.state == NodeState.READY for n in nodes)
    assert all(n.failed_at is None for n in nodes)
    with store.session() as s:
        assert not s.scalars(select(Node).where(Node.state == NodeState.FAILED)).all()
    assert f.pass_calls() == {"list": 1}  # listed now: no describe left


def test_while_the_listing_lags_each_unlisted_node_is_described(store: Store) -> None:
    f = fleet(store, 3, lag_listings=1000)  # a listing that never shows them
    run(f.loop, f.clock, 20)
    assert len(ready(store)) == 3  # the describes carried them through
    assert f.pass_calls() == {"list": 1, "describe": 3}


def test_a_failing_listing_leaves_its_nodes_as_they_are(store: Store) -> None:
    f = fleet(store, 5)
    run(f.loop, f.clock, 20)
    victim = sorted(ready(store), key=lambda n: n.id)[0]
    assert victim.instance_id is not None
    before = {n.id: (n.state, n.version, n.probe_failures) for n in live_nodes(store)}
    f.faulty().failing = True
    behind_our_back(f.sim).terminate_node(REGION, victim.instance_id)
    f.clock.t += 2
    labels = {"cloud": "aws", "account": ACCOUNT, "type": "TransientError"}
    for passes in range(1, 4):
        assert f.pass_calls() == {}  # (the failed listing never reached the cloud)
        counted = f.telemetry.registry.get_sample_value("gpucap_provider_errors_total", labels)
        assert counted == passes
        after = {n.id: (n.state, n.version, n.probe_failures) for n in live_nodes(store)}
        assert after == before  # none failed, none moved, no probe failure counted
    f.faulty().failing = False  # the cloud answers again: the deletion is seen
    assert f.pass_calls() == {"list": 1, "describe": 1}
    with store.session() as s:
        row = s.get(Node, victim.id)
        assert row is not None and row.state == NodeState.FAILED


def test_a_leaving_intent_without_an_instance_id_is_found_by_its_tag(store: Store) -> None:
    """A drain racing the create (or a crash before the id was recorded): the instance is
    found in the same listing by its intent tag and terminated, with no call of its own."""
    f = fleet(store, 1)
    run(f.loop, f.clock, 20)
    [node] = ready(store)
    instance_id = node.instance_id
    assert instance_id is not None
    with store.session() as s:
        row = s.get_one(Node, node.id)
        row.instance_id = None  # (as if never recorded)
        row.state = NodeState.DRAINING.value
        row.draining_at = row.failed_at = datetime.fromtimestamp(f.clock.t, UTC)
    assert f.pass_calls() == {"list": 1, "terminate": 1}
    with store.session() as s:
        assert s.get_one(Node, node.id).state == NodeState.TERMINATING
    f.clock.t += 2
    described = behind_our_back(f.sim).describe_node(REGION, instance_id)
    assert described is None or described.status.value == "terminated"


def test_a_burst_of_creates_over_the_budget_waits_its_turn_and_never_fails(
    store: Store,
) -> None:
    """Six replicas at once against a budget of two writes and one more every 10 s: the
    refused creates never reach the cloud, count no attempt, fail nothing and block no
    pool; all six are made, at the budget's pace."""
    f = fleet(store, 6, budget=BucketSize(2, 0.1))
    created: list[int] = []
    for _ in range(60):
        before = f._calls().get("create", 0)
        run(f.loop, f.clock, 1)
        created.append(f._calls().get("create", 0) - before)
    assert sum(created) == 6
    assert max(sum(created[i : i + 10]) for i in range(len(created))) <= 2 + 1
    nodes = live_nodes(store)
    assert len(nodes) == 6 and all(n.state == NodeState.READY for n in nodes)
    with store.session() as s:
        assert not s.scalars(select(Node).where(Node.state == NodeState.FAILED)).all()
        assert all(n.attempts == 1 for n in s.scalars(select(Node)))
        assert not s.scalars(select(UnavailableOffering)).all()
    labels = {"cloud": "aws", "account": ACCOUNT, "type": "RateLimited"}
    assert (f.telemetry.registry.get_sample_value("gpucap_provider_errors_total", labels) or 0) > 0
