"""The per-tick snapshot: one read of the store that decide and place share, with each
model's spec parsed once (and again only when it changes, not every tick)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select
from sqlalchemy.orm import Session

from coldstart.learned import CREATED, Boot, Learned, learn
from coldstart.observed import Launch, times_to_ready
from controlplane.availability import PoolKey, Unavailable, availability
from controlplane.loop.context import SpecCache, epoch
from controlplane.loop.images import runtime_image
from controlplane.store.models import (
    Customer,
    MachineImage,
    Model,
    Node,
    NodePhaseReport,
    PolicyVersion,
    Pool,
    Replica,
    UnavailableOffering,
)
from controlplane.store.transitions import unavailable_entry
from schema.policy import Model as ModelSpec
from schema.policy import Overflow
from schema.policy_file import parse_policy
from schema.types import NodePhase, NodeState

NON_TERMINAL = tuple(s.value for s in NodeState if not s.is_terminal)
LIVE_VALUES = tuple(s.value for s in NodeState if s.is_live)

# Observed times-to-ready older than this no longer describe a pool (images, weights and
# the clouds' capacity change).
OBSERVED_FOR = timedelta(days=7)


@dataclass(frozen=True)
class ReplicaFacts:
    id: str
    model_id: int
    pool_id: str
    gpu_shape: str
    state: str
    created_at: float
    nodes: tuple[tuple[str, str], ...]  # (node id, state)
    retiring_since: float | None = None  # leaving surge-first (``lifecycle.surge``)
    warm: bool = False  # in the model's warm pool (``lifecycle.warm``), not its capacity

    @property
    def live(self) -> bool:
        """Counted as the model's: not leaving, whether by draining or by retiring, and not
        waiting in the warm pool."""
        return self.state in LIVE_VALUES and self.retiring_since is None and not self.warm


@dataclass(frozen=True)
class ModelFacts:
    id: int
    customer: str
    name: str
    spec: ModelSpec
    desired: int
    reason: str
    pinned: int | None
    paused: bool
    deleted: bool
    # the newest: held in memory, else the stored one (in a placement snapshot, a model
    # without a warm pool's is not read: empty)
    autoscaler_state: dict[str, Any]
    version: int = 0  # the row's, as read (the decide job's writes are guarded by it)


@dataclass(frozen=True)
class PoolFacts:
    id: str
    customer: str
    cloud: str
    account: str
    region: str
    instance_type: str
    gpu_shape: str
    tier: str
    price_usd_per_hour: float
    committed: int
    cordoned: bool
    reservation: str | None
    blocked_until: float | None  # the whole pool, from the cache and the pool row
    zone: str | None  # where a launch goes now (an open zone while some are blocked)


@dataclass
class Snapshot:
    now: float
    models: list[ModelFacts]
    replicas: dict[int, list[ReplicaFacts]]  # non-terminal, by model id
    observed: dict[int, list[tuple[str, float]]]  # model id -> (pool, seconds to ready)
    pools: dict[str, list[PoolFacts]] = field(default_factory=dict)  # active, by customer
    nodes_in_use: Counter[str] = field(default_factory=Counter)  # live nodes by pool id
    overflow: dict[str, Overflow] = field(default_factory=dict)  # by customer
    learned: Learned = field(default_factory=Learned)  # boot reports' phases (with placement)
    # (customer, account, region, runtime image) with a ready baked image (with placement)
    baked: frozenset[tuple[str, str, str, str]] = frozenset()
    _by_customer: dict[str, list[ModelFacts]] | None = field(default=None, repr=False)

    def models_of(self, customer: str) -> list[ModelFacts]:
        """The customer's models, in the snapshot's order (grouped once: a job that goes
        customer by customer would otherwise scan every model for each)."""
        if self._by_customer is None:
            self._by_customer = defaultdict(list)
            for m in self.models:
                self._by_customer[m.customer].append(m)
        return self._by_customer.get(customer, [])

    def live(self, model_id: int) -> list[ReplicaFacts]:
        return [r for r in self.replicas.get(model_id, []) if r.live]

    def baked_for(self, m: ModelFacts, p: PoolFacts) -> bool:
        """Whether a new node of the model in the pool boots a baked image
        (``controlplane.loop.images.image_for`` would find a ready one)."""
        return (p.customer, p.account, p.region, runtime_image(m.spec)) in self.baked

    def retiring(self, model_id: int) -> list[ReplicaFacts]:
        """Replicas still serving while their replacements start (not draining yet)."""
        return [
            r
            for r in self.replicas.get(model_id, [])
            if r.retiring_since is not None and r.state in LIVE_VALUES
        ]


class SnapshotReader:
    """Reads snapshots; keeps the parsed specs and overflow rules between ticks, so a model's
    spec is validated when it changes, not by every job on every tick."""

    def __init__(self, specs: SpecCache | None = None) -> None:
        self._specs = specs or SpecCache()
        # model id -> (the state as stored, the newest state, when it was stored): the
        # decide job's state between its writes (``loop/decide.py``); used while the row
        # still holds what was stored (another daemon's write, or a restore, wins).
        self._states: dict[int, tuple[dict[str, Any], dict[str, Any], float]] = {}
        self._overflow: dict[str, tuple[str, Overflow]] = {}
        self._learned: tuple[int | None, Learned] = (None, Learned())
        self._replicas: tuple[tuple[int, ...] | None, dict[int, list[ReplicaFacts]]] = (
            None,
            {},
        )
        # (mark, the oldest instant a kept launch counts from, the times by model)
        self._observed: tuple[tuple[Any, ...] | None, float | None, dict[int, Any]] = (
            None,
            None,
            {},
        )
        self._baked: tuple[tuple[int, int] | None, frozenset[tuple[str, str, str, str]]] = (
            None,
            frozenset(),
        )

    @property
    def specs(self) -> SpecCache:
        return self._specs

    def hold_state(self, model_id: int, state: dict[str, Any], stored_at: float | None) -> None:
        """The decider's newest state for a model; ``stored_at``: it was written to the row
        then (None: only held, the row keeps the last stored one)."""
        held = self._states.get(model_id)
        if stored_at is not None:
            self._states[model_id] = (state, state, stored_at)
        elif held is not None:
            self._states[model_id] = (held[0], state, held[2])

    def state_stored_at(self, model_id: int) -> float | None:
        held = self._states.get(model_id)
        return held[2] if held is not None else None

    def _state(self, model_id: int, stored: dict[str, Any], now: float) -> dict[str, Any]:
        held = self._states.get(model_id)
        if held is not None and held[0] == stored:
            return held[1]
        # First seen (or changed under us): what the row holds, as stored ``now``.
        self._states[model_id] = (stored, stored, now)
        return stored

    def read(self, s: Session, now: float, *, placement: bool = False) -> Snapshot:
        """Models (the deleted ones too: their replicas still leave), their non-terminal
        replicas and observed cold starts; with ``placement``, also every customer's
        active pools with their availability, live nodes per pool and overflow rules."""
        rows = s.execute(_MODELS).all()
        specs = read_specs(s, self._specs, {row[0]: row[3] for row in rows})
        # The decider's states (a model row's largest column): every model's for the
        # decide job; for placement only those of models with a warm pool (which sizes
        # by the decider's forecast, ``loop/warm.py``).
        wanted = None if not placement else [mid for mid in specs if specs[mid].warm_pool]
        states: dict[int, dict[str, Any]] = {}
        if wanted is None or wanted:
            q = _STATES if wanted is None else _STATES.where(Model.id.in_(wanted))
            states = {mid: state or {} for mid, state in s.execute(q)}
        models = [
            ModelFacts(
                id=mid,
                customer=customer,
                name=name,
                spec=specs[mid],
                desired=desired,
                reason=reason,
                pinned=pinned,
                paused=paused,
                deleted=bool(deleted),
                autoscaler_state=dict(self._state(mid, states[mid], now)) if mid in states else {},
                version=version,
            )
            for mid, customer, name, version, desired, reason, pinned, paused, deleted in rows
        ]
        snap = Snapshot(now, models, self._replicas_from(s), self._observed_from(s, now))
        if placement:
            snap.learned = self._learned_from(s, now, {m.id: m.spec for m in models})
            snap.pools = _pools(s, now)
            snap.nodes_in_use = Counter(s.scalars(_LIVE_NODE_POOLS))
            snap.overflow = {c.name: self._overflow_of(s, c) for c in s.scalars(select(Customer))}
            snap.baked = self._baked_from(s)
        return snap

    def _replicas_from(self, s: Session) -> dict[int, list[ReplicaFacts]]:
        """The non-terminal replicas (``_replicas``), read again only when a replica or a
        node row was added or changed since (``fleet_mark``). Shared by the snapshots
        until then: read only."""
        mark = fleet_mark(s)
        if mark != self._replicas[0]:
            self._replicas = (mark, _replicas(s))
        return self._replicas[1]

    def _observed_from(self, s: Session, now: float) -> dict[int, list[tuple[str, float]]]:
        """The observed times-to-ready (``_observed_ready_s``), read again only when a
        replica has become ready or a node failed since (one aggregate query a tick
        otherwise), or when the oldest launch they hold has aged out of the window."""
        since = datetime.fromtimestamp(now, UTC) - OBSERVED_FOR
        ready, ready_count, failed = s.execute(_OBSERVED_MARK, {"since": since}).one()
        mark = (ready, int(ready_count), failed)
        kept_mark, oldest, observed = self._observed
        if mark != kept_mark or (oldest is not None and oldest < since.timestamp()):
            observed, oldest = _observed_ready_s(s, now)
            self._observed = (mark, oldest, observed)
        return observed

    def _baked_from(self, s: Session) -> frozenset[tuple[str, str, str, str]]:
        """The keys with a ready baked image, read again only when a build row was added
        or changed since (one aggregate query a tick otherwise: every change of a row bumps
        its version)."""
        count, versions = s.execute(_IMAGES_MARK).one()
        mark = (int(count), int(versions))
        if mark != self._baked[0]:
            keys = frozenset((c, a, r, i) for c, a, r, i in s.execute(_READY_IMAGES))
            self._baked = (mark, keys)
        return self._baked[1]

    def _learned_from(self, s: Session, now: float, specs: dict[int, ModelSpec]) -> Learned:
        """The phases learned from boot reports, read again only when a node has reported
        since (one scalar query a tick otherwise)."""
        newest = s.scalar(NEWEST_REPORT)
        if newest is not None and newest != self._learned[0]:
            self._learned = (newest, learn(_boots(s, now, specs)))
        return self._learned[1]

    def _overflow_of(self, s: Session, cust: Customer) -> Overflow:
        pv = s.get(PolicyVersion, cust.active_policy_id) if cust.active_policy_id else None
        if pv is None:
            return Overflow()
        cached = self._overflow.get(cust.name)
        if cached and cached[0] == pv.sha256:
            return cached[1]
        overflow = parse_policy(pv.raw_yaml, pv.source or cust.name).policy.overflow
        self._overflow[cust.name] = (pv.sha256, overflow)
        return overflow


def unavailable_entries(
    s: Session, now: float, customer: str | None = None
) -> dict[str, list[Unavailable]]:
    """The unexpired cache entries, by customer (of one customer only, when given)."""
    out: dict[str, list[Unavailable]] = defaultdict(list)
    q = select(UnavailableOffering).where(
        UnavailableOffering.until > datetime.fromtimestamp(now, UTC)
    )
    if customer is not None:
        q = q.where(UnavailableOffering.customer == customer)
    for e in s.scalars(q):
        out[e.customer].append(unavailable_entry(e))
    return out


def _pools(s: Session, now: float) -> dict[str, list[PoolFacts]]:
    entries = unavailable_entries(s, now)
    out: dict[str, list[PoolFacts]] = defaultdict(list)
    for p in s.scalars(select(Pool).where(Pool.active.is_(True)).order_by(Pool.id)):
        zones = tuple((p.zones or {}).get("zones", ()))
        key = PoolKey(p.id, p.account, p.region, p.instance_type, zones)
        avail = availability(key, entries.get(p.customer, ()), now, epoch(p.unavailable_until))
        out[p.customer].append(
            PoolFacts(
                id=p.id,
                customer=p.customer,
                cloud=p.cloud,
                account=p.account,
                region=p.region,
                instance_type=p.instance_type,
                gpu_shape=p.gpu_shape,
                tier=p.tier,
                price_usd_per_hour=p.price_usd_per_hour,
                committed=p.committed,
                cordoned=p.cordoned,
                reservation=p.reservation,
                blocked_until=avail.blocked_until,
                zone=avail.zone,
            )
        )
    return out


# The snapshot's statements, built once (building one costs about as much as running it).
_REPLICAS = (
    select(
        Replica.id,
        Replica.model_id,
        Replica.pool_id,
        Replica.gpu_shape,
        Replica.state,
        Replica.created_at,
        Replica.retiring_at,
        Replica.warm,
        Node.id,
        Node.state,
    )
    .outerjoin(Node, Node.replica_id == Replica.id)
    .where(Replica.state.in_(NON_TERMINAL))
    .order_by(Replica.created_at, Replica.id, Node.id)
)
# When a launch failed: its first node's failure (at the cloud, or the provision timeout
# draining an instance whose model server never answered). Not an error alone: a node
# released by a scale-down while its create was being retried keeps its throttling error,
# and nothing waited on it.
_FAILED_AT = select(func.min(Node.failed_at)).where(Node.replica_id == Replica.id).scalar_subquery()
_SINCE = bindparam("since", type_=Replica.__table__.c.ready_at.type)
_OBSERVED = (
    select(Replica.model_id, Replica.pool_id, Replica.created_at, Replica.ready_at, _FAILED_AT)
    .where(or_(Replica.ready_at >= _SINCE, and_(Replica.ready_at.is_(None), _FAILED_AT >= _SINCE)))
    .where(Replica.resumed_at.is_(None))  # (a resume is no create: not its time-to-ready)
    # (times_to_ready orders by when each was ready or failed; this breaks its ties)
    .order_by(Replica.created_at, Replica.id)
)
_MODELS = select(
    Model.id,
    Model.customer,
    Model.name,
    Model.version,
    Model.desired_replicas,
    Model.desired_reason,
    Model.pinned_replicas,
    Model.paused,
    Model.deleted_at.is_not(None),
)
_STATES = select(Model.id, Model.autoscaler_state)
_SPECS = select(Model.id, Model.version, Model.spec)
_FLEET_MARK = select(
    select(func.count(Replica.id)).scalar_subquery(),
    select(func.coalesce(func.sum(Replica.version), 0)).scalar_subquery(),
    select(func.count(Node.id)).scalar_subquery(),
    select(func.coalesce(func.sum(Node.version), 0)).scalar_subquery(),
)
# What changes the observed times-to-ready: a replica ready, a node failed (the window
# aging is checked against the oldest launch kept).
_OBSERVED_MARK = select(
    select(func.max(Replica.ready_at)).scalar_subquery(),
    select(func.count(Replica.id)).where(Replica.ready_at >= _SINCE).scalar_subquery(),
    select(func.max(Node.failed_at)).scalar_subquery(),
)
# The newest boot report: a new one changes what boots have taught (and who reported ready).
NEWEST_REPORT = select(func.max(NodePhaseReport.id))
_IMAGES_MARK = select(func.count(MachineImage.id), func.coalesce(func.sum(MachineImage.version), 0))
_READY_IMAGES = (
    select(
        MachineImage.customer,
        MachineImage.account,
        MachineImage.region,
        MachineImage.runtime_image,
    )
    .where(MachineImage.state == "ready")
    .distinct()
)
# Only boots that reached ready (their phase split is whole), the newest first; a node that
# failed its boot says how long the failure took, not the phases. Bounded: what is learned
# is a percentile of the few most recent per pool and per model (``coldstart.learned``).
BOOTS_READ = 2000
_READY_NODES = (
    select(NodePhaseReport.node_id)
    .where(NodePhaseReport.phase == NodePhase.READY.value, NodePhaseReport.at >= _SINCE)
    .order_by(NodePhaseReport.at.desc())
    .limit(BOOTS_READ)
    .subquery()
)
_BOOT_PHASES = (
    select(
        Node.id,
        Node.pool_id,
        Node.pending_at,
        Replica.model_id,
        NodePhaseReport.phase,
        NodePhaseReport.at,
    )
    .join(Replica, Replica.id == Node.replica_id)
    .join(NodePhaseReport, NodePhaseReport.node_id == Node.id)
    .where(Node.id.in_(select(_READY_NODES.c.node_id)))
    # A resumed node's second boot is no create's: only its first boot's phases.
    .where(or_(Node.resuming_at.is_(None), NodePhaseReport.at < Node.resuming_at))
)
_LIVE_NODE_POOLS = select(Node.pool_id).where(Node.state.in_(LIVE_VALUES))


def _replicas(s: Session) -> dict[int, list[ReplicaFacts]]:
    """The non-terminal replicas by model, each with its nodes: one query of columns (no
    rows are built: the snapshot is read on every tick of two jobs)."""
    rows = s.execute(_REPLICAS)
    parts: dict[str, tuple[tuple[Any, ...], list[tuple[str, str]]]] = {}
    for rid, model_id, pool_id, shape, state, created, retiring, warm, node_id, node_state in rows:
        head = (rid, model_id, pool_id, shape, state, created, retiring, warm)
        _, nodes = parts.setdefault(rid, (head, []))
        if node_id is not None:
            nodes.append((node_id, node_state))
    out: dict[int, list[ReplicaFacts]] = defaultdict(list)
    for (rid, model_id, pool_id, shape, state, created, retiring, warm), nodes in parts.values():
        out[model_id].append(
            ReplicaFacts(
                id=rid,
                model_id=model_id,
                pool_id=pool_id,
                gpu_shape=shape,
                state=state,
                created_at=epoch(created) or 0.0,
                nodes=tuple(nodes),
                retiring_since=epoch(retiring),
                warm=bool(warm),
            )
        )
    return out


def _boots(s: Session, now: float, specs: dict[int, ModelSpec]) -> list[Boot]:
    since = datetime.fromtimestamp(now, UTC) - OBSERVED_FOR
    nodes: dict[str, tuple[str, int, dict[str, float]]] = {}
    for node_id, pool_id, pending, model_id, phase, at in s.execute(_BOOT_PHASES, {"since": since}):
        _, _, instants = nodes.setdefault(node_id, (pool_id, model_id, {}))
        instants[phase] = epoch(at) or 0.0
        if pending is not None:
            instants[CREATED] = epoch(pending) or 0.0
    boots = []
    for pool_id, model_id, instants in nodes.values():
        spec = specs.get(model_id)
        weights_gb = spec.weights.size_gb if spec is not None and spec.weights else 0.0
        boots.append(Boot(pool_id, model_id, weights_gb, instants))
    return boots


def fleet_mark(s: Session) -> tuple[int, ...]:
    """A mark of the replica and node tables that moves with every change to them: rows
    are never deleted and every ORM write bumps a row's version, so each table's (rows,
    sum of versions) grows with every insert and every update. Equal marks: nothing
    changed in between (one aggregate query, where a read of the rows costs seconds at
    fleet scale). Its cost grows with the tables' history, not with a tick's work."""
    return tuple(int(v) for v in s.execute(_FLEET_MARK).one())


def read_specs(s: Session, cache: SpecCache, versions: dict[int, int]) -> dict[int, ModelSpec]:
    """The parsed specs of the models at the row versions given: the stored specs are read
    (and parsed) only of those the cache does not hold at that version."""
    out: dict[int, ModelSpec] = {}
    for mid, version in versions.items():
        known = cache.known(mid, version)
        if known is not None:
            out[mid] = known
    stale = [mid for mid in versions if mid not in out]
    if not stale:
        return out
    q = _SPECS if len(stale) * 2 > len(versions) else _SPECS.where(Model.id.in_(stale))
    for mid, version, raw in s.execute(q):
        if mid in versions and mid not in out:
            out[mid] = cache.spec(mid, raw, version)
    return out


def _observed_ready_s(
    s: Session, now: float
) -> tuple[dict[int, list[tuple[str, float]]], float | None]:
    """Per model, the (pool, seconds from launch to capacity) of its launches in the last
    ``OBSERVED_FOR``, oldest first: what the next replica's cold start is expected from
    (``coldstart.expected_ready_from``). A launch that failed before it was ready counts
    until its replacement was (``coldstart.observed``). With the instant the oldest launch
    read counts from (when it was ready, else failed): the set read changes when that ages
    out of the window."""
    since = datetime.fromtimestamp(now, UTC) - OBSERVED_FOR
    rows = s.execute(_OBSERVED, {"since": since})
    launches = []
    oldest = math.inf
    for model_id, pool_id, created, ready, failed in rows:
        start = epoch(created)
        if start is not None:
            launch = Launch(model_id, pool_id, start, epoch(ready), epoch(failed))
            launches.append(launch)
            end = launch.ready if launch.ready is not None else launch.failed
            oldest = min(oldest, end if end is not None else math.inf)
    return times_to_ready(launches), (oldest if oldest < math.inf else None)
