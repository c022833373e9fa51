"""The four jobs of the control loop (see ``controlplane/loop/__init__.py``)."""

from __future__ import annotations

import math
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from autoscaler.types import AutoscalerInput, Decision
from coldstart import expected_ready_from
from coldstart.observed import Launch, times_to_ready
from controlplane.decider_code import decider_code
from controlplane.loop.context import LoopContext, epoch
from controlplane.loop.views import (
    LIVE_VALUES,
    pool_view,
    replica_counts,
    replica_state,
    replica_view,
    scaling_spec,
)
from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.placement import (
    ModelView,
    PlacementInput,
    capacity_units,
    live_units,
    place,
)
from controlplane.placement.plan import UNIT_EPS
from controlplane.store.events import record_event
from controlplane.store.models import (
    Account,
    Customer,
    DecisionRecord,
    Model,
    Node,
    PolicyVersion,
    Pool,
    Replica,
)
from providers.base import (
    MANAGED_VALUE,
    TAG_CUSTOMER,
    TAG_INTENT,
    TAG_MANAGED,
    InstanceStatus,
    NodeRequest,
    ownership_tags,
)
from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)
from schema.policy import Model as ModelSpec
from schema.policy import Overflow
from schema.policy_file import parse_policy
from schema.types import CapacityTier, NodeState

log = structlog.get_logger("gpucap.loop")

NON_TERMINAL = tuple(s.value for s in NodeState if not s.is_terminal)

# A node not ready within ``Tuning.provision_timeout_s`` is drained with this error (and its
# ``failed_at`` stamped). Migration 0002 matches it to stamp rows drained before that.
PROVISION_TIMEOUT = "not ready within provision timeout"


@dataclass
class _NodeSnapshot:
    id: str
    version: int
    state: str
    customer: str
    account: str
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    instance_id: str | None
    attempts: int
    last_attempt_at: float | None
    state_since: float
    pool_id: str
    model: str
    reservation: str | None


class ControlLoop:
    def __init__(self, ctx: LoopContext) -> None:
        self.ctx = ctx
        self._overflow_cache: dict[str, tuple[str, Overflow]] = {}
        self._last_plan_detail: dict[ModelKey, str] = {}
        self._last_gc: float | None = None

    # ------------------------------------------------------------------ collect metrics
    def collect_metrics(self) -> None:
        ctx = self.ctx
        now = ctx.now()
        with ctx.store.session() as s:
            models = s.scalars(select(Model).where(Model.deleted_at.is_(None))).all()
            ready: dict[int, list[str]] = defaultdict(list)  # model id -> ready shapes
            for model_id, shape in s.execute(
                select(Replica.model_id, Replica.gpu_shape).where(
                    Replica.state == NodeState.READY.value
                )
            ):
                ready[model_id].append(shape)
            capacity: dict[ModelKey, Capacity] = {}
            for m in models:
                spec = ModelSpec.model_validate(m.spec)
                shapes = ready[m.id]
                slots = float(spec.shapes[0].max_concurrency)
                if shapes:  # (the mean over the ready replicas' shapes)
                    slots *= sum(capacity_units(spec, x) for x in shapes) / len(shapes)
                capacity[(m.customer, m.name)] = Capacity(len(shapes), slots)
                ctx.telemetry.ready_replicas.labels(m.customer, m.name).set(len(shapes))
        samples = ctx.metrics_source.collect(now, capacity)
        for key, sample in samples.items():
            if sample is not None:
                ctx.window.add(key, sample)
        ctx.window.forget(set(capacity))

    # ------------------------------------------------------------------ decide
    def decide(self) -> None:
        ctx = self.ctx
        now, now_dt = ctx.now(), ctx.now_dt()
        with ctx.store.session() as s:
            models = s.scalars(select(Model).where(Model.deleted_at.is_(None))).all()
            replicas = _replicas_by_model(s)
            observed = _observed_ready_s(s, now_dt)
            for m in models:
                spec = ModelSpec.model_validate(m.spec)
                counts = replica_counts(replicas[m.id], spec)
                sspec = scaling_spec(spec, ctx.tuning)
                window = ctx.window.window((m.customer, m.name), now)
                cold = self._expected_cold_start(spec, observed.get(m.id, []))
                inp = AutoscalerInput(m.name, now, window, counts, sspec, cold)
                state = dict(m.autoscaler_state or {})
                state_before = dict(state)
                if m.pinned_replicas is not None:
                    decision = Decision(m.pinned_replicas, "pinned", "replicas pinned by on-call")
                elif m.paused:
                    decision = Decision(counts.live, "paused", "autoscaler paused by on-call")
                else:
                    decision, new_state = ctx.autoscaler.decide(inp, state)
                    state = dict(new_state)
                changed = (
                    decision.desired != m.desired_replicas or decision.reason != m.desired_reason
                )
                if changed:
                    s.add(
                        DecisionRecord(
                            at=now_dt,
                            kind="autoscale",
                            customer=m.customer,
                            model=m.name,
                            desired=decision.desired,
                            reason=decision.reason,
                            detail=decision.detail,
                            inputs=_autoscale_inputs(inp, state_before, ctx.autoscaler.name),
                        )
                    )
                    log.info(
                        "autoscale",
                        customer=m.customer,
                        model=m.name,
                        desired=decision.desired,
                        reason=decision.reason,
                        detail=decision.detail,
                    )
                m.desired_replicas = decision.desired
                m.desired_reason = decision.reason
                m.autoscaler_state = state
                m.updated_at = now_dt
                ctx.telemetry.desired_replicas.labels(m.customer, m.name).set(decision.desired)

    # ------------------------------------------------------------------ place
    def place(self) -> None:
        ctx = self.ctx
        now, now_dt = ctx.now(), ctx.now_dt()
        with ctx.store.session() as s:
            customers = s.scalars(select(Customer)).all()
            replicas = _replicas_by_model(s)
            observed = _observed_ready_s(s, now_dt)
            for cust in customers:
                overflow = self._overflow(s, cust)
                pools = s.scalars(
                    select(Pool).where(Pool.customer == cust.name, Pool.active.is_(True))
                ).all()
                in_use = Counter(
                    s.execute(
                        select(Node.pool_id).where(
                            Node.customer == cust.name, Node.state.in_(LIVE_VALUES)
                        )
                    ).scalars()
                )
                pool_rows = {p.id: p for p in pools}
                models = s.scalars(select(Model).where(Model.customer == cust.name)).all()
                shared_replicas, shared_usd = _shared_usage(replicas, models, pool_rows)
                for m in sorted(models, key=lambda m: (-m.spec.get("priority", 100), m.name)):
                    live = [r for r in replicas[m.id] if r.state in LIVE_VALUES]
                    if m.deleted_at is not None and not live:
                        continue
                    spec = ModelSpec.model_validate(m.spec)
                    seen = observed.get(m.id, [])
                    cold = self._expected_cold_start(spec, seen)
                    views = tuple(  # (each pool's own observations first)
                        pool_view(
                            p,
                            in_use[p.id],
                            expected_ready_from([t for q, t in seen if q == p.id], cold),
                        )
                        for p in pools
                    )
                    live_views = tuple(replica_view(r) for r in live)
                    desired: float = m.desired_replicas
                    if m.deleted_at is not None:
                        desired = 0
                    elif m.paused and m.pinned_replicas is None:
                        # Paused holds what runs: its units exactly (the decision's whole
                        # count could drain a replica smaller than the first shape).
                        desired = live_units(spec, live_views)
                    inp = PlacementInput(
                        model=ModelView(m.customer, m.name, spec),
                        desired=desired,
                        replicas=live_views,
                        pools=views,
                        overflow=overflow,
                        shared_replicas_in_use=shared_replicas,
                        shared_usd_per_hour_in_use=shared_usd,
                        now=now,
                    )
                    plan = place(inp)
                    for launch in plan.launches:
                        pool = pool_rows[launch.pool_id]
                        self._record_launch(s, m, pool, launch.gpu_shape, launch.nodes, now_dt)
                        in_use[pool.id] += launch.nodes
                        if pool.tier == CapacityTier.SHARED:
                            shared_replicas += 1
                            shared_usd += launch.price_usd_per_hour
                    by_id = {r.id: r for r in live}
                    for drain in plan.drains:
                        self._drain_replica(s, m, by_id[drain.replica_id], now_dt, drain.reason)
                    key = (m.customer, m.name)
                    acted = plan.launches or plan.drains or plan.unplaced
                    if acted and self._last_plan_detail.get(key) != plan.detail:
                        s.add(
                            DecisionRecord(
                                at=now_dt,
                                kind="placement",
                                customer=m.customer,
                                model=m.name,
                                desired=math.ceil(desired - UNIT_EPS),
                                reason="unplaced" if plan.unplaced else "placed",
                                detail=plan.detail,
                                inputs={
                                    "launches": [vars(x) for x in plan.launches],
                                    "drains": [vars(x) for x in plan.drains],
                                    "rejections": plan.rejections,
                                    "live": len(live),
                                },
                            )
                        )
                        if plan.unplaced:
                            record_event(
                                s,
                                now_dt,
                                "placement.unplaced",
                                f"{plan.unplaced} replica(s) of {m.name} found no pool "
                                f"(rejected: {plan.rejections or 'none'})",
                                customer=m.customer,
                                model=m.name,
                                severity="warning",
                            )
                    self._last_plan_detail[key] = plan.detail if acted else ""

    def _overflow(self, s: Session, cust: Customer) -> Overflow:
        if cust.active_policy_id is None:
            return Overflow()
        pv = s.get(PolicyVersion, cust.active_policy_id)
        if pv is None:
            return Overflow()
        cached = self._overflow_cache.get(cust.name)
        if cached and cached[0] == pv.sha256:
            return cached[1]
        overflow = parse_policy(pv.raw_yaml, pv.source or cust.name).policy.overflow
        self._overflow_cache[cust.name] = (pv.sha256, overflow)
        return overflow

    def _record_launch(
        self, s: Session, m: Model, pool: Pool, shape: str, nodes: int, now: datetime
    ) -> None:
        """Record the intent (replica + node rows with idempotency tokens) before any
        provider call: the reconciler acts on these rows, never on a plan in memory."""
        replica = Replica(
            id=f"r-{uuid.uuid4().hex[:16]}",
            model_id=m.id,
            pool_id=pool.id,
            gpu_shape=shape,
            state=NodeState.PENDING.value,
            created_at=now,
        )
        s.add(replica)
        for _ in range(nodes):
            node_id = f"n-{uuid.uuid4().hex[:16]}"
            s.add(
                Node(
                    id=node_id,
                    replica_id=replica.id,
                    pool_id=pool.id,
                    customer=m.customer,
                    account=pool.account,
                    cloud=pool.cloud,
                    region=pool.region,
                    zone=None,
                    instance_type=pool.instance_type,
                    idempotency_token=node_id,
                    state=NodeState.PENDING.value,
                    pending_at=now,
                )
            )
        record_event(
            s,
            now,
            "replica.launch",
            f"{m.name}: new {shape} replica in {pool.id} ({pool.tier})",
            customer=m.customer,
            model=m.name,
        )

    def _drain_replica(self, s: Session, m: Model, r: Replica, now: datetime, reason: str) -> None:
        r.state = NodeState.DRAINING.value
        for n in r.nodes:
            if not NodeState(n.state).is_terminal:
                n.state = NodeState.DRAINING.value
                n.draining_at = now
        record_event(
            s,
            now,
            "replica.drain",
            f"{m.name}: replica {r.id} in {r.pool_id} draining: {reason}",
            customer=m.customer,
            model=m.name,
        )

    # ------------------------------------------------------------------ reconcile
    def reconcile(self) -> None:
        ctx = self.ctx
        with ctx.store.session() as s:
            rows = s.execute(
                select(Node, Model.name, Pool.reservation)
                .join(Replica, Node.replica_id == Replica.id)
                .join(Model, Replica.model_id == Model.id)
                .join(Pool, Node.pool_id == Pool.id)
                .where(Node.state.in_(NON_TERMINAL))
            ).all()
            snaps = [_snapshot(n, model, reservation) for n, model, reservation in rows]
        for snap in snaps:
            try:
                self._reconcile_node(snap)
            except ProviderError as err:
                self._provider_error(snap, err)
            except StaleDataError:
                pass  # another job moved this node on; the next tick sees where it is
            except Exception:
                # An adapter bug must not stall every other node: log it, count it, and
                # leave this node as it is for the next tick.
                ctx.telemetry.provider_errors.labels(snap.cloud, snap.account, "Unexpected").inc()
                log.exception("reconcile.node_failed", node=snap.id, state=snap.state)
        self._settle_replicas()
        now = ctx.now()
        if self._last_gc is None or now - self._last_gc >= ctx.tuning.gc_every_s:
            self._last_gc = now
            self.collect_garbage()
        self._node_gauges()

    def _reconcile_node(self, n: _NodeSnapshot) -> None:
        ctx = self.ctx
        now = ctx.now()
        state = NodeState(n.state)
        if state == NodeState.PENDING:
            if n.last_attempt_at is not None and now < n.last_attempt_at + self._backoff(n):
                return
            self._create(n)
            return
        provider = self._provider(n)
        if state in (NodeState.PROVISIONING, NodeState.RUNNING, NodeState.READY):
            assert n.instance_id is not None
            ctx.telemetry.provider_calls.labels(n.cloud, "describe").inc()
            cn = provider.describe_node(n.region, n.instance_id)
            if cn is None or cn.status in (InstanceStatus.TERMINATED, InstanceStatus.STOPPING):
                self._update(n, NodeState.FAILED, error="instance disappeared at the cloud")
                return
            if cn.status == InstanceStatus.RUNNING:
                if ctx.health.serving(cn):
                    if state != NodeState.READY:
                        self._update(n, NodeState.READY)
                elif state == NodeState.PROVISIONING:
                    self._update(n, NodeState.RUNNING, zone=cn.zone)
            if state != NodeState.READY and now - n.state_since > ctx.tuning.provision_timeout_s:
                self._update(n, NodeState.DRAINING, error=PROVISION_TIMEOUT, failed=True)
            return
        if state in (NodeState.DRAINING, NodeState.TERMINATING):
            ids = [n.instance_id] if n.instance_id else []
            if not ids:
                # The create may have reached the cloud without us recording its id (a crash
                # or a drain racing the create): find it by its intent tag.
                ctx.telemetry.provider_calls.labels(n.cloud, "list").inc()
                ids = [c.instance_id for c in provider.list_nodes(n.region, {TAG_INTENT: n.id})]
            alive = False
            for iid in ids:
                ctx.telemetry.provider_calls.labels(n.cloud, "describe").inc()
                cn = provider.describe_node(n.region, iid)
                if cn is not None and cn.status != InstanceStatus.TERMINATED:
                    alive = True
                    if state == NodeState.DRAINING or cn.status != InstanceStatus.STOPPING:
                        ctx.telemetry.provider_calls.labels(n.cloud, "terminate").inc()
                        provider.terminate_node(n.region, iid)
            if not alive and (state == NodeState.TERMINATING or not ids):
                self._update(n, NodeState.TERMINATED)
            elif state == NodeState.DRAINING:
                self._update(n, NodeState.TERMINATING)

    def _create(self, n: _NodeSnapshot) -> None:
        ctx = self.ctx
        # Count the attempt before calling, so a crash mid-call still backs off and is seen.
        with ctx.store.session() as s:
            row = s.get(Node, n.id)
            if row is None or row.version != n.version or row.state != NodeState.PENDING:
                return
            pool = s.get(Pool, n.pool_id)
            until = epoch(pool.unavailable_until) if pool is not None else None
            if pool is not None and until is not None and until > ctx.now():
                # The pool was blocked after this intent was placed (e.g. an auth failure
                # on a sibling node this tick). Don't call a cloud we know will refuse:
                # fail the intent so placement re-places it. Had an earlier attempt reached
                # the cloud, the orphan collector finds the instance by its intent tag.
                row.state = NodeState.FAILED.value
                row.failed_at = ctx.now_dt()
                row.error = f"not attempted: pool blocked ({pool.unavailable_reason})"
                return
            row.attempts += 1
            row.last_attempt_at = ctx.now_dt()
        provider = self._provider(n)
        request = NodeRequest(
            intent_id=n.id,
            instance_type=n.instance_type,
            region=n.region,
            zone=n.zone,
            tags=ownership_tags(n.id, n.customer, n.pool_id, n.model),
            reservation=n.reservation,
        )
        ctx.telemetry.provider_calls.labels(n.cloud, "create").inc()
        result = provider.create_node(request)
        with ctx.store.session() as s:
            row = s.get(Node, n.id)
            if row is None:
                return
            row.instance_id = result.node.instance_id
            row.zone = result.node.zone
            if row.state == NodeState.PENDING:
                row.state = NodeState.PROVISIONING.value
                row.provisioning_at = ctx.now_dt()
                row.error = None
            record_event(
                s,
                ctx.now_dt(),
                "node.created" if result.created else "node.found",
                f"{n.instance_type} {result.node.instance_id} in {result.node.zone} "
                f"for intent {n.id}",
                customer=n.customer,
                model=n.model,
                node=n.id,
            )

    def _backoff(self, n: _NodeSnapshot) -> float:
        t = self.ctx.tuning
        return min(t.backoff_max_s, t.backoff_base_s * 2 ** max(0, n.attempts - 1))

    def _provider_error(self, n: _NodeSnapshot, err: ProviderError) -> None:
        """Typed errors decide what happens; message strings never do."""
        ctx = self.ctx
        ctx.telemetry.provider_errors.labels(n.cloud, n.account, err.kind).inc()
        log.warning("provider_error", node=n.id, pool=n.pool_id, error=str(err))
        retry = isinstance(err, Throttled | TransientError)
        if retry and n.attempts + 1 < ctx.tuning.max_create_attempts:
            with ctx.store.session() as s:
                row = s.get(Node, n.id)
                if row is not None:
                    row.error = str(err)
            return
        now_dt = ctx.now_dt()
        with ctx.store.session() as s:
            row = s.get(Node, n.id)
            if row is None:
                return
            if NodeState(row.state) == NodeState.PENDING:
                row.state = NodeState.FAILED.value
                row.failed_at = now_dt
            row.error = str(err)
            blocked = self._block(s, n, err, now_dt)
            record_event(
                s,
                now_dt,
                "node.create_failed",
                f"{err.kind} for {n.instance_type} in {n.region}: {err.message}"
                + (f"; blocked {blocked} pool(s)" if blocked else ""),
                customer=n.customer,
                model=n.model,
                node=n.id,
                severity="warning",
            )

    def _block(self, s: Session, n: _NodeSnapshot, err: ProviderError, now: datetime) -> int:
        """Mark the offerings the error covers unavailable for a TTL (at the error's scope),
        so the next placement goes to the next best pool instead of retrying hot."""
        t = self.ctx.tuning
        q = select(Pool).where(Pool.customer == n.customer, Pool.account == n.account)
        match err:
            case CapacityUnavailable():
                ttl = t.capacity_block_s
                q = q.where(Pool.region == n.region, Pool.instance_type == n.instance_type)
            case QuotaExceeded():
                ttl = t.quota_block_s
                if err.scope != Scope.ACCOUNT:
                    q = q.where(Pool.region == n.region)
            case AuthFailed():
                ttl = t.auth_block_s
            case InvalidRequest():
                ttl = t.invalid_block_s
                q = q.where(Pool.region == n.region, Pool.instance_type == n.instance_type)
            case _:
                ttl = t.capacity_block_s
                q = q.where(Pool.id == n.pool_id)
        until = now + timedelta(seconds=ttl)
        pools = s.scalars(q).all()
        for p in pools:
            p.unavailable_until = until
            p.unavailable_reason = f"{err.kind}: {err.message}"[:1000]
        return len(pools)

    def _update(
        self,
        n: _NodeSnapshot,
        state: NodeState,
        *,
        error: str | None = None,
        zone: str | None = None,
        failed: bool = False,
    ) -> None:
        """Move a node to ``state``, stamping its time. ``failed``: the node failed though it
        is not left ``failed`` (drained so that its instance is terminated): stamp
        ``failed_at`` too, which is what a failed launch is known by."""
        now = self.ctx.now_dt()
        with self.ctx.store.session() as s:
            row = s.get(Node, n.id)
            if row is None or row.version != n.version:
                return  # changed under us (e.g. drained); the next tick sees the new state
            row.state = state.value
            setattr(row, f"{state.value}_at", now)
            if failed:
                row.failed_at = now
            if error:
                row.error = error
            if zone:
                row.zone = zone
            # (A node that failed but is drained, so its instance is terminated, is a
            # failure for on-call all the same.)
            failure = failed or state == NodeState.FAILED
            if failure or state in (NodeState.READY, NodeState.TERMINATED):
                record_event(
                    s,
                    now,
                    "node.failed" if failure else f"node.{state.value}",
                    f"{n.instance_type} {n.instance_id or '-'} in {n.region}"
                    + (f": {error}" if error else "")
                    + ("; draining" if state == NodeState.DRAINING else ""),
                    customer=n.customer,
                    model=n.model,
                    node=n.id,
                    severity="warning" if failure else "info",
                )

    def _settle_replicas(self) -> None:
        now = self.ctx.now_dt()
        with self.ctx.store.session() as s:
            replicas = s.scalars(
                select(Replica).where(
                    Replica.state.notin_([NodeState.TERMINATED.value, NodeState.FAILED.value])
                )
            ).all()
            for r in replicas:
                new = replica_state(list(r.nodes), r.state)
                if new == r.state:
                    continue
                r.state = new
                if new == NodeState.READY:
                    r.ready_at = now
                if new == NodeState.FAILED:
                    # One failed node fails the gang: release its siblings.
                    for node in r.nodes:
                        if not NodeState(node.state).is_terminal:
                            node.state = NodeState.DRAINING.value
                            node.draining_at = now
                    r.state = NodeState.DRAINING.value
                if NodeState(r.state).is_terminal:
                    r.ended_at = now

    # ------------------------------------------------------------------ garbage collection
    def collect_garbage(self) -> int:
        """Terminate instances that carry our tags but no live intent in the store: the
        remains of a crash between a create and its bookkeeping, or of a lost database."""
        ctx = self.ctx
        with ctx.store.session() as s:
            accounts = s.scalars(select(Account)).all()
            targets = [
                (a.customer, a, list((a.regions or {}).get("regions", []))) for a in accounts
            ]
        reaped = 0
        for customer, acct, regions in targets:
            try:
                provider = ctx.providers.provider(customer, acct)
            except ProviderError as err:
                ctx.telemetry.provider_errors.labels(acct.cloud, acct.name, err.kind).inc()
                continue
            for region in regions:
                try:
                    found = provider.list_nodes(
                        region, {TAG_MANAGED: MANAGED_VALUE, TAG_CUSTOMER: customer}
                    )
                except ProviderError as err:
                    ctx.telemetry.provider_errors.labels(acct.cloud, acct.name, err.kind).inc()
                    continue
                if not found:
                    continue
                with ctx.store.session() as s:
                    known = {
                        n.id: n.state
                        for n in s.scalars(
                            select(Node).where(Node.id.in_([c.intent_id for c in found]))
                        )
                    }
                for c in found:
                    st = known.get(c.intent_id)
                    if st is not None and not NodeState(st).is_terminal:
                        continue
                    try:
                        provider.terminate_node(region, c.instance_id)
                    except ProviderError as err:
                        ctx.telemetry.provider_errors.labels(acct.cloud, acct.name, err.kind).inc()
                        continue  # found again on the next sweep
                    reaped += 1
                    with ctx.store.session() as s:
                        record_event(
                            s,
                            ctx.now_dt(),
                            "node.orphan_terminated",
                            f"{c.instance_id} ({c.instance_type}, {region}) carried intent "
                            f"{c.intent_id} with no live record",
                            customer=customer,
                            severity="warning",
                        )
        return reaped

    # ------------------------------------------------------------------ helpers
    def _expected_cold_start(self, spec: ModelSpec, observed: list[tuple[str, float]]) -> float:
        """The model's next time-to-ready: its observed (pool, seconds) once there are
        some, the phase model before."""
        return expected_ready_from([t for _, t in observed], self._cold_start_s(spec))

    def _cold_start_s(self, spec: ModelSpec) -> float:
        """The phase model's time-to-ready of a new replica, until some are observed (a
        model without declared weights is costed as a 16 GB one, an 8B-class model in
        bf16)."""
        ctx = self.ctx
        weights_gb = spec.weights.size_gb if spec.weights else 16.0
        return ctx.coldstart.expected_ready_s(weights_gb) * ctx.tuning.cold_start_scale

    def _provider(self, n: _NodeSnapshot) -> Any:
        with self.ctx.store.session() as s:
            acct = s.scalars(
                select(Account).where(Account.customer == n.customer, Account.name == n.account)
            ).one()
        return self.ctx.providers.provider(n.customer, acct)

    def _node_gauges(self) -> None:
        with self.ctx.store.session() as s:
            counts = Counter(
                (pool, state)
                for pool, state in s.execute(
                    select(Node.pool_id, Node.state).where(Node.state.in_(NON_TERMINAL))
                )
            )
        self.ctx.telemetry.nodes.clear()
        for (pool, state), c in counts.items():
            self.ctx.telemetry.nodes.labels(pool, state).set(c)


# Observed times-to-ready older than this no longer describe a pool (images, weights and
# the clouds' capacity change).
OBSERVED_FOR = timedelta(days=7)


def _observed_ready_s(s: Session, now: datetime) -> dict[int, list[tuple[str, float]]]:
    """Per model, the (pool, seconds from launch to capacity) of its launches in the last
    ``OBSERVED_FOR``, oldest first: what the next replica's cold start is expected from
    (``coldstart.expected_ready_from``). A launch that failed before it was ready counts
    until its replacement was (``coldstart.observed``)."""
    since = now - OBSERVED_FOR
    # When a launch failed: its first node's failure (at the cloud, or the provision timeout
    # draining an instance whose model server never answered). Not an error alone: a node
    # released by a scale-down while its create was being retried keeps its throttling
    # error, and nothing waited on it.
    failed_at = (
        select(func.min(Node.failed_at)).where(Node.replica_id == Replica.id).scalar_subquery()
    )
    rows = s.execute(
        select(Replica.model_id, Replica.pool_id, Replica.created_at, Replica.ready_at, failed_at)
        .where(
            or_(
                Replica.ready_at >= since,
                and_(Replica.ready_at.is_(None), failed_at >= since),
            )
        )
        # (times_to_ready orders by when each was ready or failed; this breaks its ties)
        .order_by(Replica.created_at, Replica.id)
    )
    launches = []
    for model_id, pool_id, created, ready, failed in rows:
        start = epoch(created)
        if start is not None:
            launches.append(Launch(model_id, pool_id, start, epoch(ready), epoch(failed)))
    return times_to_ready(launches)


def _replicas_by_model(s: Session) -> dict[int, list[Replica]]:
    out: dict[int, list[Replica]] = defaultdict(list)
    for r in s.scalars(select(Replica).where(Replica.state.in_(NON_TERMINAL))):
        out[r.model_id].append(r)
    return out


def _shared_usage(
    replicas: dict[int, list[Replica]], models: Any, pools: dict[str, Pool]
) -> tuple[int, float]:
    count, usd = 0, 0.0
    for m in models:
        for r in replicas[m.id]:
            p = pools.get(r.pool_id)
            if p is not None and p.tier == CapacityTier.SHARED and r.state in LIVE_VALUES:
                count += 1
                usd += p.price_usd_per_hour * len(r.nodes)
    return count, usd


def _snapshot(n: Node, model: str, reservation: str | None) -> _NodeSnapshot:
    since = getattr(n, f"{n.state}_at", None) or n.pending_at
    return _NodeSnapshot(
        id=n.id,
        version=n.version,
        state=n.state,
        customer=n.customer,
        account=n.account,
        cloud=n.cloud,
        region=n.region,
        zone=n.zone,
        instance_type=n.instance_type,
        instance_id=n.instance_id,
        attempts=n.attempts,
        last_attempt_at=epoch(n.last_attempt_at),
        state_since=epoch(since) or 0.0,
        pool_id=n.pool_id,
        model=model,
        reservation=reservation,
    )


def _autoscale_inputs(inp: AutoscalerInput, state: dict[str, Any], decider: str) -> dict[str, Any]:
    """Enough to replay the decision: the whole window, counts, spec, cold-start estimate
    and the decider's state before it (``controlplane.replay`` rebuilds the input), and
    which decider code made it (a replay that differs can then say whether it changed)."""
    from dataclasses import asdict

    from autoscaler.types import NoData

    metrics: Any
    if isinstance(inp.metrics, NoData):
        metrics = {"no_data": inp.metrics.reason}
    else:
        metrics = {"samples": [asdict(x) for x in inp.metrics.samples]}
    return {
        "now": inp.now,
        "metrics": metrics,
        "replicas": asdict(inp.replicas),
        "spec": {k: v for k, v in asdict(inp.spec).items() if k != "extra"},
        "cold_start_s": inp.cold_start_s,
        "model": inp.model,
        "state": state,
        "decider": {"name": decider, "code": decider_code()},
    }
