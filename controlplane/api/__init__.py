"""The application layer: every change an operator or deployment tool makes goes through here.

The gRPC server, the CLI's offline paths and the tests call :class:`ControlPlaneService`;
it composes one small part per concern (policies, models, on-call, decisions, reads,
status), each given the store and clock explicitly. The API owns validation (typed errors
that name the field), the write transactions on the store, and the event log. It writes
*spec* only (policies, accounts, pools' policy-derived fields, model specs and on-call
overrides); status (replicas, nodes, decisions, job ticks) belongs to the daemon and is
only read here. The one exception is an on-call drain, which marks a node and its replica
``draining``: that is an intent, like the placement's own drains, and the reconciler carries
it out (terminates at the cloud) and placement replaces the replica. The API also keeps
the revisions ``WatchEndpoints`` gives each model's endpoints (``api.endpoints``): its own
bookkeeping, which no other writer touches.

Errors: :class:`schema.policy_file.PolicyError` for a bad policy file (every problem with
line and field path), :class:`InvalidArgumentError` (field + reason), :class:`NotFoundError`,
:class:`AlreadyExistsError`, :class:`FailedPreconditionError`. A failed call changes nothing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from autoscaler import Autoscaler, GpucapAutoscaler
from coldstart import ColdStartModel
from controlplane.api.audit import Audit
from controlplane.api.decisions import Decisions, is_replayable
from controlplane.api.endpoints import Endpoint, Endpoints, EndpointsSnapshot
from controlplane.api.errors import (
    MAX_NAME_CHARS,
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ServiceError,
    UnauthenticatedError,
)
from controlplane.api.explain import Explain
from controlplane.api.images import Images
from controlplane.api.models import Models
from controlplane.api.node_phases import NodePhases, PhaseReport
from controlplane.api.oncall import OnCall
from controlplane.api.policies import Policies
from controlplane.api.reads import Reads
from controlplane.api.staging import Staging
from controlplane.api.status import Status
from controlplane.api.tx import Tx
from controlplane.api.usage import Usage
from controlplane.api.views import (
    AppliedPolicy,
    CordonResult,
    DrainResult,
    ModelView,
    NodeView,
    PolicyView,
    PoolView,
    ReplayView,
    StatusView,
)
from controlplane.api.warm import WarmPools
from controlplane.jobticks import JobTicks
from controlplane.leadership import LeaseView
from controlplane.loop.context import ProviderResolver
from controlplane.store.db import Store
from providers.credentials import ExternalIdGenerator
from schema.policy import echo

__all__ = [
    "AlreadyExistsError",
    "AppliedPolicy",
    "ControlPlaneService",
    "CordonResult",
    "DrainResult",
    "Endpoint",
    "EndpointsSnapshot",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "ModelView",
    "NodeView",
    "NotFoundError",
    "PermissionDeniedError",
    "PhaseReport",
    "PolicyView",
    "PoolView",
    "ReplayView",
    "ServiceError",
    "StatusView",
    "UnauthenticatedError",
    "is_replayable",
]


P = ParamSpec("P")
R = TypeVar("R")


def _utcnow() -> datetime:
    return datetime.now(UTC)


# The longest a request's text argument may be, by parameter name: what the store's column
# holds (controlplane/store/models.py: applied_by String(255), source String(1024)), a
# policy's text unbounded here (gRPC's 4 MB message bound holds it), and any other name,
# id or filter :data:`~controlplane.api.errors.MAX_NAME_CHARS`.
TEXT_LIMITS: dict[str, int | None] = {
    "text": None,
    "applied_by": 255,
    "source": 1024,
    "reason": 1024,
}


def check_text_args(sig: inspect.Signature, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    """INVALID_ARGUMENT, naming the parameter, for a text argument (or a list of them) with
    a NUL character (PostgreSQL cannot store one, so it failed as INTERNAL there) or longer
    than its :data:`TEXT_LIMITS`."""
    for name, value in sig.bind_partial(*args, **kw).arguments.items():
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if not isinstance(item, str):
                continue
            if "\x00" in item:
                raise InvalidArgumentError(name, "contains a NUL character")
            most = TEXT_LIMITS.get(name, MAX_NAME_CHARS)
            if most is not None and len(item) > most:
                raise InvalidArgumentError(
                    name, f"longer than {most} characters (got {echo(item)})"
                )


class _Part(Generic[P, R]):
    """A service method that is one of its parts' methods: ``_Part("_oncall", OnCall.pin)``
    keeps the part's signature (one definition) and, being a class attribute, still lets a
    subclass override it. Every call's text arguments are checked first
    (:func:`check_text_args`): one guard for every RPC, whatever the part checks itself."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self._part, self._name = part, method.__name__
        sig = inspect.signature(method)
        self._sig = sig.replace(parameters=list(sig.parameters.values())[1:])  # (no self)

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: object, owner: type) -> Callable[P, R]: ...
    def __get__(self, obj: object, owner: type) -> Self | Callable[P, R]:
        if obj is None:
            return self
        method: Callable[P, R] = getattr(getattr(obj, self._part), self._name)
        sig = self._sig

        @functools.wraps(method)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            check_text_args(sig, args, kwargs)
            return method(*args, **kwargs)

        return checked


class ControlPlaneService:
    """The one object the gRPC server calls; each method is a part's. Thread-safe: writes
    are serialised by the one lock of the parts' shared :class:`Tx`."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime] = _utcnow,
        external_ids: ExternalIdGenerator | None = None,
        autoscaler: Autoscaler | None = None,
        job_ticks: JobTicks | None = None,
        coldstart: ColdStartModel | None = None,
        cold_start_scale: float = 1.0,
        providers: ProviderResolver | None = None,
        lease: Callable[[], LeaseView | None] | None = None,
    ) -> None:
        self.store = store
        tx = Tx(store, clock)
        self._policies = Policies(tx, external_ids)
        self._models = Models(tx)
        self._oncall = OnCall(tx)
        self._node_phases = NodePhases(tx)
        # Replays must run the decider the daemon's loop runs; the daemon passes its own.
        self._decisions = Decisions(store, autoscaler or GpucapAutoscaler())
        self._reads = Reads(store)
        self._endpoints = Endpoints(store)
        self._staging = Staging(store)
        self._images = Images(store, clock)
        self._warm = WarmPools(store)
        # Explains with the loop's cold-start model and scale (the daemon passes its own).
        self._explain = Explain(store, clock, coldstart or ColdStartModel(), cold_start_scale)
        # `gpucap status` shows this daemon's part in leadership (the daemon passes its view).
        self._status = Status(store, clock, job_ticks, lease)
        # The audit lists the clouds through the loop's own resolver (None: no cloud access).
        self._audit = Audit(store, clock, providers)
        self._usage = Usage(store, clock)
        self.started_at = self._status.started_at

    validate_policy = _Part("_policies", Policies.validate)
    apply_policy = _Part("_policies", Policies.apply)
    apply_policy_result = _Part("_policies", Policies.apply_result)
    diff_policy = _Part("_policies", Policies.diff)
    get_policy = _Part("_policies", Policies.get)

    deploy_model = _Part("_models", Models.deploy)
    update_model = _Part("_models", Models.update)
    delete_model = _Part("_models", Models.delete)

    pin_model = _Part("_oncall", OnCall.pin)
    pause_model = _Part("_oncall", OnCall.pause)
    cordon_pool = _Part("_oncall", OnCall.cordon_pool)
    cordon_pools = _Part("_oncall", OnCall.cordon_pools)
    drain_node = _Part("_oncall", OnCall.drain_node)

    report_node_phase = _Part("_node_phases", NodePhases.report)

    list_decisions = _Part("_decisions", Decisions.list)
    replay_decision = _Part("_decisions", Decisions.replay)

    get_model = _Part("_reads", Reads.get_model)
    list_models = _Part("_reads", Reads.list_models)
    list_nodes = _Part("_reads", Reads.list_nodes)
    list_pools = _Part("_reads", Reads.list_pools)
    explain_model = _Part("_explain", Explain.explain)
    list_endpoints = _Part("_endpoints", Endpoints.ready)
    scrape_targets = _Part("_endpoints", Endpoints.scrape_targets)
    endpoints_snapshot = _Part("_endpoints", Endpoints.snapshot)
    prometheus_sd = _Part("_endpoints", Endpoints.prometheus_sd)
    list_staging = _Part("_staging", Staging.list)
    list_images = _Part("_images", Images.list)
    list_warm_pools = _Part("_warm", WarmPools.list)
    audit = _Part("_audit", Audit.run)
    usage = _Part("_usage", Usage.get)
    # One page of a list (AIP-158 keyset pages: what the List RPCs serve).
    models_page = _Part("_reads", Reads.models_page)
    model_items_page = _Part("_reads", Reads.model_items_page)  # (ListModels' own)
    nodes_page = _Part("_reads", Reads.nodes_page)
    pools_page = _Part("_reads", Reads.pools_page)
    endpoints_page = _Part("_endpoints", Endpoints.page)
    staging_page = _Part("_staging", Staging.page)
    images_page = _Part("_images", Images.page)
    warm_pools_page = _Part("_warm", WarmPools.page)
    decisions_page = _Part("_decisions", Decisions.page)
    events_page = _Part("_status", Status.events_page)

    status = _Part("_status", Status.status)
    last_event_id = _Part("_status", Status.last_event_id)
    events = _Part("_status", Status.events)
