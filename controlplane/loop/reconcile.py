"""The reconcile job: every node that is not terminal takes one lifecycle step
(``controlplane.lifecycle.node``): what the cloud reports is gathered, the pure step says
what to do, and that is applied; a create's typed error says whether to retry in place or to
fail the intent and block what it covers (``lifecycle.blocking``). Then each replica's state
follows its nodes' (``lifecycle.gang``), a failed gang draining whole.

What the cloud reports comes from one ``list_nodes`` per (account, region) with live nodes
per pass, by gpucap's ownership tags (``providers.base.ownership_filter``), indexed by
instance id and by intent tag: the cloud calls of a pass grow with (account, region) pairs,
not with nodes. A recorded instance the listing does not show is described once before it
counts as gone, because listings lag a fresh create (EC2's DescribeInstances may not show
an instance for seconds after RunInstances: "eventual consistency" in the EC2 API
reference), so only a describe that also says gone fails it. A listing that fails leaves
that (account, region)'s nodes as they are for the pass, its error counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from bootstrap import render
from controlplane.availability import PoolKey, Unavailable, availability
from controlplane.lifecycle.blocking import BlockTTLs, Fail, block_for, on_create_error
from controlplane.lifecycle.gang import leader_of, rank_of, replica_state
from controlplane.lifecycle.health import Probe
from controlplane.lifecycle.node import (
    Action,
    CountFailures,
    Create,
    Move,
    NodeFacts,
    NotAttempted,
    Observed,
    Start,
    Stop,
    Terminate,
    Timing,
    step_leaving,
    step_live,
    step_pending,
    step_warm,
)
from controlplane.loop.context import LoopContext, Tuning, epoch
from controlplane.loop.images import image_for, runtime_image
from controlplane.loop.snapshot import (
    NEWEST_REPORT,
    NON_TERMINAL,
    fleet_mark,
    read_specs,
    unavailable_entries,
)
from controlplane.loop.staging import READY, staged_copy
from controlplane.node_boot import StagedCopy, node_boot, weight_sources
from controlplane.node_tokens import TOKEN_TTL_S, digest
from controlplane.probes import ProbeTarget
from controlplane.store.events import record_event
from controlplane.store.leases import Fenced
from controlplane.store.models import (
    Account,
    Model,
    Node,
    NodePhaseReport,
    Pool,
    Replica,
    WeightCopy,
)
from controlplane.store.transitions import drain_replica, record_unavailable
from controlplane.store.usage import keep_stop
from providers.base import (
    TAG_INTENT,
    CloudNode,
    InstanceStatus,
    NodeRequest,
    Provider,
    ownership_filter,
    ownership_tags,
)
from providers.errors import NotFound, ProviderError, Throttled, TransientError
from providers.ratelimit import RateLimited
from runtimes import ENGINES, port
from schema.policy import Model as ModelSpec
from schema.policy import WarmMode
from schema.types import Cloud, NodePhase, NodeState, Owner

log = structlog.get_logger("gpucap.loop")


@dataclass(frozen=True)
class NodeSnapshot:
    """A node as one reconcile pass sees it (the row's version guards every write)."""

    id: str
    version: int
    state: NodeState
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
    model_id: int = 0
    leader: str = ""  # the id of its replica's leader (itself, for a single node)
    private_ip: str | None = None
    probe_failures: int = 0
    reported_ready: bool = False
    served: bool = False
    failed: bool = False
    warm: bool = False  # its replica is in the model's warm pool

    def facts(self, blocked_until: float | None = None, park: bool = False) -> NodeFacts:
        return NodeFacts(
            self.state,
            self.attempts,
            self.last_attempt_at,
            self.state_since,
            blocked_until,
            probe_failures=self.probe_failures,
            reported_ready=self.reported_ready,
            served=self.served,
            failed=self.failed,
            park=park,
        )


@dataclass
class Seen:
    """What the cloud reported of a node this pass: a live node's instance (None: gone), or
    the instances recorded or found for a leaving one."""

    live: CloudNode | None = None
    found: list[tuple[str, InstanceStatus | None]] = field(default_factory=list)


def timing(t: Tuning) -> Timing:
    return Timing(t.backoff_base_s, t.backoff_max_s, t.provision_timeout_s)


def ttls(t: Tuning) -> BlockTTLs:
    return BlockTTLs(t.capacity_block_s, t.quota_block_s, t.auth_block_s, t.invalid_block_s)


# The pass's statements, built once (building one costs about as much as running it).
# Nodes are read as columns, not rows: a pass reads every live node, and an ORM row costs
# several times the columns it carries (its identity map, its attribute state).
_ACCOUNTS = select(Account)
# When the node entered its present state (the pending time, for a state without a column).
_SINCE = func.coalesce(
    case(
        *((Node.state == st, getattr(Node, f"{st}_at")) for st in NON_TERMINAL),
        else_=None,
    ),
    Node.pending_at,
)
_LIVE_NODES = (
    select(
        Node.id,
        Node.version,
        Node.state,
        Node.customer,
        Node.account,
        Node.cloud,
        Node.region,
        Node.zone,
        Node.instance_type,
        Node.instance_id,
        Node.attempts,
        Node.last_attempt_at,
        _SINCE,
        Node.pool_id,
        Model.name,
        Pool.reservation,
        Model.id,
        Node.private_ip,
        Node.probe_failures,
        Node.ready_at.is_not(None),
        Node.failed_at.is_not(None),
        Replica.warm,
        Node.replica_id,
    )
    .join(Replica, Node.replica_id == Replica.id)
    .join(Model, Replica.model_id == Model.id)
    .join(Pool, Node.pool_id == Pool.id)
    .where(Node.state.in_(NON_TERMINAL))
)
_LIVE_REPLICA_NODES = (
    select(Replica.id, Replica.state, Node.state)
    .outerjoin(Node, Node.replica_id == Replica.id)
    .where(Replica.state.notin_([NodeState.TERMINATED.value, NodeState.FAILED.value]))
    .order_by(Replica.id, Node.id)
)
# Every node of a replica with a live node (a gang's leader is ranked among all of them).
_MEMBERS = select(Node.replica_id, Node.id).where(
    Node.replica_id.in_(select(Node.replica_id).where(Node.state.in_(NON_TERMINAL)))
)
_STARTING = (NodeState.PROVISIONING.value, NodeState.RUNNING.value)
_RESERVATIONS = select(Pool.id, Pool.reservation).order_by(Pool.id)
# The ready reports of the nodes starting now, with when each (re)started.
_READY_REPORTS = (
    select(NodePhaseReport.node_id, NodePhaseReport.at, Node.resuming_at)
    .join(Node, Node.id == NodePhaseReport.node_id)
    .where(NodePhaseReport.phase == NodePhase.READY.value, Node.state.in_(_STARTING))
)
_MODEL_VERSIONS = select(Model.id, Model.version)
_NODE_STATES = select(Node.pool_id, Node.state).where(Node.state.in_(NON_TERMINAL))
# Where a pass probes engines: starting (is it ready yet?), ready (is it still?), draining
# (how many requests does it still hold?).
_PROBED = (NodeState.PROVISIONING, NodeState.RUNNING, NodeState.READY, NodeState.DRAINING)
# A warm pool's states (``lifecycle.node.step_warm``): described, never probed.
_WARM = (NodeState.STOPPING, NodeState.STOPPED, NodeState.RESUMING)

# The accounts of one pass, read once for all its nodes: (customer, name) -> row.
Accounts = dict[tuple[str, str], Account]


class Reconciler:
    """The job, with what it keeps between passes: the live nodes as read, read again only
    when a node, replica or ready report was added or changed since (``fleet_mark``) or a
    pool's reservation changed; and the mark at which the replicas were last settled."""

    def __init__(self) -> None:
        self._nodes: tuple[tuple[object, ...] | None, list[NodeSnapshot]] = (None, [])
        self._settled: tuple[int, ...] | None = None
        self._targets = _Targets()

    def run(self, ctx: LoopContext) -> None:
        """Observe every node (from its (account, region)'s listing), probe the engines on
        those running in one batch (``controlplane.probes``), then step each."""
        nodes, accounts = self._load(ctx)
        specs = _specs(ctx, nodes)
        listings = _list_sites(ctx, nodes, accounts)
        seen: dict[str, Seen] = {}
        for snap in nodes:
            try:
                look = _observe(ctx, snap, accounts, listings)
            except Exception as err:  # (a try costs nothing until it catches)
                _failed(ctx, snap, err)
                continue
            if look is not None:  # (None: its listing failed; the node waits a pass)
                seen[snap.id] = look
        probes = _probe(ctx, nodes, seen, specs, self._targets)
        now, t = ctx.now(), timing(ctx.tuning)
        for snap in nodes:
            if snap.id in seen:
                _still_acting(ctx)
                try:
                    spec = specs.get(snap.model_id)
                    _step(ctx, snap, seen[snap.id], probes, spec, accounts, now, t)
                except Exception as err:
                    _failed(ctx, snap, err)
        self._settle(ctx)

    def _load(self, ctx: LoopContext) -> tuple[list[NodeSnapshot], Accounts]:
        with ctx.store.session() as s:
            accounts = {(a.customer, a.name): a for a in s.scalars(_ACCOUNTS)}
            mark = (fleet_mark(s), s.scalar(NEWEST_REPORT), tuple(s.execute(_RESERVATIONS)))
            if mark != self._nodes[0]:
                self._nodes = (mark, _load(s))
        return self._nodes[1], accounts

    def _settle(self, ctx: LoopContext) -> None:
        """``settle_replicas`` and the node gauges, unless no replica or node changed since
        they last ran (settling's own writes change the mark: the pass after them settles
        and counts once more)."""
        with ctx.store.session() as s:
            mark = fleet_mark(s)
        if mark != self._settled:
            settle_replicas(ctx)
            node_gauges(ctx)
            self._settled = mark


def node_gauges(ctx: LoopContext) -> None:
    """Live nodes by pool and state."""
    with ctx.store.session() as s:
        counts = Counter(s.execute(_NODE_STATES))
    ctx.telemetry.nodes.clear()
    for (pool, state), c in counts.items():
        ctx.telemetry.nodes.labels(pool, state).set(c)


def reconcile(ctx: LoopContext) -> None:
    """One pass with nothing kept from an earlier one."""
    Reconciler().run(ctx)


def _still_acting(ctx: LoopContext) -> None:
    """Raise ``Fenced`` once this daemon's lease has lapsed (on its own clock, no query):
    a step may call the cloud before it writes, and a deposed leader (paused past its lease,
    then resumed mid-pass) must not act on its stale snapshot for the nodes left."""
    if ctx.store.fence is not None:
        ctx.store.fence.claims()


def _failed(ctx: LoopContext, snap: NodeSnapshot, err: Exception) -> None:
    """What one node's failure in a pass means (called in its ``except``)."""
    if isinstance(err, Fenced):
        raise err  # the whole pass ends: this daemon no longer acts (not one node's problem)
    if isinstance(err, RateLimited):
        _rate_limited(ctx, snap, err)
    elif isinstance(err, ProviderError):
        if snap.state == NodeState.RESUMING:
            _start_failed(ctx, snap, err)
        else:
            _create_failed(ctx, snap, err)
    elif isinstance(err, StaleDataError):
        pass  # another job moved this node on; the next tick sees where it is
    else:
        # An adapter bug must not stall every other node: log it, count it, and leave
        # this node as it is for the next tick.
        ctx.telemetry.provider_errors.labels(snap.cloud, snap.account, "Unexpected").inc()
        log.exception("reconcile.node_failed", node=snap.id, state=snap.state.value)


def _rate_limited(ctx: LoopContext, n: NodeSnapshot, err: RateLimited) -> None:
    """gpucap's own budget for the (account, region) refused the call before it reached the
    cloud (``providers.ratelimit``): the node stays as it is and tries again on a later
    pass. A create's attempt, counted before the call, is given back: a refusal is no
    attempt, so a burst of creates larger than the budget waits its turn, never fails."""
    ctx.telemetry.provider_errors.labels(n.cloud, n.account, err.kind).inc()
    log.info("reconcile.rate_limited", node=n.id, state=n.state.value, error=str(err))
    if n.state != NodeState.PENDING:
        return
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is not None and row.state == NodeState.PENDING and row.attempts > n.attempts:
            row.attempts = n.attempts


def _load(s: Session) -> list[NodeSnapshot]:
    rows = s.execute(_LIVE_NODES).all()
    members: dict[str, list[str]] = {}
    for rid, nid in s.execute(_MEMBERS):
        members.setdefault(rid, []).append(nid)
    # (A resumed node's ready report of its first boot says nothing of this one.)
    reported = {
        nid
        for nid, at, resumed in s.execute(_READY_REPORTS)
        if (epoch(resumed) or 0.0) <= (epoch(at) or 0.0)
    }
    leaders = {rid: leader_of(ids) for rid, ids in members.items()}
    return [_snapshot(row, leaders, reported) for row in rows]


def _snapshot(row: Sequence[Any], leaders: Mapping[str, str], reported: set[str]) -> NodeSnapshot:
    (nid, version, state, customer, account, cloud, region, zone, instance_type) = row[:9]
    (instance_id, attempts, last_attempt_at, since, pool_id, model, reservation) = row[9:16]
    (model_id, private_ip, probe_failures, served, failed, warm, replica_id) = row[16:]
    return NodeSnapshot(
        nid,
        version,
        NodeState(state),
        customer,
        account,
        cloud,
        region,
        zone,
        instance_type,
        instance_id,
        attempts,
        epoch(last_attempt_at),
        epoch(since) or 0.0,
        pool_id,
        model,
        reservation,
        model_id=model_id,
        leader=leaders.get(replica_id, nid),
        private_ip=private_ip,
        probe_failures=probe_failures,
        reported_ready=nid in reported,
        served=bool(served),
        failed=bool(failed),
        warm=bool(warm),
    )


def _specs(ctx: LoopContext, nodes: Sequence[NodeSnapshot]) -> dict[int, ModelSpec]:
    """The specs of the models whose engines this pass probes (each parsed once per change,
    ``LoopContext.specs``)."""
    ids = {n.model_id for n in nodes if n.state in _PROBED}
    if not ids:
        return {}
    with ctx.store.session() as s:
        versions = {mid: version for mid, version in s.execute(_MODEL_VERSIONS) if mid in ids}
        return read_specs(s, ctx.specs, versions)


# Where one listing is made: (cloud, account, region, the customer it is filtered to; ""
# for a shared account, gpucap's own, listed once for all its customers: the audit's rule).
Site = tuple[str, str, str, str]


@dataclass(frozen=True)
class Listing:
    """One site's instances that carry gpucap's tags, as listed this pass."""

    by_instance: Mapping[str, CloudNode]
    by_intent: Mapping[str, Sequence[CloudNode]]

    @classmethod
    def of(cls, found: Sequence[CloudNode]) -> Listing:
        by_intent: dict[str, list[CloudNode]] = {}
        for c in found:
            by_intent.setdefault(c.tags.get(TAG_INTENT) or c.intent_id, []).append(c)
        return cls({c.instance_id: c for c in found}, by_intent)


def _site(n: NodeSnapshot, accounts: Accounts) -> Site:
    acct = accounts.get((n.customer, n.account))
    shared = acct is not None and acct.owner == Owner.SHARED
    return (n.cloud, n.account, n.region, "" if shared else n.customer)


def _list_sites(
    ctx: LoopContext, nodes: Sequence[NodeSnapshot], accounts: Accounts
) -> dict[Site, Listing | None]:
    """One ``list_nodes`` per site with a node to observe (None: the listing failed, its
    error counted; its nodes are left as they are this pass, never failed for it)."""
    firsts: dict[Site, NodeSnapshot] = {}
    for n in nodes:
        if n.state != NodeState.PENDING:
            firsts.setdefault(_site(n, accounts), n)
    out: dict[Site, Listing | None] = {}
    for site, n in firsts.items():
        try:
            provider = _provider(ctx, n, accounts)
            ctx.telemetry.provider_calls.labels(n.cloud, "list").inc()
            found = provider.list_nodes(n.region, ownership_filter(site[3] or None))
        except ProviderError as err:
            ctx.telemetry.provider_errors.labels(n.cloud, n.account, err.kind).inc()
            log.warning("reconcile.list_failed", account=n.account, region=n.region, error=str(err))
            out[site] = None
            continue
        except Exception:  # (an adapter bug: as a node's, it must not stall the pass)
            ctx.telemetry.provider_errors.labels(n.cloud, n.account, "Unexpected").inc()
            log.exception("reconcile.list_failed", account=n.account, region=n.region)
            out[site] = None
            continue
        out[site] = Listing.of(found)
    return out


def _observe(
    ctx: LoopContext,
    n: NodeSnapshot,
    accounts: Accounts,
    listings: Mapping[Site, Listing | None],
) -> Seen | None:
    """What the cloud reports of the node, from its site's listing (None: that listing
    failed). A recorded instance the listing lacks is described once (``_confirm``)."""
    if n.state == NodeState.PENDING:
        return Seen()
    listing = listings.get(_site(n, accounts))
    if listing is None:
        return None
    if n.state in (NodeState.PROVISIONING, NodeState.RUNNING, NodeState.READY, *_WARM):
        assert n.instance_id is not None
        return Seen(live=_instance(ctx, n, accounts, listing, n.instance_id))
    if n.instance_id:
        cn = _instance(ctx, n, accounts, listing, n.instance_id)
        return Seen(found=[(n.instance_id, cn.status if cn is not None else None)])
    # The create may have reached the cloud without us recording its id (a crash or a
    # drain racing the create): found by its intent tag.
    return Seen(found=[(c.instance_id, c.status) for c in listing.by_intent.get(n.id, ())])


def _instance(
    ctx: LoopContext, n: NodeSnapshot, accounts: Accounts, listing: Listing, instance_id: str
) -> CloudNode | None:
    """The recorded instance, from the listing; one not listed (gone, or a fresh create
    the listing does not show yet) is described, and gone only if that says so too."""
    cn = listing.by_instance.get(instance_id)
    if cn is not None:
        return cn
    ctx.telemetry.provider_calls.labels(n.cloud, "describe").inc()
    return _provider(ctx, n, accounts).describe_node(n.region, instance_id)


def _probe(
    ctx: LoopContext,
    nodes: Sequence[NodeSnapshot],
    seen: Mapping[str, Seen],
    specs: Mapping[int, ModelSpec],
    built: _Targets,
) -> Mapping[str, Probe]:
    """One batch of probes: every running engine a router could reach or a drain waits
    on. A gang serves from its leader alone, so only the leader is probed, and each of its
    workers takes the leader's answer (the gang is ready when the leader serves)."""
    by_id = {n.id: n for n in nodes}
    built.new_pass()
    targets = []
    for n in nodes:
        spec, look = specs.get(n.model_id), seen.get(n.id)
        if spec is None or look is None or n.leader != n.id or n.state not in _PROBED:
            continue
        running = (
            look.live is not None and look.live.status == InstanceStatus.RUNNING
            if n.state != NodeState.DRAINING
            else any(st == InstanceStatus.RUNNING for _, st in look.found)
        )
        address = (look.live.private_ip if look.live else None) or n.private_ip
        if running and address:
            targets.append(built.of(n, spec, address))
    probes = dict(ctx.health.probe(targets)) if targets else {}
    for n in nodes:
        leader = by_id.get(n.leader)
        if n.leader != n.id and leader is not None and leader.id in probes:
            probes[n.id] = probes[leader.id]
    return probes


class _Targets:
    """Each node's probe target as last built, built again only when what it is made of
    changes (its row, its address, its model's spec): a pass probes every running engine,
    and building 50,000 targets anew was a tenth of its CPU. Kept for the nodes of the
    last pass only."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[int, str, ModelSpec, ProbeTarget]] = {}
        self._used: dict[str, tuple[int, str, ModelSpec, ProbeTarget]] = {}

    def new_pass(self) -> None:
        self._kept, self._used = self._used, {}

    def of(self, n: NodeSnapshot, spec: ModelSpec, address: str) -> ProbeTarget:
        kept = self._kept.get(n.id)
        if kept is None or kept[0] != n.version or kept[1] != address or kept[2] is not spec:
            kept = (n.version, address, spec, _target(n, spec, address))
        self._used[n.id] = kept
        return kept[3]


def _target(n: NodeSnapshot, spec: ModelSpec, address: str) -> ProbeTarget:
    engine = ENGINES[spec.runtime.engine]
    return ProbeTarget(
        node_id=n.id,
        instance_id=n.instance_id or "",
        address=address,
        port=port(spec.runtime),
        health_path=engine.health_path,
        metrics_path=engine.metrics.path,
        load_metrics=(engine.metrics.running, engine.metrics.waiting),
        timeout_s=spec.health.timeout_s,
        read_load=n.state == NodeState.DRAINING,
    )


def _step(
    ctx: LoopContext,
    n: NodeSnapshot,
    look: Seen,
    probes: Mapping[str, Probe],
    spec: ModelSpec | None,
    accounts: Accounts,
    now: float,
    t: Timing,
) -> None:
    health = spec.health if spec is not None else None
    if n.state == NodeState.PENDING:
        # Read the blocks fresh: a sibling's error earlier in this pass may have blocked the
        # pool (e.g. an auth failure), and a cloud known to refuse is not called again.
        with ctx.store.session() as s:
            blocked = _blocked_until(s, n, now)
        action = step_pending(n.facts(blocked), now, t)
        if isinstance(action, Create):
            _create(ctx, n, accounts)
        elif isinstance(action, NotAttempted):
            _not_attempted(ctx, n)
        return
    probe = probes.get(n.id)
    if n.state in _WARM:
        cn = look.live
        seen = Observed(cn.instance_id, cn.status) if cn else Observed(n.instance_id or "", None)
        _apply(ctx, n, step_warm(n.facts(), seen), accounts)
        return
    if n.state in (NodeState.PROVISIONING, NodeState.RUNNING, NodeState.READY):
        cn = look.live
        if cn is not None and cn.private_ip and cn.private_ip != n.private_ip:
            n = _record_address(ctx, n, cn.private_ip)
        seen = Observed(n.instance_id or "", None)
        if cn is not None:
            seen = Observed(cn.instance_id, cn.status, cn.zone, probe)
        wp = spec.warm_pool if spec is not None else None
        park = n.warm and wp is not None and wp.mode == WarmMode.STOPPED
        action = step_live(n.facts(park=park), seen, now, t, health)
        _apply(ctx, n, action, accounts)
        return
    found = [Observed(iid, st, probe=probe) for iid, st in look.found]
    _apply(ctx, n, step_leaving(n.facts(), found, now, health), accounts)


def _record_address(ctx: LoopContext, n: NodeSnapshot, address: str) -> NodeSnapshot:
    """Record where the node is reached; the snapshot goes on at the row's new version."""
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None or row.version != n.version:
            return n
        row.private_ip = address
        s.flush()
        return replace(n, version=row.version, private_ip=address)


def _blocked_until(s: Session, n: NodeSnapshot, now: float) -> float | None:
    """Until when the offering this intent asks for takes no create: its pool as a whole,
    or the zone the intent names."""
    pool = s.get(Pool, n.pool_id)
    if pool is None:
        return None
    key = PoolKey(pool.id, pool.account, pool.region, pool.instance_type)
    entries = unavailable_entries(s, now, n.customer).get(n.customer, [])
    # A block narrowed to the intent's own zone covers the intent whole.
    mine = [replace(e, zone=None) for e in entries if e.zone in (None, n.zone)]
    return availability(key, mine, now, epoch(pool.unavailable_until)).blocked_until


def _apply(ctx: LoopContext, n: NodeSnapshot, action: Action, accounts: Accounts) -> None:
    kill: tuple[str, ...] = ()
    if isinstance(action, Terminate | Move):
        kill = action.instances if isinstance(action, Terminate) else action.terminate
    for iid in kill:
        ctx.telemetry.provider_calls.labels(n.cloud, "terminate").inc()
        _provider(ctx, n, accounts).terminate_node(n.region, iid)
    if isinstance(action, Start):  # (the intent, resuming, was recorded by place)
        for iid in action.instances:
            ctx.telemetry.provider_calls.labels(n.cloud, "start").inc()
            _provider(ctx, n, accounts).start_node(n.region, iid)
        _move(ctx, n, Move(NodeState.PROVISIONING))
    stop = action.instances if isinstance(action, Stop) else ()
    if isinstance(action, Move):
        _move(ctx, n, action)  # (recorded before the stop it asks for)
        stop = action.stop
    for iid in stop:
        ctx.telemetry.provider_calls.labels(n.cloud, "stop").inc()
        _provider(ctx, n, accounts).stop_node(n.region, iid)
    if isinstance(action, CountFailures):
        _count_failures(ctx, n, action.failures)


def _count_failures(ctx: LoopContext, n: NodeSnapshot, failures: int) -> None:
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None or row.version != n.version:
            return
        row.probe_failures = failures
        if failures == 1:
            record_event(
                s,
                ctx.now_dt(),
                "node.unhealthy",
                f"{n.instance_type} {n.instance_id or '-'}: its engine failed a health check",
                customer=n.customer,
                model=n.model,
                node=n.id,
                severity="warning",
            )


def _move(ctx: LoopContext, n: NodeSnapshot, m: Move) -> None:
    """Move a node on, stamping its time; a failure (left failed, or drained so that its
    instance is terminated) also stamps ``failed_at``, which a failed launch is known by."""
    now = ctx.now_dt()
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None or row.version != n.version:
            return  # changed under us (e.g. drained); the next tick sees the new state
        row.state = m.to.value
        if m.to == NodeState.STOPPED:
            keep_stop(s, row)  # (its last stop's stamps are about to be overwritten)
        setattr(row, f"{m.to.value}_at", now)
        failure = m.failed or m.to == NodeState.FAILED
        if failure:
            row.failed_at = now
        if m.error:
            row.error = m.error
        if m.zone:
            row.zone = m.zone
        if m.probe_failures is not None:
            row.probe_failures = m.probe_failures
        if failure or m.to in (NodeState.READY, NodeState.TERMINATED, NodeState.STOPPED):
            record_event(
                s,
                now,
                "node.failed" if failure else f"node.{m.to.value}",
                f"{n.instance_type} {n.instance_id or '-'} in {n.region}"
                + (f": {m.error}" if m.error else "")
                + ("; draining" if m.to == NodeState.DRAINING else ""),
                customer=n.customer,
                model=n.model,
                node=n.id,
                severity="warning" if failure else "info",
            )


def _not_attempted(ctx: LoopContext, n: NodeSnapshot) -> None:
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None or row.version != n.version or row.state != NodeState.PENDING:
            return
        pool = s.get(Pool, n.pool_id)
        reason = (pool.unavailable_reason if pool else None) or "offering unavailable"
        row.state = NodeState.FAILED.value
        row.failed_at = ctx.now_dt()
        row.error = f"not attempted: pool blocked ({reason})"


def _create(ctx: LoopContext, n: NodeSnapshot, accounts: Accounts) -> None:
    """Create the node's instance. A gang's worker waits until its leader's instance has an
    address (its engine joins the leader there) and takes the leader's zone, so the gang
    is placed together (one placement group, named after the replica)."""
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None or row.version != n.version or row.state != NodeState.PENDING:
            return
        leader = s.get(Node, n.leader) if n.leader != n.id else None
        if leader is not None and not (leader.private_ip and leader.zone):
            return  # (not an attempt: the next pass looks again)
        # The first attempt chooses what the node launches with; retries send the same.
        if row.attempts == 0:
            row.launch_image = _baked_image(ctx, s, row)
            row.launch_weights_uri, row.launch_weights_sources = _staged_weights(
                ctx, s, row, ctx.now_dt()
            )
        # Count the attempt before calling, so a crash mid-call still backs off and is seen.
        row.attempts += 1
        row.last_attempt_at = ctx.now_dt()
        if leader is not None:
            row.zone = leader.zone
        zone = row.zone
        gang = row.replica_id if len(row.replica.nodes) > 1 else None
        address = leader.private_ip if leader is not None else None
        user_data = _user_data(ctx, s, row, address) if ctx.boot else ""
        image = row.launch_image
    provider = _provider(ctx, n, accounts)
    request = NodeRequest(
        intent_id=n.id,
        instance_type=n.instance_type,
        region=n.region,
        zone=zone,
        image=image,
        user_data=user_data,
        tags=ownership_tags(n.id, n.customer, n.pool_id, n.model),
        reservation=n.reservation,
        placement_group=gang,
    )
    ctx.telemetry.provider_calls.labels(n.cloud, "create").inc()
    result = provider.create_node(request)
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None:
            return
        row.instance_id = result.node.instance_id
        row.zone = result.node.zone
        row.private_ip = result.node.private_ip or row.private_ip
        if row.state == NodeState.PENDING:
            row.state = NodeState.PROVISIONING.value
            row.provisioning_at = ctx.now_dt()
            row.error = None
        record_event(
            s,
            ctx.now_dt(),
            "node.created" if result.created else "node.found",
            f"{n.instance_type} {result.node.instance_id} in {result.node.zone} for intent {n.id}",
            customer=n.customer,
            model=n.model,
            node=n.id,
        )


def _baked_image(ctx: LoopContext, s: Session, row: Node) -> str | None:
    """The freshest ready baked image for the node's location and runtime image
    (``loop/images.py``); None: the cloud's base image, with the full bootstrap."""
    model = s.get(Model, row.replica.model_id)
    if model is None:
        return None
    spec = ctx.specs.spec(model.id, model.spec)
    return image_for(s, row.customer, row.account, row.region, runtime_image(spec))


def _staged_weights(
    ctx: LoopContext, s: Session, row: Node, now: datetime
) -> tuple[str | None, list[str] | None]:
    """Where the node's weights come from: the ready staged copy in its own site
    (``loop/staging.py``, its use stamped; None: there is none), and every source in the
    order the node tries them (``node_boot.weight_sources``: the ready copies of its cloud,
    its own site's first, then the origins; None: a model without weights)."""
    model = s.get(Model, row.replica.model_id)
    if model is None:
        return None, None
    own = staged_copy(s, model.customer, model.name, row.account, row.region, now)
    weights = ctx.specs.spec(model.id, model.spec).weights
    if weights is None:
        return own, None
    ready = s.scalars(
        select(WeightCopy).where(
            WeightCopy.customer == model.customer,
            WeightCopy.model == model.name,
            WeightCopy.cloud == row.cloud,
            WeightCopy.state == READY,
        )
    )
    copies = [StagedCopy(c.cloud, c.account, c.region, c.dest_uri) for c in ready]
    cloud = Cloud(row.cloud)
    return own, list(weight_sources(weights, cloud, row.account, row.region, copies))


def _user_data(ctx: LoopContext, s: Session, row: Node, leader: str | None) -> str:
    """The node's rendered user data (``bootstrap.render``), its boot token recorded (as a
    digest, before the call, like the intent). The token is derived from the node's id, so
    a retried create renders what the first did. A gang's node boots with its rank, a
    worker with its ``leader``'s address."""
    replica = row.replica
    model = s.get(Model, replica.model_id)
    pool = s.get(Pool, row.pool_id)
    boot = ctx.boot
    if model is None or pool is None or boot is None:
        return ""
    rank = rank_of([n.id for n in replica.nodes], row.id)
    secret = boot.tokens.for_node(row.id)
    row.token_sha256 = digest(secret)
    row.token_expires_at = ctx.now_dt() + timedelta(seconds=TOKEN_TTL_S)
    spec = ctx.specs.spec(model.id, model.spec)
    boots = node_boot(
        model.customer,
        spec,
        pool,
        row.id,
        rank=rank,
        leader=leader,
        report_url=boot.report_url,
        token=secret,
        staged_uri=row.launch_weights_uri,
        sources=row.launch_weights_sources,
    )
    return render(boots)


def _create_failed(ctx: LoopContext, n: NodeSnapshot, err: ProviderError) -> None:
    """Typed errors decide what happens; message strings never do."""
    ctx.telemetry.provider_errors.labels(n.cloud, n.account, err.kind).inc()
    log.warning("provider_error", node=n.id, pool=n.pool_id, error=str(err))
    verdict = on_create_error(
        err,
        attempts=n.attempts,
        max_attempts=ctx.tuning.max_create_attempts,
        region=n.region,
        zone=n.zone,
        instance_type=n.instance_type,
        pool_id=n.pool_id,
        ttls=ttls(ctx.tuning),
    )
    now, now_dt = ctx.now(), ctx.now_dt()
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None:
            return
        row.error = str(err)
        if not isinstance(verdict, Fail):
            return
        if NodeState(row.state) == NodeState.PENDING:
            row.state = NodeState.FAILED.value
            row.failed_at = now_dt
        entry = Unavailable.from_block(
            n.account, verdict.block, now, f"{err.kind}: {err.message}"[:1000]
        )
        blocked = record_unavailable(s, n.customer, entry)
        record_event(
            s,
            now_dt,
            "node.create_failed",
            f"{err.kind} for {n.instance_type} in {n.region}: {err.message}"
            + (f"; blocked {blocked} pool(s)" if blocked else "")
            + (f" (zone {entry.zone})" if entry.zone else ""),
            customer=n.customer,
            model=n.model,
            node=n.id,
            severity="warning",
        )


def _start_failed(ctx: LoopContext, n: NodeSnapshot, err: ProviderError) -> None:
    """A warm node's start failed. Throttling and 5xx: try again next pass. Anything else
    (no host for it in its zone, most often): the replica goes back to the warm pool, the
    offering is blocked at the error's scope, and the next place pass launches a fresh
    create in the next best pool (it still lacks the capacity). An instance that is gone
    blocks nothing: the next pass sees it gone and fails the node (``step_warm``)."""
    ctx.telemetry.provider_errors.labels(n.cloud, n.account, err.kind).inc()
    log.warning("provider_error", node=n.id, pool=n.pool_id, error=str(err), verb="start")
    if isinstance(err, Throttled | TransientError | NotFound):
        return
    block = block_for(err, n.region, n.zone, n.instance_type, n.pool_id, ttls(ctx.tuning))
    now, now_dt = ctx.now(), ctx.now_dt()
    with ctx.store.session() as s:
        row = s.get(Node, n.id)
        if row is None or row.state != NodeState.RESUMING.value:
            return
        replica = row.replica
        for node in replica.nodes:
            if node.state == NodeState.RESUMING.value:
                # Still stopped since it stopped (its bill too): only the resume is undone.
                node.state, node.resuming_at = NodeState.STOPPED.value, None
        replica.warm, replica.resumed_at = True, None
        entry = Unavailable.from_block(n.account, block, now, f"{err.kind}: {err.message}"[:1000])
        blocked = record_unavailable(s, n.customer, entry)
        record_event(
            s,
            now_dt,
            "warm.start_failed",
            f"{err.kind} starting warm {n.instance_type} {n.instance_id} in {n.region}: "
            f"{err.message}; back in the warm pool, a create goes to the next pool"
            + (f" (blocked {blocked} pool(s))" if blocked else ""),
            customer=n.customer,
            model=n.model,
            node=n.id,
            severity="warning",
        )


def settle_replicas(ctx: LoopContext) -> None:
    """Each live replica's state from its nodes' (``lifecycle.replica_state``); only the
    replicas whose state moves are loaded as rows."""
    now = ctx.now_dt()
    with ctx.store.session() as s:
        nodes: dict[str, tuple[str, list[str]]] = {}
        for rid, state, node_state in s.execute(_LIVE_REPLICA_NODES):
            nodes.setdefault(rid, (state, []))[1].extend([node_state] if node_state else [])
        for rid, (state, node_states) in nodes.items():
            new = replica_state(node_states, state)
            if new == state:
                continue
            r = s.get(Replica, rid)
            assert r is not None  # read by this session
            r.state = new.value
            if new == NodeState.READY:
                r.ready_at = now
            if new == NodeState.FAILED:
                drain_replica(r, now)  # one failed node fails the gang: release its siblings
            if NodeState(r.state).is_terminal:
                r.ended_at = now


def _provider(ctx: LoopContext, n: NodeSnapshot, accounts: Accounts) -> Provider:
    acct = accounts.get((n.customer, n.account))
    if acct is None:  # (a foreign key: only a bug leaves a node without its account)
        raise LookupError(f"node {n.id}: no account {n.account!r} of {n.customer!r}")
    return ctx.providers.provider(n.customer, acct)
