"""The server's authentication and authorization edge: who is calling (a bearer token or a
verified client certificate) and whether the call's rule (``controlplane.authz``) lets it
through, on every call, before the servicer runs.

Credentials, in order: ``authorization: Bearer <token>`` when present (the daemon's one
shared token, an admin credential kept for existing deployments, or a stored API token
``gpct_...``); else the client certificate TLS verified against the configured client CA.
A presented bearer token that is not valid is UNAUTHENTICATED, even with a good
certificate: the caller asked to be someone, and is not.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import grpc
import structlog
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from controlplane.api import ControlPlaneService, NotFoundError, ServiceError
from controlplane.api.errors import STORED_ID_MAX
from controlplane.api_tokens import TokenAuthenticator
from controlplane.authz import (
    ADMIN,
    CertRoles,
    Outcome,
    Role,
    Scope,
    Verdict,
    authorize,
    may_apply,
    role_from_certificate,
    scope,
    split_token,
)
from controlplane.authz import RULES as RULES
from controlplane.store.models import DecisionRecord
from schema.policy_file import PolicyError

log = structlog.get_logger(__name__)

_CODES = {
    Outcome.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Outcome.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Outcome.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
}


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its role and which credential it showed (never a secret)."""

    role: Role
    credential: str  # "token <id>", "shared token" or "certificate <name>"

    def __str__(self) -> str:
        return f"{self.role} by {self.credential}"


# The caller of the unary call this thread is serving (None: authentication is off), for
# what the servicer records of who did what (a policy's applied_by, on-call logs).
_CALLER: ContextVar[Caller | None] = ContextVar("gpucap_caller", default=None)


def current_caller() -> Caller | None:
    return _CALLER.get()


class Authenticator:
    """A call's role from its metadata and TLS peer; None: no valid credential."""

    def __init__(
        self,
        *,
        shared_token: str | None = None,
        tokens: TokenAuthenticator | None = None,
        cert_roles: CertRoles | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._shared = f"Bearer {shared_token}".encode() if shared_token else None
        self._tokens = tokens
        self._cert_roles = cert_roles
        self._clock = clock

    def identify(self, context: grpc.ServicerContext) -> Caller | None:
        bearer = _bearer(context.invocation_metadata())
        if bearer is not None:
            return self._token_caller(bearer)
        if self._cert_roles is None:
            return None
        auth = context.auth_context() or {}
        names = [v.decode() for v in auth.get("x509_common_name", ())]
        uris = [v.decode() for v in auth.get("peer_uri", ())]  # (the SAN URIs)
        role = role_from_certificate(self._cert_roles, names, uris)
        return None if role is None else Caller(role, f"certificate {(uris or names)[0]}")

    def _token_caller(self, header: bytes) -> Caller | None:
        # (both compared whatever the first answers: the time says nothing of which matched)
        shared = self._shared is not None and hmac.compare_digest(header, self._shared)
        stored, token_id = None, ""
        if self._tokens is not None and header.startswith(b"Bearer "):
            try:
                text = header[7:].decode("ascii")
            except UnicodeDecodeError:
                text = ""
            stored = self._tokens.role(text, self._clock())
            parts = split_token(text)
            token_id = parts.id if parts else ""
        if shared:
            return Caller(ADMIN, "shared token")
        return None if stored is None else Caller(stored, f"token {token_id}")


def _bearer(metadata: Any) -> bytes | None:
    for key, value in metadata or ():
        if key == "authorization":
            return value.encode() if isinstance(value, str) else bytes(value)
    return None


class AuthInterceptor(grpc.ServerInterceptor):
    """Authenticates and authorizes every call (``controlplane.authz.RULES``); for a
    customer caller, fills the request's empty customer with its own."""

    def __init__(self, authenticator: Authenticator, service: ControlPlaneService) -> None:
        self._auth = authenticator
        self._svc = service

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        kwargs = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary:
            inner_uu = handler.unary_unary

            def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
                token = _CALLER.set(self._check(method, request, context))
                try:
                    return inner_uu(request, context)
                finally:
                    _CALLER.reset(token)

            return grpc.unary_unary_rpc_method_handler(unary_unary, **kwargs)
        if handler.unary_stream:
            inner_us = handler.unary_stream

            def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                self._check(method, request, context)
                return inner_us(request, context)  # type: ignore[no-any-return]

            return grpc.unary_stream_rpc_method_handler(unary_stream, **kwargs)
        if handler.stream_unary:
            inner_su = handler.stream_unary

            def stream_unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
                self._check(method, None, context)
                return inner_su(requests, context)

            return grpc.stream_unary_rpc_method_handler(stream_unary, **kwargs)
        inner_ss = handler.stream_stream

        def stream_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            self._check(method, None, context)
            return inner_ss(requests, context)

        return grpc.stream_stream_rpc_method_handler(stream_stream, **kwargs)

    def _check(self, method: str, request: Any, context: grpc.ServicerContext) -> Caller | None:
        """The caller, once the call's rule lets it through; aborts the call otherwise."""
        rule = RULES.get(method)
        caller = None
        try:
            if rule is None or rule.scope is not Scope.NODE_TOKEN:
                caller = self._auth.identify(context)
            role = caller.role if caller is not None else None
            verdict = authorize(method, role)
            if verdict.outcome is Outcome.ALLOW and role is not None and not role.admin:
                assert rule is not None  # (authorize refuses a method without one)
                verdict = self._scope(rule.scope, role, request)
        except SQLAlchemyError:
            # The store did not answer: the caller may retry; nothing was let through.
            log.exception("grpc.auth_store_error", method=method)
            context.abort(grpc.StatusCode.UNAVAILABLE, "cannot check the credential now; retry")
        if verdict.outcome is not Outcome.ALLOW:
            log.warning(
                "grpc.refused",
                method=method,
                caller=str(caller) if caller else None,
                outcome=verdict.outcome.value,
            )
            context.abort(_CODES[verdict.outcome], verdict.message)
        return caller

    def _scope(self, how: Scope, caller: Role, request: Any) -> Verdict:
        if how is Scope.CUSTOMER_FIELD:
            verdict = scope(caller, request.customer)
            if verdict.outcome is Outcome.ALLOW and not request.customer:
                request.customer = verdict.customer
            return verdict
        if how is Scope.POLICY_TEXT:
            try:
                named = self._svc.validate_policy(request.yaml, request.source).policy.customer
            except (PolicyError, ServiceError):
                named = None  # (the servicer answers a bad file or argument as always)
            return scope(caller, named)
        if how is Scope.POLICY_APPLY:
            return self._policy_apply(caller, request)
        if how is Scope.DECISION:
            if not 0 < request.id <= STORED_ID_MAX:
                return scope(caller, None)  # (the servicer refuses it, naming the field)
            with self._svc.store.session() as s:
                owner = s.scalar(
                    select(DecisionRecord.customer).where(DecisionRecord.id == request.id)
                )
            # An unknown id and another customer's answer alike.
            if owner is None:
                return Verdict(Outcome.NOT_FOUND, f"decision {request.id} not found")
            verdict = scope(caller, owner)
            if verdict.outcome is Outcome.NOT_FOUND:
                return Verdict(Outcome.NOT_FOUND, f"decision {request.id} not found")
            return verdict
        return scope(caller, None)

    def _policy_apply(self, caller: Role, request: Any) -> Verdict:
        try:
            new = self._svc.validate_policy(request.yaml, request.source).policy
        except (PolicyError, ServiceError):
            return scope(caller, None)  # (the servicer answers a bad file as always)
        if new.customer != caller.customer or request.dry_run:
            return scope(caller, new.customer)  # (a dry run only shows the change)
        try:
            view = self._svc.get_policy(caller.customer, None)
            active = self._svc.validate_policy(view.version.raw_yaml, "<active>").policy
        except (NotFoundError, PolicyError):
            active = None  # (none yet, or one today's schema refuses: an admin's to replace)
        return may_apply(caller, new, active)
