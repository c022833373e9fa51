"""The application layer: every change an operator or deployment tool makes goes through here.

The gRPC server, the CLI's offline paths and the tests call this class; it owns validation
(typed errors that name the field), the write transactions on the store, and the event log.
It writes *spec* only (policies, accounts, pools' policy-derived fields, model specs and
on-call overrides); status (replicas, nodes, decisions) belongs to the daemon's jobs and is
only read here. The one exception is an on-call drain, which marks a node and its replica
``draining``: that is an intent, like the placement's own drains, and the reconciler carries
it out (terminates at the cloud) and placement replaces the replica.

Errors: :class:`schema.policy_file.PolicyError` for a bad policy file (every problem with
line and field path), :class:`InvalidArgumentError` (field + reason), :class:`NotFoundError`,
:class:`AlreadyExistsError`, :class:`FailedPreconditionError`. A failed call changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import Select, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.orm.exc import StaleDataError

from autoscaler import Autoscaler, Decision, GpucapAutoscaler
from controlplane.decider_code import UNKNOWN, decider_code
from controlplane.pools import pools_for_policy
from controlplane.replay import Replayed, ReplayError, replay
from controlplane.store.db import Store
from controlplane.store.events import record_event
from controlplane.store.models import (
    Account,
    Customer,
    DecisionRecord,
    Event,
    Node,
    PolicyVersion,
    Pool,
    Replica,
)
from controlplane.store.models import Model as ModelRow
from providers.credentials import ExternalIdGenerator
from schema.policy import Model as ModelSpec
from schema.policy import Policy, Problem, semantic_problems
from schema.policy_file import (
    LoadedPolicy,
    PolicyError,
    parse_policy,
    problems_from_validation_error,
)
from schema.types import TERMINAL_NODE_STATES, Cloud, NodeState, Owner

T = TypeVar("T")
R = TypeVar("R")
Q = TypeVar("Q", bound="Select[*tuple[Any, ...]]")  # any select, narrowed by _matching
K = TypeVar("K", int, str)

# --------------------------------------------------------------------------------------
# Errors


class ServiceError(Exception):
    """Base of the errors a caller caused (as opposed to a bug or an outage)."""


class InvalidArgumentError(ServiceError):
    """One or more request fields are invalid. ``violations`` lists (field, reason) pairs in
    request order; ``field``/``reason`` are the first one."""

    def __init__(self, field: str, reason: str, *more: tuple[str, str]) -> None:
        self.violations: list[tuple[str, str]] = [(field, reason), *more]
        self.field, self.reason = field, reason
        super().__init__("; ".join(f"{f}: {r}" for f, r in self.violations))

    @classmethod
    def from_problems(cls, problems: Iterable[Problem], prefix: str = "") -> InvalidArgumentError:
        pairs = [
            (prefix + p.field if p.path else prefix.rstrip(".") or p.field, p.reason)
            for p in problems
        ]
        return cls(*pairs[0], *pairs[1:])


class NotFoundError(ServiceError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {name!r} not found")


class AlreadyExistsError(ServiceError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {name!r} already exists")


class FailedPreconditionError(ServiceError):
    """The request is well-formed but the current state does not allow it."""


# --------------------------------------------------------------------------------------
# Read views (detached rows plus what was aggregated for them)


@dataclass(frozen=True)
class AppliedPolicy:
    version: PolicyVersion
    changed: bool  # False: identical to the active policy, no new version was written


@dataclass(frozen=True)
class PolicyView:
    version: PolicyVersion
    active: bool


@dataclass(frozen=True)
class ModelView:
    row: ModelRow
    replicas_by_state: Mapping[str, int]

    def _count(self, *states: NodeState) -> int:
        return sum(self.replicas_by_state.get(s.value, 0) for s in states)

    @property
    def ready(self) -> int:
        return self._count(NodeState.READY)

    @property
    def starting(self) -> int:
        return self._count(NodeState.RUNNING)

    @property
    def provisioning(self) -> int:
        return self._count(NodeState.PENDING, NodeState.PROVISIONING)

    @property
    def draining(self) -> int:
        return self._count(NodeState.DRAINING, NodeState.TERMINATING)


@dataclass(frozen=True)
class NodeView:
    row: Node
    model: str


@dataclass(frozen=True)
class PoolView:
    row: Pool
    nodes_by_state: Mapping[str, int]


@dataclass
class JobTick:
    """What the daemon last saw of one periodic job (kept in memory; the daemon restarts
    with none, which is the truth: no tick has run in this process yet)."""

    job: str
    last_started_at: datetime | None = None
    last_duration_s: float = 0.0
    last_error: str = ""
    runs: int = 0
    failures: int = 0


@dataclass(frozen=True)
class StatusView:
    version: str
    started_at: datetime
    uptime_s: float
    customers: int
    models: int
    pools: int
    nodes_by_state: Mapping[str, int]
    jobs: list[JobTick] = field(default_factory=list)
    last_event_id: int = 0


@dataclass(frozen=True)
class CordonResult:
    changed: list[PoolView]  # pools whose state this call changed
    matched: int  # pools the selector matched (changed or already in that state)


@dataclass(frozen=True)
class DrainResult:
    node: NodeView
    changed: bool  # False: already draining or terminal
    message: str
    drained: list[str]  # node ids this call marked draining (the node's whole gang)


@dataclass(frozen=True)
class ReplayView:
    record: DecisionRecord
    autoscaler: str
    result: Replayed
    running_code: str  # the replaying decider's code fingerprint (controlplane.decider_code)
    recorded_decider: str | None = None  # name and code in the record (None: predates them)
    recorded_code: str | None = None

    @property
    def same_code(self) -> bool | None:
        """Whether the record was made by this very decider code; None where unknown."""
        if self.recorded_code is None or UNKNOWN in (self.recorded_code, self.running_code):
            return None
        return self.recorded_code == self.running_code and self.recorded_decider in (
            None,
            self.autoscaler,
        )


# Which ModelSpec fields an UpdateModel mask may name (top level only).
UPDATABLE_MODEL_FIELDS = frozenset(ModelSpec.model_fields) - {"name"}
MAX_EVENTS_PER_PAGE = 1000
MAX_DECISIONS_PER_PAGE = 1000
DECISION_KINDS = ("autoscale", "placement")
# Decisions the loop records without running the autoscaler (controlplane/loop/jobs.py
# ``decide``): on-call overrides, so there is nothing to replay.
OVERRIDE_REASONS = {
    "pinned": "replicas pinned by on-call",
    "paused": "autoscaler paused by on-call",
}


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _version() -> str:
    try:
        return metadata.version("gpucap")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"


class ControlPlaneService:
    """Typed operations over the store. Thread-safe: writes are serialised by one lock (a
    daemon has one writer process; the lock keeps policy versions gap- and race-free)."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime] = _utcnow,
        external_ids: ExternalIdGenerator | None = None,
        autoscaler: Autoscaler | None = None,
    ) -> None:
        self.store = store
        self._clock = clock
        self._external_ids = external_ids
        # Replays must run the decider the daemon's loop runs; the daemon uses the default.
        self._autoscaler: Autoscaler = autoscaler or GpucapAutoscaler()
        self._write_lock = threading.RLock()
        self._ticks_lock = threading.Lock()
        self._ticks: dict[str, JobTick] = {}
        self.started_at = clock()

    # ---------------------------------------------------------------- policies

    def validate_policy(self, text: str, source: str = "<policy>") -> LoadedPolicy:
        """Parse and validate without touching the store; raise PolicyError on problems."""
        return parse_policy(text, source=source or "<policy>")

    def apply_policy(self, text: str, source: str, applied_by: str) -> PolicyVersion:
        return self.apply_policy_result(text, source, applied_by).version

    def apply_policy_result(self, text: str, source: str, applied_by: str) -> AppliedPolicy:
        """Validate, then in one transaction: upsert the customer, record a new policy
        version (unless identical to the active one), make it active, and sync accounts,
        pools and policy-managed models. A bad policy raises PolicyError and changes nothing.
        """
        loaded = parse_policy(text, source=source or "<policy>")
        policy = loaded.policy

        def do(s: Session) -> AppliedPolicy:
            now = self._clock()
            cust = s.get(Customer, policy.customer)
            if cust is None:
                cust = Customer(name=policy.customer, created_at=now)
                s.add(cust)
                s.flush()
                record_event(
                    s,
                    now,
                    "customer.created",
                    f"customer {policy.customer} created",
                    customer=policy.customer,
                )
            active = s.get(PolicyVersion, cust.active_policy_id) if cust.active_policy_id else None
            if active is not None and active.sha256 == loaded.sha256:
                return AppliedPolicy(active, changed=False)
            last = s.scalar(
                select(func.max(PolicyVersion.version)).where(
                    PolicyVersion.customer == policy.customer
                )
            )
            row = PolicyVersion(
                customer=policy.customer,
                version=(last or 0) + 1,
                raw_yaml=loaded.raw,
                sha256=loaded.sha256,
                applied_by=applied_by or "unknown",
                applied_at=now,
                source=source or "",
            )
            s.add(row)
            s.flush()
            cust.active_policy_id = row.id
            _sync_accounts(s, policy, _account_names(active), self._external_ids, now)
            _sync_policy_models(s, policy, now)
            _sync_pools(s, policy, now)
            _warn_unfit_api_models(s, policy, now)
            record_event(
                s,
                now,
                "policy.applied",
                f"policy v{row.version} of {policy.customer} applied by {row.applied_by} "
                f"(sha256 {loaded.sha256[:12]}, {len(policy.models)} models, "
                f"{len(policy.accounts)} accounts)",
                customer=policy.customer,
            )
            return AppliedPolicy(row, changed=True)

        return self._write(do)

    def get_policy(self, customer: str | None = None, version: int | None = None) -> PolicyView:
        with self.store.session() as s:
            cust = self._resolve_customer(s, customer)
            if version is None:
                if cust.active_policy_id is None:
                    raise NotFoundError("policy of customer", cust.name)
                row = s.get(PolicyVersion, cust.active_policy_id)
            else:
                row = s.scalar(
                    select(PolicyVersion).where(
                        PolicyVersion.customer == cust.name, PolicyVersion.version == version
                    )
                )
            if row is None:
                raise NotFoundError("policy version", f"{cust.name} v{version}")
            return PolicyView(row, active=row.id == cust.active_policy_id)

    # ---------------------------------------------------------------- models

    def deploy_model(self, customer: str, spec: Mapping[str, Any]) -> ModelView:
        """Create a model through the API. It must fit the customer's active policy."""
        model = _validate_model_spec(spec)

        def do(s: Session) -> ModelView:
            policy = self._policy_of(s, customer)
            row = _find_model(s, customer, model.name)
            if row is not None and row.deleted_at is None:
                raise AlreadyExistsError("model", f"{customer}/{model.name}")
            _check_fits(policy, model, _api_models(s, customer, exclude=model.name))
            now = self._clock()
            spec_json = model.model_dump(mode="json")
            if row is None:
                row = ModelRow(
                    customer=customer,
                    name=model.name,
                    spec=spec_json,
                    source="api",
                    created_at=now,
                    updated_at=now,
                )
                s.add(row)
            else:  # re-deploying a deleted model reuses its row (and its history)
                row.spec, row.source, row.deleted_at, row.updated_at = spec_json, "api", None, now
            s.flush()
            _sync_pools(s, policy, now)
            record_event(
                s,
                now,
                "model.deployed",
                f"model {model.name} deployed through the API "
                f"(replicas {model.min_replicas}..{model.max_replicas})",
                customer=customer,
                model=model.name,
            )
            return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))

        return self._write(do)

    def update_model(
        self, customer: str, spec: Mapping[str, Any], update_mask: Iterable[str] = ()
    ) -> ModelView:
        """Change an API-managed model: the fields named in ``update_mask`` (top-level spec
        fields), or the whole spec when the mask is empty."""
        mask = list(update_mask)
        name = spec.get("name") or ""
        if not name:
            raise InvalidArgumentError("spec.name", "required: names the model to update")
        for i, path in enumerate(mask):
            if path not in UPDATABLE_MODEL_FIELDS:
                raise InvalidArgumentError(
                    f"update_mask.paths[{i}]",
                    f"{path!r} is not an updatable model field "
                    f"(one of: {', '.join(sorted(UPDATABLE_MODEL_FIELDS))})",
                )

        def do(s: Session) -> ModelView:
            policy = self._policy_of(s, customer)
            row = self._live_model(s, customer, name)
            _require_api_managed(row, "update")
            if mask:
                merged = dict(row.spec)
                for path in mask:
                    if path in spec:
                        merged[path] = spec[path]
                    else:  # named but unset: back to the default
                        merged.pop(path, None)
            else:
                merged = dict(spec)
            model = _validate_model_spec(merged)
            _check_fits(policy, model, _api_models(s, customer, exclude=name))
            now = self._clock()
            new_spec = model.model_dump(mode="json")
            if new_spec == row.spec:
                return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))
            changed = sorted(k for k in new_spec if new_spec.get(k) != row.spec.get(k))
            row.spec, row.updated_at = new_spec, now
            s.flush()
            _sync_pools(s, policy, now)
            record_event(
                s,
                now,
                "model.updated",
                f"model {name} updated: {', '.join(changed)}",
                customer=customer,
                model=name,
            )
            return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))

        return self._write(do)

    def delete_model(self, customer: str, name: str) -> ModelView:
        """Mark an API-managed model deleted; the reconciler drains its replicas."""

        def do(s: Session) -> ModelView:
            row = self._live_model(s, customer, name)
            _require_api_managed(row, "delete")
            now = self._clock()
            row.deleted_at = row.updated_at = now
            s.flush()
            policy = self._policy_of(s, customer)
            _sync_pools(s, policy, now)
            record_event(
                s,
                now,
                "model.deleted",
                f"model {name} deleted through the API; its replicas will drain",
                customer=customer,
                model=name,
            )
            return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))

        return self._write(do)

    def get_model(self, customer: str, name: str) -> ModelView:
        _require("customer", customer)
        _require("name", name)
        with self.store.session() as s:
            row = _find_model(s, customer, name)
            if row is None:
                raise NotFoundError("model", f"{customer}/{name}")
            return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))

    def list_models(
        self, customer: str | None = None, *, include_deleted: bool = False
    ) -> list[ModelView]:
        with self.store.session() as s:
            q = select(ModelRow).order_by(ModelRow.customer, ModelRow.name)
            if customer:
                q = q.where(ModelRow.customer == customer)
            if not include_deleted:
                q = q.where(ModelRow.deleted_at.is_(None))
            rows = list(s.scalars(q))
            counts = _replica_counts(s, [r.id for r in rows])
            return [ModelView(r, counts.get(r.id, {})) for r in rows]

    # ---------------------------------------------------------------- on-call overrides

    def pin_model(self, customer: str, name: str, replicas: int | None) -> ModelView:
        """Pin a model's replica count (bypasses the autoscaler); ``None`` removes the pin."""
        if replicas is not None and replicas < 0:
            raise InvalidArgumentError("replicas", f"must be >= 0 (got {replicas})")

        def do(s: Session) -> ModelView:
            row = self._live_model(s, customer, name)
            if replicas is not None and replicas > row.spec.get("max_replicas", 0):
                raise InvalidArgumentError(
                    "replicas",
                    f"{replicas} is above the model's max_replicas "
                    f"({row.spec.get('max_replicas')}); raise max_replicas first",
                )
            if row.pinned_replicas == replicas:
                return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))
            now = self._clock()
            row.pinned_replicas, row.updated_at = replicas, now
            s.flush()
            msg = (
                f"model {name} pinned to {replicas} replicas"
                if replicas is not None
                else f"model {name} unpinned; the autoscaler decides again"
            )
            record_event(
                s,
                now,
                "model.pinned" if replicas is not None else "model.unpinned",
                msg,
                customer=customer,
                model=name,
                severity="warning",
            )
            return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))

        return self._write(do)

    def pause_model(self, customer: str, name: str, paused: bool) -> ModelView:
        """Pause (hold the current replica count) or resume the autoscaler for one model."""

        def do(s: Session) -> ModelView:
            row = self._live_model(s, customer, name)
            if row.paused != paused:
                now = self._clock()
                row.paused, row.updated_at = paused, now
                s.flush()
                verb = "paused" if paused else "resumed"
                record_event(
                    s,
                    now,
                    f"model.{verb}",
                    f"autoscaler {verb} for model {name}",
                    customer=customer,
                    model=name,
                    severity="warning" if paused else "info",
                )
            return ModelView(row, _replica_counts(s, [row.id]).get(row.id, {}))

        return self._write(do)

    def cordon_pool(self, pool_id: str, cordoned: bool, reason: str = "") -> PoolView:
        """Cordon (no new replicas are placed there) or uncordon one pool."""
        _require("pool_id", pool_id)

        def do(s: Session) -> PoolView:
            pool = s.get(Pool, pool_id)
            if pool is None:
                raise NotFoundError("pool", pool_id)
            if pool.cordoned != cordoned:
                now = self._clock()
                pool.cordoned = cordoned
                s.flush()
                verb = "cordoned" if cordoned else "uncordoned"
                record_event(
                    s,
                    now,
                    f"pool.{verb}",
                    f"pool {pool_id} {verb}" + (f": {reason}" if reason else ""),
                    customer=pool.customer,
                    severity="warning" if cordoned else "info",
                )
            return PoolView(pool, _pool_node_counts(s, [pool.id]).get(pool.id, {}))

        return self._write(do)

    def cordon_pools(
        self,
        *,
        customer: str = "",
        cloud: str = "",
        region: str = "",
        account: str = "",
        cordoned: bool,
        reason: str = "",
    ) -> CordonResult:
        """Cordon or uncordon every pool matching the selector (all set fields must match).

        Refuses an empty selector, so a slip never cordons every pool of every customer, and
        a selector that matches nothing (a typo must not look like success). Only placement
        reads ``cordoned``: replicas already in these pools keep running until drained.
        Pools a later policy adds are not covered: the cordon is a state of today's pools.
        """
        selector = {"customer": customer, "cloud": cloud, "region": region, "account": account}
        given = {k: v for k, v in selector.items() if v}
        if not given:
            raise InvalidArgumentError(
                "selector",
                "set at least one of customer, cloud, region or account "
                "(an empty selector would cordon every pool)",
            )
        if cloud and cloud not in {c.value for c in Cloud}:
            raise InvalidArgumentError(
                "selector.cloud",
                f"unknown cloud {cloud!r} (one of: {', '.join(c.value for c in Cloud)})",
            )
        described = " ".join(f"{k}={v}" for k, v in given.items())

        def do(s: Session) -> CordonResult:
            q = select(Pool).order_by(Pool.customer, Pool.id)
            for name, value in given.items():
                q = q.where(getattr(Pool, name) == value)
            pools = list(s.scalars(q))
            if not pools:
                raise NotFoundError("pool matching", described)
            now = self._clock()
            verb = "cordoned" if cordoned else "uncordoned"
            changed = [p for p in pools if p.cordoned != cordoned]
            for pool in changed:
                pool.cordoned = cordoned
                record_event(
                    s,
                    now,
                    f"pool.{verb}",
                    f"pool {pool.id} {verb} (selector {described})"
                    + (f": {reason}" if reason else ""),
                    customer=pool.customer,
                    severity="warning" if cordoned else "info",
                )
            s.flush()
            counts = _pool_node_counts(s, [p.id for p in changed])
            return CordonResult(
                [PoolView(p, counts.get(p.id, {})) for p in changed], matched=len(pools)
            )

        return self._write(do)

    def drain_node(self, node_id: str, reason: str = "") -> DrainResult:
        """Mark a node and the rest of its replica ``draining``: the reconciler terminates
        them at the cloud, and placement launches a replacement (the model's desired count
        is unchanged, and a draining replica no longer counts as live). A multi-node replica
        cannot serve with a member missing, so its whole gang drains. Idempotent: a node
        already draining, terminating or terminal is left alone and the result says so."""
        _require("node_id", node_id)

        def do(s: Session) -> DrainResult:
            node = s.get(Node, node_id)
            if node is None:
                raise NotFoundError("node", node_id)
            replica = node.replica
            model = s.get(ModelRow, replica.model_id)
            model_name = model.name if model is not None else ""
            state = NodeState(node.state)
            if state in (NodeState.DRAINING, NodeState.TERMINATING) or state.is_terminal:
                return DrainResult(
                    NodeView(node, model_name),
                    changed=False,
                    message=f"node {node_id} is already {state.value}; nothing to do",
                    drained=[],
                )
            now = self._clock()
            drained = []
            for member in sorted(replica.nodes, key=lambda n: n.id):
                member_state = NodeState(member.state)
                if member_state.is_terminal or member_state in (
                    NodeState.DRAINING,
                    NodeState.TERMINATING,
                ):
                    continue
                member.state, member.draining_at = NodeState.DRAINING.value, now
                drained.append(member.id)
            replica.state = NodeState.DRAINING.value
            s.flush()
            gang = (
                f" with {len(drained) - 1} other node(s) of its replica" if len(drained) > 1 else ""
            )
            message = (
                f"node {node_id}{gang} draining (replica {replica.id} of {model_name} in "
                f"{replica.pool_id}); placement replaces the replica"
            )
            record_event(
                s,
                now,
                "node.draining",
                message + (f": {reason}" if reason else ""),
                customer=node.customer,
                model=model_name or None,
                node=node_id,
                severity="warning",
            )
            return DrainResult(NodeView(node, model_name), True, message, drained)

        return self._write(do)

    # ---------------------------------------------------------------- decisions

    def list_decisions(
        self,
        customer: str | None = None,
        model: str | None = None,
        kind: str | None = None,
        *,
        since_id: int = 0,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[DecisionRecord]:
        """Recorded decisions, oldest first. With ``since_id`` or ``since``: the oldest
        ``limit`` after them (paging forward); otherwise the newest ``limit``."""
        if kind and kind not in DECISION_KINDS:
            raise InvalidArgumentError(
                "kind", f"unknown decision kind {kind!r} (one of: {', '.join(DECISION_KINDS)})"
            )
        limit = _page_limit(since_id, limit, MAX_DECISIONS_PER_PAGE)
        q = _matching(
            select(DecisionRecord),
            (DecisionRecord.customer, customer),
            (DecisionRecord.model, model),
            (DecisionRecord.kind, kind),
        )
        if since is not None:
            q = q.where(DecisionRecord.at >= since)
        with self.store.session() as s:
            return _page(s, q, DecisionRecord.id, since_id, limit, forward=since is not None)

    def replay_decision(self, decision_id: int) -> ReplayView:
        """Re-run the autoscaler on a recorded autoscale decision's inputs and prior state.
        Placement records and on-call overrides are not autoscaler outputs, and records
        without inputs cannot be rebuilt: both are FailedPreconditionError."""
        if decision_id <= 0:
            raise InvalidArgumentError("id", f"required: a decision id (got {decision_id})")
        with self.store.session() as s:
            record = s.get(DecisionRecord, decision_id)
            if record is None:
                raise NotFoundError("decision", str(decision_id))
        why_not = _not_replayable(record)
        if why_not:
            raise FailedPreconditionError(f"decision {decision_id} cannot be replayed: {why_not}")
        assert record.desired is not None  # _not_replayable checked
        recorded = Decision(record.desired, record.reason, record.detail)
        try:
            result = replay(self._autoscaler, recorded, dict(record.inputs))
        except ReplayError as exc:
            cause = exc.__cause__
            why = (
                f"its recorded inputs lack {cause.args[0]!r}"
                if isinstance(cause, KeyError)
                else f"its recorded inputs are malformed ({cause or exc})"
            )
            raise FailedPreconditionError(
                f"decision {decision_id} cannot be replayed: {why}"
            ) from exc
        made_by = record.inputs.get("decider")
        name = code = None
        if isinstance(made_by, dict):
            name = str(made_by["name"]) if made_by.get("name") else None
            code = str(made_by["code"]) if made_by.get("code") else None
        return ReplayView(record, self._autoscaler.name, result, decider_code(), name, code)

    # ---------------------------------------------------------------- fleet

    def list_nodes(
        self,
        customer: str | None = None,
        model: str | None = None,
        states: Iterable[str] = (),
        pool_id: str | None = None,
        *,
        include_terminal: bool = False,
    ) -> list[NodeView]:
        wanted = list(states)
        known = {s.value for s in NodeState}
        for i, st in enumerate(wanted):
            if st not in known:
                raise InvalidArgumentError(
                    f"states[{i}]", f"unknown node state {st!r} (one of: {', '.join(known)})"
                )
        with self.store.session() as s:
            q = (
                select(Node, ModelRow.name)
                .join(Replica, Node.replica_id == Replica.id, isouter=True)
                .join(ModelRow, Replica.model_id == ModelRow.id, isouter=True)
                .order_by(Node.customer, Node.pending_at, Node.id)
            )
            q = _matching(
                q, (Node.customer, customer), (ModelRow.name, model), (Node.pool_id, pool_id)
            )
            if wanted:
                q = q.where(Node.state.in_(wanted))
            elif not include_terminal:
                q = q.where(Node.state.not_in([st.value for st in TERMINAL_NODE_STATES]))
            return [NodeView(node, name or "") for node, name in s.execute(q)]

    def list_pools(
        self,
        customer: str | None = None,
        cloud: str | None = None,
        *,
        include_inactive: bool = False,
    ) -> list[PoolView]:
        with self.store.session() as s:
            q = select(Pool).order_by(Pool.customer, Pool.tier, Pool.price_usd_per_hour, Pool.id)
            q = _matching(q, (Pool.customer, customer), (Pool.cloud, cloud))
            if not include_inactive:
                q = q.where(Pool.active.is_(True))
            pools = list(s.scalars(q))
            counts = _pool_node_counts(s, [p.id for p in pools])
            return [PoolView(p, counts.get(p.id, {})) for p in pools]

    # ---------------------------------------------------------------- daemon status, events

    def record_tick(
        self, job: str, started_at: datetime, duration_s: float, error: str | None = None
    ) -> None:
        """Called by the daemon after every job tick; shown by ``gpucap status``."""
        with self._ticks_lock:
            tick = self._ticks.setdefault(job, JobTick(job))
            tick.last_started_at, tick.last_duration_s = started_at, duration_s
            tick.last_error = error or ""
            tick.runs += 1
            tick.failures += 1 if error else 0

    def status(self) -> StatusView:
        now = self._clock()
        with self.store.session() as s:
            customers = s.scalar(select(func.count()).select_from(Customer)) or 0
            models = (
                s.scalar(
                    select(func.count()).select_from(ModelRow).where(ModelRow.deleted_at.is_(None))
                )
                or 0
            )
            pools = (
                s.scalar(select(func.count()).select_from(Pool).where(Pool.active.is_(True))) or 0
            )
            nodes = {
                st: n for st, n in s.execute(select(Node.state, func.count()).group_by(Node.state))
            }
            last_event = s.scalar(select(func.max(Event.id))) or 0
        with self._ticks_lock:
            jobs = [JobTick(**vars(t)) for _, t in sorted(self._ticks.items())]
        return StatusView(
            version=_version(),
            started_at=self.started_at,
            uptime_s=max(0.0, (now - self.started_at).total_seconds()),
            customers=customers,
            models=models,
            pools=pools,
            nodes_by_state=nodes,
            jobs=jobs,
            last_event_id=last_event,
        )

    def last_event_id(self) -> int:
        with self.store.session() as s:
            return s.scalar(select(func.max(Event.id))) or 0

    def events(
        self,
        since_id: int = 0,
        limit: int = 100,
        *,
        customer: str | None = None,
        model: str | None = None,
    ) -> list[Event]:
        """Events with id > ``since_id``, oldest first, at most ``limit``. With
        ``since_id == 0`` the *newest* ``limit`` events (what ``tail`` shows)."""
        limit = _page_limit(since_id, limit, MAX_EVENTS_PER_PAGE)
        q = _matching(select(Event), (Event.customer, customer), (Event.model, model))
        with self.store.session() as s:
            return _page(s, q, Event.id, since_id, limit)

    # ---------------------------------------------------------------- helpers

    def _write(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn`` in a write transaction; retry when a daemon job updated the same row
        between our read and our write (optimistic version check, StaleDataError)."""
        for attempt in range(3):
            try:
                with self._write_lock, self.store.session() as s:
                    return fn(s)
            except StaleDataError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _resolve_customer(self, s: Session, customer: str | None) -> Customer:
        if customer:
            cust = s.get(Customer, customer)
            if cust is None:
                raise NotFoundError("customer", customer)
            return cust
        names = list(s.scalars(select(Customer.name).order_by(Customer.name)))
        if len(names) == 1:
            cust = s.get(Customer, names[0])
            assert cust is not None
            return cust
        if not names:
            raise NotFoundError("customer", "(none: no policy has been applied yet)")
        raise InvalidArgumentError(
            "customer", f"required when there are several customers ({', '.join(names)})"
        )

    def _policy_of(self, s: Session, customer: str) -> Policy:
        _require("customer", customer)
        cust = s.get(Customer, customer)
        if cust is None or cust.active_policy_id is None:
            raise NotFoundError("customer", customer)
        row = s.get(PolicyVersion, cust.active_policy_id)
        assert row is not None
        return parse_policy(row.raw_yaml, source=row.source or "<policy>").policy

    def _live_model(self, s: Session, customer: str, name: str) -> ModelRow:
        _require("customer", customer)
        _require("name", name)
        row = _find_model(s, customer, name)
        if row is None or row.deleted_at is not None:
            raise NotFoundError("model", f"{customer}/{name}")
        return row


# --------------------------------------------------------------------------------------
# Module helpers (all run inside the caller's transaction)


def _require(field_name: str, value: str | None) -> None:
    if not value:
        raise InvalidArgumentError(field_name, "required")


def _not_replayable(record: DecisionRecord) -> str:
    """Why a decision record cannot be replayed ("" when it can)."""
    if record.kind != "autoscale":
        return (
            f"it is a {record.kind} decision, not an autoscaler output "
            "(its detail lists the plan and its rejections)"
        )
    if record.reason in OVERRIDE_REASONS:
        return (
            f"it is an on-call override ({OVERRIDE_REASONS[record.reason]}), "
            "not an autoscaler output"
        )
    if record.desired is None:
        return "it records no desired replica count"
    if not record.inputs:
        return "it has no recorded inputs (decisions before inputs were recorded cannot be rebuilt)"
    return ""


def is_replayable(record: DecisionRecord) -> bool:
    return not _not_replayable(record)


def _find_model(s: Session, customer: str, name: str) -> ModelRow | None:
    return s.scalar(select(ModelRow).where(ModelRow.customer == customer, ModelRow.name == name))


def _api_models(s: Session, customer: str, exclude: str | None = None) -> list[ModelSpec]:
    rows = s.scalars(
        select(ModelRow).where(
            ModelRow.customer == customer,
            ModelRow.source == "api",
            ModelRow.deleted_at.is_(None),
        )
    )
    return [ModelSpec.model_validate(r.spec) for r in rows if r.name != exclude]


def _require_api_managed(row: ModelRow, verb: str) -> None:
    if row.source != "api":
        raise FailedPreconditionError(
            f"model {row.customer}/{row.name} is managed by the customer's policy file; "
            f"{verb} it there and run `gpucap policy apply`"
        )


def _validate_model_spec(spec: Mapping[str, Any]) -> ModelSpec:
    try:
        return ModelSpec.model_validate(dict(spec))
    except ValidationError as exc:
        raise InvalidArgumentError.from_problems(
            problems_from_validation_error(exc), prefix="spec."
        ) from exc


def _check_fits(policy: Policy, model: ModelSpec, api_models: list[ModelSpec]) -> None:
    """The model must be acceptable inside the customer's policy: the same checks a policy
    file gets (clouds and regions the accounts allow, bounds, shapes), plus at least one
    pool that offers one of its shapes."""
    others = [m for m in policy.models if m.name != model.name]
    if len(others) != len(policy.models):
        raise AlreadyExistsError(
            "model (managed by the policy file)", f"{policy.customer}/{model.name}"
        )
    candidate = policy.model_copy(update={"models": [*others, *api_models, model]})
    index = len(candidate.models) - 1
    mine = [
        Problem(p.path[2:], p.reason)
        for p in semantic_problems(candidate)
        if p.path[:2] == ("models", index)
    ]
    if mine:
        raise InvalidArgumentError.from_problems(mine, prefix="spec.")
    alone = policy.model_copy(update={"models": [model]})
    allowed_clouds = set(model.clouds) or {a.cloud for a in policy.accounts}
    usable = [
        p
        for p in pools_for_policy(alone)
        if p.cloud in allowed_clouds
        and (not model.regions or p.region in model.regions)
        and (p.owner != Owner.SHARED or _may_overflow(policy, model.name))
    ]
    if not usable:
        shapes = ", ".join(o.shape for o in model.shapes)
        raise InvalidArgumentError(
            "spec.shapes",
            f"no account of customer {policy.customer} offers {shapes} in the model's allowed "
            "clouds and regions",
        )


def _warn_unfit_api_models(s: Session, policy: Policy, now: datetime) -> None:
    """A new policy may no longer allow what an API-deployed model asks for (e.g. its cloud's
    account was removed). The policy still wins: pools only ever come from the policy's
    accounts, so such a model cannot be placed outside it; on-call gets a warning event."""
    api_models = _api_models(s, policy.customer)
    for i, model in enumerate(api_models):
        try:
            _check_fits(policy, model, api_models[:i] + api_models[i + 1 :])
        except (InvalidArgumentError, AlreadyExistsError) as exc:
            record_event(
                s,
                now,
                "model.unfit",
                f"API-deployed model {model.name} does not fit the new policy: {exc}",
                customer=policy.customer,
                model=model.name,
                severity="warning",
            )


def _may_overflow(policy: Policy, model: str) -> bool:
    o = policy.overflow
    return o.enabled and (not o.models or model in o.models)


def _sync_accounts(
    s: Session,
    policy: Policy,
    previously_allowed: set[str],
    external_ids: ExternalIdGenerator | None,
    now: datetime,
) -> None:
    """Upsert the policy's accounts. An account the policy drops is *kept* (with its last
    credentials reference): nodes may still run there, and the reconciler needs it to drain
    and terminate them and the garbage collector to find orphans. Placement never reads
    accounts, only active pools, so a kept account gets no new replicas."""
    existing = {
        a.name: a for a in s.scalars(select(Account).where(Account.customer == policy.customer))
    }
    for acct in policy.accounts:
        row = existing.pop(acct.name, None)
        if row is None:
            row = Account(customer=policy.customer, name=acct.name)
            s.add(row)
        row.cloud, row.owner = acct.cloud.value, acct.owner.value
        row.regions = {"regions": list(acct.regions)}
        row.credentials_ref = acct.credentials.model_dump(mode="json", exclude_none=True)
        if external_ids is not None and acct.cloud == "aws" and acct.owner == Owner.CUSTOMER:
            # A copy for display (`gpucap account ...`); the generator is the authority and
            # never takes the id from the customer's file (providers/credentials.py).
            row.external_id = external_ids.for_customer(policy.customer)
    for row in existing.values():
        if row.name not in previously_allowed:
            continue  # dropped by an earlier version; already announced
        record_event(
            s,
            now,
            "account.removed",
            f"account {row.name} ({row.cloud}) is no longer in the policy of "
            f"{policy.customer}: no new replicas there; its nodes drain",
            customer=policy.customer,
            severity="warning",
        )


def _account_names(version: PolicyVersion | None) -> set[str]:
    """Account names of a stored policy version (empty when none, or when it no longer
    parses under today's rules: then nothing is announced as removed)."""
    if version is None:
        return set()
    try:
        return {a.name for a in parse_policy(version.raw_yaml).policy.accounts}
    except PolicyError:
        return set()


def _sync_policy_models(s: Session, policy: Policy, now: datetime) -> None:
    rows = {
        r.name: r for r in s.scalars(select(ModelRow).where(ModelRow.customer == policy.customer))
    }
    for m in policy.models:
        spec = m.model_dump(mode="json")
        row = rows.pop(m.name, None)
        if row is None:
            s.add(
                ModelRow(
                    customer=policy.customer,
                    name=m.name,
                    spec=spec,
                    source="policy",
                    created_at=now,
                    updated_at=now,
                )
            )
            record_event(
                s,
                now,
                "model.deployed",
                f"model {m.name} deployed by the policy",
                customer=policy.customer,
                model=m.name,
            )
        elif row.spec != spec or row.source != "policy" or row.deleted_at is not None:
            was = "deleted" if row.deleted_at is not None else row.source
            row.spec, row.source, row.deleted_at, row.updated_at = spec, "policy", None, now
            record_event(
                s,
                now,
                "model.updated",
                f"model {m.name} updated by the policy (was {was})",
                customer=policy.customer,
                model=m.name,
            )
    for row in rows.values():
        if row.source == "policy" and row.deleted_at is None:
            row.deleted_at = row.updated_at = now
            record_event(
                s,
                now,
                "model.deleted",
                f"model {row.name} removed from the policy; its replicas will drain",
                customer=policy.customer,
                model=row.name,
            )
    s.flush()


def _sync_pools(s: Session, policy: Policy, now: datetime) -> None:
    """Pools follow the policy's accounts and the shapes of every live model (policy- and
    API-managed). Pools no longer allowed are deactivated, never deleted: nodes may still
    run there and refer to them."""
    models = [*policy.models, *_api_models(s, policy.customer)]
    specs = {p.id: p for p in pools_for_policy(policy.model_copy(update={"models": models}))}
    rows = {p.id: p for p in s.scalars(select(Pool).where(Pool.customer == policy.customer))}
    added, removed = [], []
    for pid, spec in specs.items():
        row = rows.get(pid)
        if row is None:
            row = Pool(id=pid, customer=spec.customer)
            s.add(row)
            added.append(pid)
        elif not row.active:
            added.append(pid)
        row.account, row.cloud, row.owner = spec.account, spec.cloud.value, spec.owner.value
        row.region, row.instance_type, row.gpu_shape = (
            spec.region,
            spec.instance_type,
            spec.gpu_shape,
        )
        row.tier, row.committed, row.reservation = spec.tier.value, spec.committed, spec.reservation
        row.price_usd_per_hour, row.active = spec.price_usd_per_hour, True
    for pid, row in rows.items():
        if pid not in specs and row.active:
            row.active = False
            removed.append(pid)
    if added or removed:
        parts = [
            f"{len(added)} added" if added else "",
            f"{len(removed)} deactivated" if removed else "",
        ]
        record_event(
            s,
            now,
            "pools.changed",
            f"pools of {policy.customer}: "
            + ", ".join(p for p in parts if p)
            + (f" (deactivated: {', '.join(removed)})" if removed else ""),
            customer=policy.customer,
        )
    s.flush()


def _replica_counts(s: Session, model_ids: list[int]) -> dict[int, dict[str, int]]:
    """Non-terminal replicas per model, by state."""
    return _live_counts(s, Replica.model_id, Replica.state, model_ids)


def _pool_node_counts(s: Session, pool_ids: list[str]) -> dict[str, dict[str, int]]:
    """Non-terminal nodes per pool, by state."""
    return _live_counts(s, Node.pool_id, Node.state, pool_ids)


def _live_counts(
    s: Session, key: InstrumentedAttribute[K], state: InstrumentedAttribute[str], ids: list[K]
) -> dict[K, dict[str, int]]:
    out: dict[K, dict[str, int]] = {}
    if not ids:
        return out
    terminal = [st.value for st in TERMINAL_NODE_STATES]
    q = (
        select(key, state, func.count())
        .where(key.in_(ids), state.not_in(terminal))
        .group_by(key, state)
    )
    for k, st, n in s.execute(q):
        out.setdefault(k, {})[st] = n
    return out


def _page_limit(since_id: int, limit: int, most: int) -> int:
    if since_id < 0:
        raise InvalidArgumentError("since_id", f"must be >= 0 (got {since_id})")
    if limit < 0:
        raise InvalidArgumentError("limit", f"must be >= 0 (got {limit})")
    return min(limit or 100, most)


def _matching(q: Q, *filters: tuple[InstrumentedAttribute[Any], str | None]) -> Q:
    """``q`` narrowed to rows whose column equals each filter's value; an unset (None or
    empty) filter matches everything."""
    for column, value in filters:
        if value:
            q = q.where(column == value)
    return q


def _page(
    s: Session,
    q: Select[R],
    id_col: InstrumentedAttribute[int],
    since_id: int,
    limit: int,
    *,
    forward: bool = False,
) -> list[R]:
    """Rows oldest first: after ``since_id`` (or when ``forward``), the oldest ``limit``
    (paging forward); otherwise the newest ``limit`` (what ``tail`` shows)."""
    if since_id:
        q = q.where(id_col > since_id)
    if since_id or forward:
        return list(s.scalars(q.order_by(id_col).limit(limit)))
    return list(s.scalars(q.order_by(id_col.desc()).limit(limit)))[::-1]
