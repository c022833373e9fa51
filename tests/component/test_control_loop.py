"""The whole control loop (metrics -> autoscaler -> placement -> reconciler -> provider)
against the simulated cloud and a real database (SQLite and PostgreSQL), on a hand-driven
clock. Asserts the state of the world: rows in the store and instances at the cloud."""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources

import pytest
import yaml
from prometheus_client import CollectorRegistry
from sqlalchemy import select
from typer.testing import CliRunner

from autoscaler import GpucapAutoscaler
from autoscaler.types import MetricsSample
from coldstart import ColdStartModel
from coldstart.model import OBSERVED_KEPT
from controlplane import http_endpoint
from controlplane.api import ControlPlaneService
from controlplane.cli.main import app
from controlplane.grpc.client import ControlPlaneClient
from controlplane.grpc.server import serve
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.context import BootConfig, epoch
from controlplane.loop.snapshot import LIVE_VALUES
from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.node_tokens import NodeTokens, digest
from controlplane.placement import capacity_units
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import (
    DecisionRecord,
    Event,
    Model,
    Node,
    Pool,
    Replica,
    UnavailableOffering,
)
from controlplane.telemetry import Metrics
from providers.base import TAG_CUSTOMER, TAG_MANAGED, NodeRequest, ownership_tags
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimProvider, SimTimings
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.policy import Model as ModelSpec
from schema.types import Cloud, NodeState

POLICY = resources.files("controlplane.demo").joinpath("policy.yaml").read_text()


@dataclass
class Clock:
    t: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class ScriptedLoad:
    """In-flight load per model, set by the test; ``None`` means the source has no data."""

    load: dict[ModelKey, float | None] = field(default_factory=dict)

    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        out: dict[ModelKey, MetricsSample | None] = {}
        for key in capacity:
            v = self.load.get(key, 0.0)
            out[key] = None if v is None else MetricsSample(now, v / 2.0, v, 0.0)
        return out


TUNING = replace(
    Tuning(),
    stable_window_s=10.0,
    burst_window_s=2.0,
    scale_down_delay_s=10.0,
    cold_start_scale=0.001,
    capacity_block_s=60.0,
    backoff_base_s=0.5,
    backoff_max_s=2.0,
    gc_every_s=0.0,
)


@pytest.fixture
def world() -> tuple[SimCloud, Clock]:
    clock = Clock()
    return SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock), clock


@pytest.fixture
def loop(store: Store, world: tuple[SimCloud, Clock]) -> tuple[ControlLoop, ScriptedLoad]:
    sim, clock = world
    ControlPlaneService(store).apply_policy(POLICY, source="demo", applied_by="test")
    load = ScriptedLoad()
    ctx = LoopContext(
        store=store,
        # No in-call sleeps: the loop's own backoff (on the test clock) handles retries.
        providers=SimResolver(sim, retry=NO_RETRY),
        metrics_source=load,
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=TUNING,
        clock=clock,
    )
    return ControlLoop(ctx), load


def run(loop: ControlLoop, clock: Clock, seconds: int) -> None:
    for _ in range(seconds):
        loop.collect_metrics()
        loop.decide()
        loop.place()
        loop.reconcile()
        clock.t += 1


def live_nodes(store: Store, model: str | None = None) -> list[Node]:
    with store.session() as s:
        q = select(Node).where(Node.state.notin_([NodeState.TERMINATED, NodeState.FAILED]))
        nodes = list(s.scalars(q))
        if model is None:
            return nodes
        ids = {m.id for m in s.scalars(select(Model).where(Model.name == model))}
        return [n for n in nodes if n.replica.model_id in ids]


def live_units(store: Store, model: str) -> float:
    """The model's live replicas in capacity units of its first shape (what desired and
    placement count: the demo's 96-slot 8xH200 llama-70b replica is 1.5 of its 8xH100)."""
    with store.session() as s:
        m = s.scalars(select(Model).where(Model.name == model)).one()
        spec = ModelSpec.model_validate(m.spec)
        live = s.scalars(
            select(Replica).where(Replica.model_id == m.id, Replica.state.in_(LIVE_VALUES))
        )
        return sum(capacity_units(spec, r.gpu_shape) for r in live)


def assert_covers(store: Store, model: str, wanted: int) -> None:
    """Live capacity covers ``wanted`` units, by less than one replica more."""
    units = live_units(store, model)
    assert wanted <= units < wanted + 1.5, units


def assert_no_leak(store: Store, sim: SimCloud) -> None:
    """Every instance alive at the cloud has a live intent in the store, and vice versa."""
    alive = {
        i.intent_id
        for i in sim.instances.values()
        if sim.status(i).value not in ("terminated", "stopping")
    }
    tracked = {n.id for n in live_nodes(store) if n.instance_id is not None}
    assert alive == tracked
    for intent in alive:
        assert sim.live_instances_with_intent(intent) == 1


def test_scales_up_to_ready_and_back_down(loop, world, store):
    ctl, load = loop
    sim, clock = world
    load.load[("demo", "llama-70b")] = 200.0  # 200 in flight / (64 x 0.7) -> 5 replicas
    run(ctl, clock, 20)
    nodes = live_nodes(store, "llama-70b")
    assert_covers(store, "llama-70b", 5)
    assert all(n.state == NodeState.READY for n in nodes)
    assert all(n.instance_id and n.running_at and n.ready_at for n in nodes)
    assert_no_leak(store, sim)

    load.load[("demo", "llama-70b")] = 10.0  # -> 1 replica, after the scale-down delays
    run(ctl, clock, 300)
    assert len(live_nodes(store, "llama-70b")) == 1
    assert_no_leak(store, sim)
    with store.session() as s:
        reasons = {d.reason for d in s.scalars(select(DecisionRecord))}
    assert any(r.startswith("scale_up") or r == "wake" for r in reasons)
    assert "scale_down" in reasons
    # The replica kept is the one on the customer's commitment (already paid for).
    (kept,) = live_nodes(store, "llama-70b")
    assert kept.instance_type == "p5.48xlarge"


def test_stockout_degrades_to_next_pool_and_blocks_the_offering(loop, world, store):
    ctl, load = loop
    sim, clock = world
    # No p5.48xlarge anywhere in the AWS account: placement must move on, not retry hot.
    for region in ("us-east-1", "us-west-2"):
        sim.set_capacity(Cloud.AWS, region, "p5.48xlarge", 0)
    load.load[("demo", "llama-70b")] = 100.0
    run(ctl, clock, 20)
    nodes = live_nodes(store, "llama-70b")
    assert_covers(store, "llama-70b", 3)
    assert all(n.state == NodeState.READY for n in nodes)
    assert all(n.instance_type != "p5.48xlarge" for n in nodes)
    with store.session() as s:
        blocked = s.scalars(select(Pool).where(Pool.instance_type == "p5.48xlarge")).all()
        assert any(p.unavailable_until is not None for p in blocked)
        failed = s.scalars(select(Node).where(Node.state == NodeState.FAILED)).all()
        assert failed and all("CapacityUnavailable" in (n.error or "") for n in failed)
    assert_no_leak(store, sim)


def test_lost_create_response_never_duplicates(loop, world, store):
    ctl, load = loop
    sim, clock = world
    # The cloud creates the instance but the response is lost, twice in a row.
    sim.inject(Cloud.AWS, "demo/demo-aws", "crash_after_create", count=2)
    load.load[("demo", "chat-8b")] = 20.0
    run(ctl, clock, 20)
    nodes = live_nodes(store, "chat-8b")
    assert nodes and all(n.state == NodeState.READY for n in nodes)
    for n in nodes:
        assert sim.live_instances_with_intent(n.id) == 1
    assert_no_leak(store, sim)


def test_orphans_carrying_our_tags_are_terminated(loop, world, store):
    ctl, _ = loop
    sim, clock = world
    # An instance from a crash before its intent was recorded (or from a lost database).
    orphan = SimProvider(Cloud.AWS, "demo/demo-aws", sim).create_node(
        NodeRequest(
            "n-orphan",
            "p5.4xlarge",
            "us-east-1",
            tags=ownership_tags("n-orphan", "demo", "demo/demo-aws/us-east-1/p5.4xlarge", "x"),
        )
    )
    # Someone else's instance in the same account, without our tags: never touched.
    foreign = SimProvider(Cloud.AWS, "demo/demo-aws", sim).create_node(
        NodeRequest("theirs", "p5.4xlarge", "us-east-1", tags={"team": "research"})
    )
    run(ctl, clock, 5)
    assert sim.status(sim.instances[orphan.node.instance_id]).value in ("stopping", "terminated")
    assert sim.status(sim.instances[foreign.node.instance_id]).value == "running"
    with store.session() as s:
        kinds = [e.kind for e in s.scalars(select(Event))]
    assert "node.orphan_terminated" in kinds
    assert TAG_MANAGED not in foreign.node.tags and TAG_CUSTOMER not in foreign.node.tags


def test_no_data_holds_scale(loop, world, store):
    ctl, load = loop
    sim, clock = world
    load.load[("demo", "llama-70b")] = 200.0
    run(ctl, clock, 20)
    before = len(live_nodes(store, "llama-70b"))
    load.load[("demo", "llama-70b")] = None  # metrics stop arriving
    clock.t += 120  # long past the staleness limit
    run(ctl, clock, 10)
    assert len(live_nodes(store, "llama-70b")) == before
    with store.session() as s:
        m = s.scalars(select(Model).where(Model.name == "llama-70b")).one()
        assert m.desired_reason == "hold_no_data"


def test_deleted_model_releases_every_node(loop, world, store):
    ctl, load = loop
    sim, clock = world
    load.load[("demo", "coder-32b")] = 150.0
    run(ctl, clock, 15)
    assert live_nodes(store, "coder-32b")
    policy = POLICY.replace("  - name: coder-32b", "  - name: coder-gone", 1)
    ControlPlaneService(store).apply_policy(
        policy, source="demo", applied_by="test", allow_deletes=True
    )
    run(ctl, clock, 10)
    assert live_nodes(store, "coder-32b") == []
    assert_no_leak(store, sim)


def test_policy_that_drops_a_cloud_moves_replicas_out(loop, world, store):
    ctl, load = loop
    sim, clock = world
    for it in ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"):  # AWS full: forces GCP
        sim.set_capacity(Cloud.AWS, "us-east-1", it, 0)
    load.load[("demo", "llama-70b")] = 100.0
    run(ctl, clock, 15)
    assert {n.cloud for n in live_nodes(store, "llama-70b")} - {"aws"}
    for it in ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"):
        sim.set_capacity(Cloud.AWS, "us-east-1", it, 10)
    clock.t += 120  # past the stockout block
    narrowed = POLICY.replace(
        "    latency_slo_ms: 1500\n", "    latency_slo_ms: 1500\n    clouds: [aws]\n", 1
    )
    ControlPlaneService(store).apply_policy(
        narrowed, source="demo", applied_by="test", allow_deletes=True
    )
    run(ctl, clock, 20)
    nodes = live_nodes(store, "llama-70b")
    assert nodes and {n.cloud for n in nodes} == {"aws"}
    assert all(n.state == NodeState.READY for n in nodes)
    assert_no_leak(store, sim)


def test_every_recorded_autoscaling_decision_replays_identically(loop, world, store):
    from autoscaler.types import Decision
    from controlplane.replay import replay

    ctl, load = loop
    sim, clock = world
    for step, level in enumerate((50.0, 300.0, 120.0, 0.0, None, 80.0)):
        load.load[("demo", "llama-70b")] = level
        run(ctl, clock, 15 + step)
    with store.session() as s:
        records = s.scalars(select(DecisionRecord).where(DecisionRecord.kind == "autoscale")).all()
        assert len(records) > 5
        for r in records:
            if r.reason in ("pinned", "paused"):
                continue
            out = replay(GpucapAutoscaler(), Decision(r.desired or 0, r.reason), r.inputs)
            assert out.matches, (r.id, r.reason, r.desired, out.replayed)


def test_auth_failure_blocks_the_account_and_placement_goes_elsewhere(loop, world, store):
    ctl, load = loop
    sim, clock = world
    sim.inject(Cloud.AWS, "demo/demo-aws", "auth", count=1)
    load.load[("demo", "llama-70b")] = 100.0
    run(ctl, clock, 20)
    nodes = live_nodes(store, "llama-70b")
    assert_covers(store, "llama-70b", 3)
    assert all(n.state == NodeState.READY for n in nodes)
    assert {n.cloud for n in nodes} <= {"gcp", "oci"}
    with store.session() as s:
        aws = s.scalars(select(Pool).where(Pool.account == "demo-aws")).all()
        assert aws and all("AuthFailed" in (p.unavailable_reason or "") for p in aws)
    assert_no_leak(store, sim)


def test_throttling_and_5xx_back_off_then_succeed_in_place(loop, world, store):
    ctl, load = loop
    sim, clock = world
    sim.inject(Cloud.AWS, "demo/demo-aws", "throttle", count=3)
    sim.inject(Cloud.AWS, "demo/demo-aws", "transient", count=3)
    load.load[("demo", "chat-8b")] = 20.0
    run(ctl, clock, 30)
    nodes = live_nodes(store, "chat-8b")
    assert nodes and all(n.state == NodeState.READY and n.cloud == "aws" for n in nodes)
    assert max(n.attempts for n in nodes) > 1  # retried, not failed over
    with store.session() as s:
        # Throttling is never a reason to block an offering (HOUSE-STYLE principle 7).
        assert all(p.unavailable_until is None for p in s.scalars(select(Pool)))
    assert_no_leak(store, sim)


def next_horizon(
    ctl: ControlLoop, load: ScriptedLoad, clock: Clock, store: Store, model: str
) -> float:
    """The cold-start horizon of the model's next autoscaling decision (load raised, so
    that one is taken after what the test did)."""
    load.load[("demo", model)] = 300.0
    run(ctl, clock, 2)
    with store.session() as s:
        last = s.scalars(
            select(DecisionRecord)
            .where(DecisionRecord.kind == "autoscale", DecisionRecord.model == model)
            .order_by(DecisionRecord.id.desc())
        ).first()
    assert last is not None
    return float(last.inputs["cold_start_s"])


def ready_times(store: Store, model: str) -> list[float]:
    """Seconds from launch to ready of the model's replicas that became ready, in the order
    they were ready (as the horizon reads them)."""
    with store.session() as s:
        m = s.scalars(select(Model).where(Model.name == model)).one()
        ready = s.scalars(
            select(Replica)
            .where(Replica.model_id == m.id, Replica.ready_at.is_not(None))
            .order_by(Replica.ready_at, Replica.id)
        )
        return [epoch(r.ready_at) - epoch(r.created_at) for r in ready]  # type: ignore[operator]


def test_the_cold_start_horizon_is_learned_from_replicas_that_became_ready(loop, world, store):
    ctl, load = loop
    sim, clock = world
    with store.session() as s:
        spec = ModelSpec.model_validate(
            s.scalars(select(Model).where(Model.name == "llama-70b")).one().spec
        )
    # The phase model's estimate, shrunk by the test's tuning as the demo shrinks it.
    modeled = ColdStartModel().expected_ready_s(spec.weights.size_gb if spec.weights else 16.0)
    modeled *= TUNING.cold_start_scale
    load.load[("demo", "llama-70b")] = 100.0
    run(ctl, clock, 20)
    took = ready_times(store, "llama-70b")[-OBSERVED_KEPT:]  # the newest count
    assert took and all(t > modeled for t in took)  # the simulated cloud is slower
    horizon = next_horizon(ctl, load, clock, store, "llama-70b")
    assert horizon == pytest.approx(statistics.median(took))


@pytest.mark.parametrize("failure", ["interrupted", "hung"])
def test_launches_that_failed_lengthen_the_cold_start_horizon(loop, world, store, failure):
    ctl, load = loop
    sim, clock = world
    ctl.ctx.tuning = replace(TUNING, provision_timeout_s=8.0)
    load.load[("demo", "llama-70b")] = 100.0
    run(ctl, clock, 3)
    booting = [n for n in live_nodes(store, "llama-70b") if n.state != NodeState.READY]
    for n in booting:  # each is replaced, on a cold start of its own
        assert n.instance_id
        if failure == "interrupted":  # lost while booting (a spot interruption)
            sim.interrupt(n.instance_id)
        else:  # its model server never answers: the provision timeout drains it
            sim.hang(n.instance_id)
    run(ctl, clock, 40)
    with store.session() as s:
        m = s.scalars(select(Model).where(Model.name == "llama-70b")).one()
        rows = s.scalars(select(Replica).where(Replica.model_id == m.id)).all()
        failed = [r for r in rows if r.ready_at is None and any(n.error for n in r.nodes)]
        warned = {
            e.node
            for e in s.scalars(select(Event).where(Event.kind == "node.failed"))
            if e.severity == "warning"
        }
    own = ready_times(store, "llama-70b")
    assert len(failed) == len(booting) >= 2 and own
    # Each failure is stamped and told to on-call, drained or left failed.
    assert all(n.failed_at for r in failed for n in r.nodes)
    assert {n.id for n in booting} <= warned
    horizon = next_horizon(ctl, load, clock, store, "llama-70b")
    # Counting only the replicas that became ready reads the median of their own times;
    # the lost launch's capacity came with its replacement, later than any of them.
    assert horizon > statistics.median(own[-OBSERVED_KEPT:])


def test_a_launch_released_while_throttled_does_not_lengthen_the_horizon(loop, world, store):
    """A create throttled (and retried: it keeps its error) that a scale-down releases
    before it ever reached the cloud did not fail: the model's next replicas waited on no
    part of it, so the horizon stays what the ready replicas took."""
    ctl, load = loop
    sim, clock = world
    ctl.ctx.tuning = replace(TUNING, max_create_attempts=1000)
    key = ("demo", "llama-70b")
    load.load[key] = 100.0
    run(ctl, clock, 20)
    for cloud, account in (
        (Cloud.AWS, "demo/demo-aws"),
        (Cloud.GCP, "demo/demo-gcp"),
        (Cloud.OCI, "demo/shared-oci"),
    ):
        sim.inject(cloud, account, "throttle", count=1_000_000)
    load.load[key] = 250.0
    run(ctl, clock, 5)
    throttled = {n.id for n in live_nodes(store, "llama-70b") if n.state == NodeState.PENDING}
    load.load[key] = 100.0
    run(ctl, clock, 30)  # the need fell for longer than the dip hold: released
    with store.session() as s:
        released = [s.get(Node, i) for i in throttled]
        assert released and all(
            n is not None
            and n.draining_at
            and n.ready_at is None
            and "throttl" in (n.error or "").lower()
            for n in released
        )
    sim.clear_faults()
    load.load[key] = 250.0  # more again, within minutes: new launches, which become ready
    run(ctl, clock, 20)
    own = ready_times(store, "llama-70b")
    assert len(own) > len(throttled)
    horizon = next_horizon(ctl, load, clock, store, "llama-70b")
    assert horizon == pytest.approx(statistics.median(own[-OBSERVED_KEPT:]))


def test_a_zone_stockout_blocks_that_zone_and_the_next_launch_goes_to_another(loop, world, store):
    ctl, load = loop
    sim, clock = world
    assert ctl.refresh_offerings() == 3  # every account answered; pools learn their zones
    pool_id = "demo/demo-aws/us-east-1/p5.48xlarge"
    with store.session() as s:
        pool = s.get(Pool, pool_id)
        assert pool is not None and pool.zones == {
            "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]
        }
    sim.inject(Cloud.AWS, "demo/demo-aws", "capacity", zone="us-east-1a")
    load.load[("demo", "llama-70b")] = 40.0  # one replica, on the commitment
    run(ctl, clock, 12)
    with store.session() as s:
        nodes = s.scalars(select(Node).where(Node.pool_id == pool_id)).all()
        failed = [n for n in nodes if n.state == NodeState.FAILED]
        assert len(failed) == 1 and "CapacityUnavailable" in (failed[0].error or "")
        # The replacement stays in the pool (still the cheapest: the commitment), in an
        # open zone; the pool as a whole was never blocked.
        (ready,) = [n for n in nodes if n.state == NodeState.READY]
        assert ready.zone == "us-east-1b"
        pool = s.get(Pool, pool_id)
        assert pool is not None and pool.unavailable_until is None
        (blocked,) = s.scalars(select(UnavailableOffering)).all()
        assert (blocked.zone, blocked.instance_type) == ("us-east-1a", "p5.48xlarge")
    # On-call sees the zone's block on the pool it covers (`gpucap pools`), and only there.
    views = {v.row.id: v for v in ControlPlaneService(store).list_pools("demo")}
    (zone_block,) = views[pool_id].zone_blocks
    assert (zone_block.zone, zone_block.source) == ("us-east-1a", "error")
    assert "CapacityUnavailable" in zone_block.reason
    assert views[pool_id].zones == ("us-east-1a", "us-east-1b", "us-east-1c")
    assert not any(v.zone_blocks for i, v in views.items() if i != pool_id)
    assert_no_leak(store, sim)


def test_the_clouds_own_unavailable_answer_keeps_placement_off_that_pool(loop, world, store):
    ctl, load = loop
    sim, clock = world
    sim.set_capacity(Cloud.AWS, "us-east-1", "p5.48xlarge", 0)  # every zone reads full
    ctl.refresh_offerings()
    load.load[("demo", "llama-70b")] = 40.0
    run(ctl, clock, 12)
    with store.session() as s:
        nodes = s.scalars(select(Node).where(Node.state.in_(LIVE_VALUES))).all()
        assert nodes and all(n.instance_type != "p5.48xlarge" for n in nodes)
        # Nothing was asked of the full pool: the cloud's answer was enough.
        tried = s.scalars(select(Node).where(Node.instance_type == "p5.48xlarge")).all()
        assert tried == []
        sources = {e.source for e in s.scalars(select(UnavailableOffering))}
        assert sources == {"cloud"}


def test_creates_carry_the_nodes_rendered_user_data_and_token(loop, world, store):
    """With a boot config (the daemon against real clouds), every create sends the node's
    cloud-init user data with its own token, whose digest the store holds. A create whose
    answer was lost is retried with the same document: the instance the first one made
    holds the token the store knows."""
    ctl, load = loop
    sim, clock = world
    tokens = NodeTokens(b"k" * 32)
    ctl.ctx.boot = BootConfig(tokens, "https://gpucap.internal:9464/v1/node-phases")
    sim.inject(Cloud.AWS, "demo/demo-aws", "crash_after_create", count=2)
    load.load[("demo", "chat-8b")] = 20.0
    run(ctl, clock, 20)
    nodes = live_nodes(store, "chat-8b")
    assert nodes and any(n.attempts > 1 for n in nodes)  # (a retried create among them)
    for n in nodes:
        inst = sim.instances[str(n.instance_id)]
        files = {f["path"]: f["content"] for f in yaml.safe_load(inst.user_data)["write_files"]}
        secret = files["/etc/gpucap/node.token"]
        assert secret == tokens.for_node(n.id) and digest(secret) == n.token_sha256
        env = files["/etc/gpucap/node.env"]
        assert f"NODE_ID={n.id}" in env
        assert "REPORT_URL=https://gpucap.internal:9464/v1/node-phases" in env


def test_ready_replicas_are_listed_for_routers_and_prometheus(loop, world, store):
    """Ready replicas' addresses and the model's runtime port appear in ListEndpoints, in
    ``gpucap endpoints`` and in the HTTP port's Prometheus service discovery, and leave when
    their replica drains."""
    ctl, load = loop
    sim, clock = world
    svc = ControlPlaneService(store)
    grpc_srv = serve(svc, "127.0.0.1:0")
    grpc_addr = f"127.0.0.1:{grpc_srv.port}"
    load.load[("demo", "chat-8b")] = 20.0
    run(ctl, clock, 20)
    nodes = live_nodes(store, "chat-8b")
    assert nodes and all(n.private_ip for n in nodes)
    with ControlPlaneClient(grpc_addr) as c:
        got = c.stub.ListEndpoints(pb.ListEndpointsRequest(model="chat-8b")).endpoints
    assert sorted(e.address for e in got) == sorted(str(n.private_ip) for n in nodes)
    assert {(e.customer, e.engine, e.port, e.metrics_path) for e in got} == {
        ("demo", "vllm", 8000, "/metrics")
    }

    result = CliRunner().invoke(app, ["endpoints", "chat-8b", "--addr", grpc_addr, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert len(json.loads(result.stdout)["endpoints"]) == len(got)

    server, _ = http_endpoint.serve(
        "127.0.0.1",
        0,
        http_endpoint.app(CollectorRegistry(), svc.report_node_phase, svc.prometheus_sd),
    )
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}{http_endpoint.SD_PATH}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            groups = json.loads(resp.read())
    finally:
        server.shutdown()
    chat = [g for g in groups if g["labels"]["model"] == "chat-8b"]
    assert len(chat) == 1
    assert sorted(chat[0]["targets"]) == sorted(f"{e.address}:8000" for e in got)
    assert chat[0]["labels"] == {
        "customer": "demo",
        "model": "chat-8b",
        "engine": "vllm",
        "__metrics_path__": "/metrics",
    }

    svc.drain_node(nodes[0].id, "test", immediate=True)  # no new traffic from here on
    try:
        with ControlPlaneClient(grpc_addr) as c:
            left = c.stub.ListEndpoints(pb.ListEndpointsRequest(model="chat-8b")).endpoints
    finally:
        grpc_srv.stop(grace=0)
    assert nodes[0].private_ip not in {e.address for e in left}
    assert len(left) == len(got) - 1


def test_a_stored_spec_past_todays_bounds_is_read_within_them(loop, world, store):
    # A row written before the replica cap existed (min = max = 2^32-1, as DeployModel once
    # accepted): every job still ticks, the model is planned within the cap (the place
    # job's per-tick bound holds the rest), and the other models go on as before.
    from sqlalchemy import update

    from controlplane.store.models import Model
    from schema.policy import MAX_REPLICAS

    ctl, load = loop
    sim, clock = world
    run(ctl, clock, 10)
    with store.session() as s:
        row = s.scalars(select(Model).where(Model.name == "chat-8b")).one()
        spec = dict(row.spec, min_replicas=2**32 - 1, max_replicas=2**32 - 1)
        # (a write, as every write of a row does, moves its version on: the loop reads a
        # stored spec again only when the version says it changed)
        bumped = {"spec": spec, "version": Model.version + 1}
        s.execute(update(Model).where(Model.id == row.id).values(bumped))
    load.load[("demo", "llama-70b")] = 60.0
    run(ctl, clock, 20)  # raises if a job's tick fails
    with store.session() as s:
        chat = s.scalars(select(Model).where(Model.name == "chat-8b")).one()
        other = s.scalars(select(Model).where(Model.name == "llama-70b")).one()
        chat_live = s.scalars(
            select(Replica).where(
                Replica.model_id == chat.id, Replica.state.notin_(["terminated", "failed"])
            )
        ).all()
    assert chat.desired_replicas == MAX_REPLICAS
    assert 0 < len(chat_live) < MAX_REPLICAS  # bounded per tick, not all at once
    assert other.desired_replicas > 1  # another model's scale-up was not starved
