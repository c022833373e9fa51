"""The gRPC server: ``gpucap.v1.ControlPlane`` over :class:`ControlPlaneService`, plus the
standard health and reflection services.

Safety rules enforced here, not left to configuration:
- it listens on a loopback address unless *both* TLS and authentication are configured
  (an API that can deploy GPUs must never be open on a network by accident);
- with authentication on, every call (health and reflection included) must carry a
  credential (a bearer token or a client certificate) or gets UNAUTHENTICATED, and is
  authorized by its rule in ``controlplane.authz`` (``controlplane.grpc.auth``);
- the caller's mistakes map to INVALID_ARGUMENT (naming each field), NOT_FOUND,
  ALREADY_EXISTS or FAILED_PRECONDITION; only a bug reaches INTERNAL, with the traceback
  logged and not sent to the caller.
"""

from __future__ import annotations

import functools
import ipaddress
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any, TypeVar

import grpc
import structlog
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpc_status import rpc_status

from controlplane.api import (
    AlreadyExistsError,
    ControlPlaneService,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    PhaseReport,
    UnauthenticatedError,
)
from controlplane.api.warm import WarmPoolsView
from controlplane.api_tokens import CACHE_S as TOKEN_CACHE_S
from controlplane.api_tokens import TokenAuthenticator
from controlplane.authz import CertRoles
from controlplane.grpc import convert
from controlplane.grpc.auth import Authenticator, AuthInterceptor, current_caller
from controlplane.grpc.client import DEFAULT_ADDR
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.gen.gpucap.v1 import control_plane_pb2_grpc as pb_grpc
from schema.policy_file import PolicyError, PolicyRefused

log = structlog.get_logger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["ControlPlane"].full_name
# How often an idle stream (StreamEvents, WatchEndpoints) looks at the store again (the
# default of serve's stream_poll_s). Half a second keeps `gpucap events --follow` and
# routers live without measurable load (a query or two per open stream per tick).
STREAM_POLL_S = 0.5
STREAM_BATCH = 500
APPLIED_BY_CHARS = 255  # (the store's column)

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Msg = TypeVar("Msg")


class InsecureBindError(ValueError):
    """Refused to listen on a non-loopback address without TLS and a token."""


def is_loopback(addr: str) -> bool:
    """``host:port`` (IPv6 in brackets) names a loopback interface."""
    host = addr.rsplit(":", 1)[0] if ":" in addr else addr
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: could resolve to anything, so not loopback


def check_bind_allowed(addr: str, *, tls: bool, token: bool) -> None:
    if is_loopback(addr) or (tls and token):
        return
    missing = " and ".join(
        name for name, ok in (("TLS (certificate + key)", tls), ("an API token", token)) if not ok
    )
    raise InsecureBindError(
        f"refusing to listen on non-loopback address {addr!r} without {missing}: "
        "configure both, or listen on 127.0.0.1"
    )


# --------------------------------------------------------------------------- error mapping


def _status_for(exc: Exception) -> status_pb2.Status | None:
    """The google.rpc.Status a caller's mistake maps to; None for anything else (a bug)."""

    def packed(*details: Any) -> list[any_pb2.Any]:
        out = []
        for d in details:
            a = any_pb2.Any()
            a.Pack(d)
            out.append(a)
        return out

    if isinstance(exc, PolicyError):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=p.field, description=p.reason)
                for p in exc.problems
            ]
        )
        problems = pb.PolicyProblems(problems=[convert.problem(p) for p in exc.problems])
        n = len(exc.problems)
        return status_pb2.Status(
            # (a refused one is well-formed: what is active does not allow it)
            code=(
                code_pb2.FAILED_PRECONDITION
                if isinstance(exc, PolicyRefused)
                else code_pb2.INVALID_ARGUMENT
            ),
            message=f"policy rejected ({n} problem{'s' if n != 1 else ''}):\n{exc}",
            details=packed(bad, problems),
        )
    if isinstance(exc, InvalidArgumentError):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=f, description=r)
                for f, r in exc.violations
            ]
        )
        return status_pb2.Status(
            code=code_pb2.INVALID_ARGUMENT, message=str(exc), details=packed(bad)
        )
    for kind, code in (
        (NotFoundError, code_pb2.NOT_FOUND),
        (AlreadyExistsError, code_pb2.ALREADY_EXISTS),
        (FailedPreconditionError, code_pb2.FAILED_PRECONDITION),
        (UnauthenticatedError, code_pb2.UNAUTHENTICATED),
        (PermissionDeniedError, code_pb2.PERMISSION_DENIED),
    ):
        if isinstance(exc, kind):
            return status_pb2.Status(code=code, message=str(exc))
    return None


def _abort(context: grpc.ServicerContext, exc: Exception, method: str) -> None:
    status = _status_for(exc)
    if status is None:
        log.exception("grpc.internal_error", method=method)
        context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}; see daemon log")
    else:
        context.abort_with_status(rpc_status.to_status(status))


def _unary(
    fn: Callable[[ControlPlaneServicer, Req, grpc.ServicerContext], Resp],
) -> Callable[[ControlPlaneServicer, Req, grpc.ServicerContext], Resp]:
    @functools.wraps(fn)
    def wrapper(self: ControlPlaneServicer, request: Req, context: grpc.ServicerContext) -> Resp:
        try:
            return fn(self, request, context)
        except Exception as exc:  # mapped to a status; bugs are logged
            _abort(context, exc, fn.__name__)
            raise  # unreachable: abort raises

    return wrapper


# --------------------------------------------------------------------------- the service


class ControlPlaneServicer(pb_grpc.ControlPlaneServicer):
    def __init__(
        self,
        service: ControlPlaneService,
        stopping: threading.Event,
        max_streams: int,
        poll_s: float = STREAM_POLL_S,
    ) -> None:
        self.svc = service
        self._models = convert.ModelMessages()
        self._stopping = stopping
        self._poll_s = poll_s
        # Each open stream holds a worker thread for its lifetime; capping them keeps
        # threads free for unary calls however many `events --follow` are open.
        self._stream_slots = threading.BoundedSemaphore(max_streams)

    @_unary
    def ValidatePolicy(
        self, request: pb.ValidatePolicyRequest, context: grpc.ServicerContext
    ) -> pb.ValidatePolicyResponse:
        try:
            loaded = self.svc.validate_policy(request.yaml, request.source)
        except PolicyError as exc:
            return pb.ValidatePolicyResponse(
                valid=False, problems=[convert.problem(p) for p in exc.problems]
            )
        return pb.ValidatePolicyResponse(
            valid=True, customer=loaded.policy.customer, sha256=loaded.sha256
        )

    @_unary
    def ApplyPolicy(
        self, request: pb.ApplyPolicyRequest, context: grpc.ServicerContext
    ) -> pb.ApplyPolicyResponse:
        if request.dry_run:
            diff, refusals = self.svc.diff_policy(
                request.yaml, request.source, allow_deletes=request.allow_deletes
            )
            return pb.ApplyPolicyResponse(
                diff=convert.policy_diff(diff), refusals=[convert.problem(p) for p in refusals]
            )
        applied_by = request.applied_by or f"unknown ({context.peer()})"
        caller = current_caller()
        if caller is not None:  # (who the credential says, beside what the caller wrote)
            suffix = f" [{caller}]"
            applied_by = applied_by[: APPLIED_BY_CHARS - len(suffix)] + suffix
        result = self.svc.apply_policy_result(
            request.yaml, request.source, applied_by, allow_deletes=request.allow_deletes
        )
        log.info(
            "policy.apply",
            customer=result.version.customer,
            version=result.version.version,
            changed=result.changed,
            applied_by=applied_by,
        )
        return pb.ApplyPolicyResponse(
            policy=convert.policy_version(result.version, active=True),
            changed=result.changed,
            diff=convert.policy_diff(result.diff),
        )

    @_unary
    def GetPolicy(
        self, request: pb.GetPolicyRequest, context: grpc.ServicerContext
    ) -> pb.PolicyVersion:
        version = request.version if request.HasField("version") else None
        return convert.policy_view(self.svc.get_policy(request.customer or None, version))

    @_unary
    def DeployModel(
        self, request: pb.DeployModelRequest, context: grpc.ServicerContext
    ) -> pb.Model:
        return convert.model(
            self.svc.deploy_model(request.customer, convert.spec_from_pb(request.spec))
        )

    @_unary
    def UpdateModel(
        self, request: pb.UpdateModelRequest, context: grpc.ServicerContext
    ) -> pb.Model:
        return convert.model(
            self.svc.update_model(
                request.customer,
                convert.spec_from_pb(request.spec),
                list(request.update_mask.paths),
            )
        )

    @_unary
    def DeleteModel(
        self, request: pb.DeleteModelRequest, context: grpc.ServicerContext
    ) -> pb.Model:
        return convert.model(self.svc.delete_model(request.customer, request.name))

    @_unary
    def GetModel(self, request: pb.GetModelRequest, context: grpc.ServicerContext) -> pb.Model:
        return convert.model(self.svc.get_model(request.customer, request.name))

    @_unary
    def ListModels(
        self, request: pb.ListModelsRequest, context: grpc.ServicerContext
    ) -> pb.ListModelsResponse:
        page = self.svc.model_items_page(
            request.customer or None,
            include_deleted=request.include_deleted,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return self._models.response(page.items, page.next_page_token)

    @_unary
    def PinModel(self, request: pb.PinModelRequest, context: grpc.ServicerContext) -> pb.Model:
        replicas = request.replicas if request.HasField("replicas") else None
        return convert.model(
            self.svc.pin_model(request.customer, request.name, replicas, request.reason)
        )

    @_unary
    def PauseModel(self, request: pb.PauseModelRequest, context: grpc.ServicerContext) -> pb.Model:
        return convert.model(
            self.svc.pause_model(request.customer, request.name, request.paused, request.reason)
        )

    @_unary
    def CordonPool(self, request: pb.CordonPoolRequest, context: grpc.ServicerContext) -> pb.Pool:
        return convert.pool(self.svc.cordon_pool(request.pool_id, request.cordoned, request.reason))

    @_unary
    def CordonPools(
        self, request: pb.CordonPoolsRequest, context: grpc.ServicerContext
    ) -> pb.CordonPoolsResponse:
        sel = request.selector
        result = self.svc.cordon_pools(
            customer=sel.customer,
            cloud=sel.cloud,
            region=sel.region,
            account=sel.account,
            cordoned=request.cordoned,
            reason=request.reason,
        )
        log.info(
            "pools.cordon",
            cordoned=request.cordoned,
            selector={f.name: v for f, v in sel.ListFields()},
            changed=len(result.changed),
            matched=result.matched,
            peer=context.peer(),
            caller=str(current_caller() or ""),
        )
        return pb.CordonPoolsResponse(
            changed=[convert.pool(v) for v in result.changed], matched=result.matched
        )

    @_unary
    def ListEndpoints(
        self, request: pb.ListEndpointsRequest, context: grpc.ServicerContext
    ) -> pb.ListEndpointsResponse:
        page = self.svc.endpoints_page(
            request.customer or None,
            request.model or None,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return pb.ListEndpointsResponse(
            endpoints=[convert.endpoint(e) for e in page.items],
            next_page_token=page.next_page_token,
        )

    def WatchEndpoints(
        self, request: pb.WatchEndpointsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.EndpointsSnapshot]:
        return self._capped(
            context, "WatchEndpoints", "ListEndpoints", self._watch_endpoints(request, context)
        )

    def _watch_endpoints(
        self, request: pb.WatchEndpointsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.EndpointsSnapshot]:
        since = request.since_revision
        if since < 0:
            raise InvalidArgumentError("since_revision", f"must be >= 0 (got {since})")
        sent: int | None = since or None  # None: send the current state whatever it is
        previous = None  # (the client's set at `since` is not known here: no added/removed)
        while context.is_active() and not self._stopping.is_set():
            snap = self.svc.endpoints_snapshot(request.customer or None, request.model or None)
            if snap.revision != sent:
                yield convert.endpoints_snapshot(snap, previous)
                sent, previous = snap.revision, snap.endpoints
            self._stopping.wait(self._poll_s)

    @_unary
    def ReportNodePhase(
        self, request: pb.ReportNodePhaseRequest, context: grpc.ServicerContext
    ) -> pb.ReportNodePhaseResponse:
        recorded = self.svc.report_node_phase(
            PhaseReport(request.node_id, request.phase, request.at, request.token, request.detail)
        )
        return pb.ReportNodePhaseResponse(recorded=recorded)

    @_unary
    def DrainNode(
        self, request: pb.DrainNodeRequest, context: grpc.ServicerContext
    ) -> pb.DrainNodeResponse:
        result = self.svc.drain_node(request.node_id, request.reason, request.immediate)
        log.info(
            "node.drain",
            node=request.node_id,
            immediate=request.immediate,
            changed=result.changed,
            drained=result.drained,
            peer=context.peer(),
            caller=str(current_caller() or ""),
        )
        return pb.DrainNodeResponse(
            node=convert.node(result.node),
            changed=result.changed,
            message=result.message,
            drained=result.drained,
        )

    @_unary
    def ListDecisions(
        self, request: pb.ListDecisionsRequest, context: grpc.ServicerContext
    ) -> pb.ListDecisionsResponse:
        since = convert.datetime_arg("since", request.since) if request.HasField("since") else None
        if request.page_size or request.page_token:  # AIP-158 paging through the log
            page = self.svc.decisions_page(
                request.customer or None,
                request.model or None,
                request.kind or None,
                since_id=request.since_id,
                since=since,
                page_size=request.page_size,
                page_token=request.page_token,
            )
            return pb.ListDecisionsResponse(
                decisions=[
                    convert.decision(r, include_inputs=request.include_inputs) for r in page.items
                ],
                next_page_token=page.next_page_token,
            )
        rows = self.svc.list_decisions(
            request.customer or None,
            request.model or None,
            request.kind or None,
            since_id=request.since_id,
            since=since,
            limit=request.limit,
        )
        return pb.ListDecisionsResponse(
            decisions=[convert.decision(r, include_inputs=request.include_inputs) for r in rows]
        )

    @_unary
    def ReplayDecision(
        self, request: pb.ReplayDecisionRequest, context: grpc.ServicerContext
    ) -> pb.ReplayDecisionResponse:
        return convert.replay(self.svc.replay_decision(request.id))

    @_unary
    def ListNodes(
        self, request: pb.ListNodesRequest, context: grpc.ServicerContext
    ) -> pb.ListNodesResponse:
        page = self.svc.nodes_page(
            request.customer or None,
            request.model or None,
            list(request.states),
            request.pool_id or None,
            include_terminal=request.include_terminal,
            page_size=request.page_size,
            page_token=request.page_token,
            node_id=request.node_id or None,
        )
        return pb.ListNodesResponse(
            nodes=[convert.node(v) for v in page.items], next_page_token=page.next_page_token
        )

    @_unary
    def ListPools(
        self, request: pb.ListPoolsRequest, context: grpc.ServicerContext
    ) -> pb.ListPoolsResponse:
        page = self.svc.pools_page(
            request.customer or None,
            request.cloud or None,
            include_inactive=request.include_inactive,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return pb.ListPoolsResponse(
            pools=[convert.pool(v) for v in page.items], next_page_token=page.next_page_token
        )

    @_unary
    def ExplainModel(
        self, request: pb.ExplainModelRequest, context: grpc.ServicerContext
    ) -> pb.ExplainModelResponse:
        return convert.explain(self.svc.explain_model(request.customer, request.model))

    @_unary
    def ListStaging(
        self, request: pb.ListStagingRequest, context: grpc.ServicerContext
    ) -> pb.ListStagingResponse:
        view, token = self.svc.staging_page(
            request.customer or None,
            request.model or None,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        out = convert.staging(view)
        out.next_page_token = token
        return out

    @_unary
    def ListImages(
        self, request: pb.ListImagesRequest, context: grpc.ServicerContext
    ) -> pb.ListImagesResponse:
        page = self.svc.images_page(
            request.customer or None,
            request.cloud or None,
            request.region or None,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return pb.ListImagesResponse(
            images=[convert.machine_image(v) for v in page.items],
            next_page_token=page.next_page_token,
        )

    @_unary
    def ListWarmPools(
        self, request: pb.ListWarmPoolsRequest, context: grpc.ServicerContext
    ) -> pb.ListWarmPoolsResponse:
        page = self.svc.warm_pools_page(
            request.customer or None,
            request.model or None,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        out = convert.warm_pools(WarmPoolsView(tuple(page.items)))  # (totals of this page)
        out.next_page_token = page.next_page_token
        return out

    @_unary
    def Audit(self, request: pb.AuditRequest, context: grpc.ServicerContext) -> pb.AuditResponse:
        return convert.audit(
            self.svc.audit(request.account or None, customer=request.customer or None)
        )

    @_unary
    def GetUsage(
        self, request: pb.GetUsageRequest, context: grpc.ServicerContext
    ) -> pb.GetUsageResponse:
        return convert.usage(
            self.svc.usage(
                request.customer or None,
                convert.datetime_arg("since", request.since) if request.HasField("since") else None,
                convert.datetime_arg("until", request.until) if request.HasField("until") else None,
                list(request.group_by),
            )
        )

    @_unary
    def GetStatus(self, request: pb.GetStatusRequest, context: grpc.ServicerContext) -> pb.Status:
        return convert.status(self.svc.status())

    @_unary
    def ListEvents(
        self, request: pb.ListEventsRequest, context: grpc.ServicerContext
    ) -> pb.ListEventsResponse:
        if request.page_size or request.page_token:  # AIP-158 paging through the log
            page = self.svc.events_page(
                request.since_id,
                customer=request.customer or None,
                model=request.model or None,
                page_size=request.page_size,
                page_token=request.page_token,
            )
            return pb.ListEventsResponse(
                events=[convert.event(e) for e in page.items],
                next_page_token=page.next_page_token,
            )
        events = self.svc.events(
            request.since_id,
            request.limit,
            customer=request.customer or None,
            model=request.model or None,
        )
        return pb.ListEventsResponse(events=[convert.event(e) for e in events])

    def StreamEvents(
        self, request: pb.StreamEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Event]:
        return self._capped(
            context, "StreamEvents", "ListEvents", self._stream_events(request, context)
        )

    def _capped(
        self, context: grpc.ServicerContext, method: str, unary: str, stream: Iterator[Msg]
    ) -> Iterator[Msg]:
        """``stream`` in one of the capped slots; its errors mapped like a unary call's."""
        if not self._stream_slots.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many open streams; retry later or use {unary}",
            )
        try:
            yield from stream
        except Exception as exc:  # mapped to a status; bugs are logged
            _abort(context, exc, method)
        finally:
            self._stream_slots.release()

    def _stream_events(
        self, request: pb.StreamEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Event]:
        flt = {"customer": request.customer or None, "model": request.model or None}
        if request.since_id:
            cursor = request.since_id
        elif request.tail:
            backlog = self.svc.events(0, request.tail, **flt)
            yield from (convert.event(e) for e in backlog)
            # Continue after the backlog. With no matching event yet, 0 is right: every
            # matching event that appears later is new.
            cursor = max([e.id for e in backlog] + [0])
        else:
            cursor = self.svc.last_event_id()
        while context.is_active() and not self._stopping.is_set():
            batch = self.svc.events(cursor, STREAM_BATCH, **flt)
            for e in batch:
                yield convert.event(e)
            if batch:
                cursor = batch[-1].id
            if len(batch) < STREAM_BATCH:
                self._stopping.wait(STREAM_POLL_S)


# --------------------------------------------------------------------------- server


class GrpcServer:
    """A started server. ``port`` is the bound port (useful with ``addr`` port 0)."""

    def __init__(
        self, server: grpc.Server, port: int, stopping: threading.Event, health: Any
    ) -> None:
        self.server = server
        self.port = port
        self._stopping = stopping
        self._health = health

    def set_serving(self, serving: bool) -> None:
        """gRPC health follows the daemon's readiness (``controlplane.health``): NOT_SERVING
        while it neither holds nor follows a lease, a job stalled, or the store is away."""
        if self._stopping.is_set():
            return
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", SERVICE_NAME):
            self._health.set(name, status)

    def stop(self, grace: float | None = 5.0) -> None:
        """Finish in-flight unary calls (up to ``grace`` seconds) and end event streams."""
        self._stopping.set()
        self._health.enter_graceful_shutdown()
        self.server.stop(grace).wait()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return bool(self.server.wait_for_termination(timeout))


def serve(
    service: ControlPlaneService,
    addr: str = DEFAULT_ADDR,
    *,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    token: str | None = None,
    auth: bool = False,
    tls_client_ca: str | Path | None = None,
    cert_roles: CertRoles | None = None,
    token_cache_s: float = TOKEN_CACHE_S,
    max_workers: int = 16,
    stream_poll_s: float = STREAM_POLL_S,
    tracing: grpc.ServerInterceptor | None = None,
) -> GrpcServer:
    """Start the API on ``addr`` and return the running server; open streams look at the
    store every ``stream_poll_s`` seconds; ``tracing``: a span per call.

    Authentication is on when ``auth`` is set, or a shared ``token`` or a client CA is
    given: every call then needs a credential (``controlplane.grpc.auth``) and is
    authorized by its rule (``controlplane.authz``). Off, every caller is admin (loopback
    only). ``tls_client_ca``: every connection presents a client certificate signed by it,
    mapped to a role by ``cert_roles`` (a bearer token on the call takes precedence)."""
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("TLS needs both a certificate and a key file")
    tls = tls_cert is not None and tls_key is not None
    if tls_client_ca is not None and not tls:
        raise ValueError("client certificates (a client CA) need TLS: a certificate and a key")
    authenticating = bool(token) or auth or tls_client_ca is not None
    check_bind_allowed(addr, tls=tls, token=authenticating)

    interceptors: list[grpc.ServerInterceptor] = []
    if authenticating:
        authenticator = Authenticator(
            shared_token=token,
            tokens=TokenAuthenticator(service.store, cache_s=token_cache_s),
            cert_roles=cert_roles if tls_client_ca is not None else None,
        )
        interceptors.append(AuthInterceptor(authenticator, service))
    if tracing is not None:  # (controlplane.tracing; outermost: a refused call is traced too)
        interceptors.insert(0, tracing)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="grpc"),
        interceptors=interceptors,
        # grpc sets SO_REUSEPORT by default: a second daemon would bind the same port and
        # the kernel would spread the CLI's calls across both. Off: the second fails to bind.
        options=[("grpc.so_reuseport", 0)],
    )
    stopping = threading.Event()
    servicer = ControlPlaneServicer(
        service, stopping, max_streams=max(1, max_workers // 2), poll_s=stream_poll_s
    )
    pb_grpc.add_ControlPlaneServicer_to_server(servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (
            SERVICE_NAME,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    try:
        if tls:
            assert tls_cert is not None and tls_key is not None
            creds = grpc.ssl_server_credentials(
                [(Path(tls_key).read_bytes(), Path(tls_cert).read_bytes())],
                root_certificates=(
                    None if tls_client_ca is None else Path(tls_client_ca).read_bytes()
                ),
                # gRPC Python can only require a client certificate or not ask for one:
                # with a client CA, every connection presents one (a token still wins).
                require_client_auth=tls_client_ca is not None,
            )
            port = server.add_secure_port(addr, creds)
        else:
            port = server.add_insecure_port(addr)
    except RuntimeError as exc:  # grpc reports a failed bind this way
        raise OSError(
            f"cannot listen on {addr}: address in use (another daemon?) or not available "
            f"({str(exc).split(';')[0]})"
        ) from exc
    if port == 0:
        raise OSError(f"cannot listen on {addr}: address in use (another daemon?)")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("grpc.listening", addr=addr, port=port, tls=tls, auth=authenticating)
    return GrpcServer(server, port, stopping, health_servicer)
