"""OpenTelemetry traces, when the daemon config has ``tracing:`` (``gpucap[otel]``): a span
per gRPC call (a server interceptor), per store transaction (SQLAlchemy session events)
and per provider verb (a proxy around each provider the resolver hands out, the seam
every job and the API call clouds through). A store transaction or a provider call made
while serving a gRPC call is that call's child.

Imported only when tracing is configured: without it the daemon imports nothing of
OpenTelemetry. The spans go to this object's own tracer provider (not the process-global
one), so tests can build one with an in-memory exporter and shut it down again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

if TYPE_CHECKING:
    from controlplane.loop.context import ProviderResolver
    from controlplane.store.models import Account
    from providers.base import Provider
    from schema.daemon_config import TracingConfig

_SPAN_KEY = "gpucap.otel.span"  # a session's open transaction span, in Session.info
_COMMITTED = "gpucap.otel.committed"
# What a provider does (providers.base.Provider and ObjectStore): a span each.
PROVIDER_VERBS = frozenset(
    {
        "create_node",
        "describe_node",
        "list_nodes",
        "terminate_node",
        "stop_node",
        "start_node",
        "list_offerings",
        "delete_placement_group",
        "create_image",
        "list_images",
        "describe_image",
        "delete_image",
        "list_objects",
        "copy_step",
        "delete_objects",
    }
)


class Tracing:
    """The daemon's tracer and what it hooked: ``start`` hooks the store's sessions,
    ``shutdown`` unhooks them and flushes the spans."""

    def __init__(self, service_name: str, exporter: SpanExporter, *, batch: bool = True) -> None:
        self.provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("gpucap")
        self._hooks: list[tuple[str, Callable[..., None]]] = [
            ("after_begin", self._begin),
            ("after_commit", self._commit),
            ("after_transaction_end", self._end),
        ]
        self._hooked = False

    @classmethod
    def from_config(cls, config: TracingConfig) -> Tracing:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return cls(config.service_name, OTLPSpanExporter(endpoint=config.otlp_endpoint))

    def start(self) -> None:
        if not self._hooked:
            for name, fn in self._hooks:
                event.listen(Session, name, fn)
            self._hooked = True

    def shutdown(self) -> None:
        if self._hooked:
            for name, fn in self._hooks:
                event.remove(Session, name, fn)
            self._hooked = False
        self.provider.shutdown()

    # -- gRPC ---------------------------------------------------------------------------
    def interceptor(self) -> grpc.ServerInterceptor:
        return _GrpcTracing(self.tracer)

    # -- store --------------------------------------------------------------------------
    def _begin(self, session: Session, transaction: SessionTransaction, connection: Any) -> None:
        if transaction.parent is not None or _SPAN_KEY in session.info:
            return  # (a savepoint, or a second connection of one transaction)
        span = self.tracer.start_span("store.transaction", kind=SpanKind.CLIENT)
        span.set_attribute("db.system", connection.dialect.name)
        session.info[_SPAN_KEY] = span

    def _commit(self, session: Session) -> None:
        if _SPAN_KEY in session.info:
            session.info[_COMMITTED] = True

    def _end(self, session: Session, transaction: SessionTransaction) -> None:
        if transaction.parent is not None:
            return
        span: Span | None = session.info.pop(_SPAN_KEY, None)
        committed = session.info.pop(_COMMITTED, False)
        if span is not None:
            span.set_attribute("gpucap.store.outcome", "commit" if committed else "rollback")
            span.end()

    # -- providers ------------------------------------------------------------------------
    def resolver(self, inner: ProviderResolver) -> ProviderResolver:
        return _TracedResolver(inner, self.tracer)


class _GrpcTracing(grpc.ServerInterceptor):
    """A SERVER span per call, named as OpenTelemetry's RPC conventions say
    (``gpucap.v1.ControlPlane/ListModels``), with its status code; gRPC's own services
    (health, reflection) are left out."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        method: str = handler_call_details.method  # type: ignore[attr-defined]
        if handler is None or method.startswith("/grpc."):
            return handler
        name = method.lstrip("/")
        service, _, verb = name.partition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": verb}
        tracer = self.tracer

        def unary(inner: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                with tracer.start_as_current_span(
                    name, kind=SpanKind.SERVER, attributes=attributes
                ) as span:
                    try:
                        return inner(request, context)
                    finally:
                        _status(span, context)

            return call

        def stream(
            inner: Callable[[Any, grpc.ServicerContext], Iterator[Any]],
        ) -> Callable[..., Iterator[Any]]:
            def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                with tracer.start_as_current_span(
                    name, kind=SpanKind.SERVER, attributes=attributes
                ) as span:
                    try:
                        yield from inner(request, context)
                    finally:
                        _status(span, context)

            return call

        h: Any = handler
        if h.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                unary(h.unary_unary), h.request_deserializer, h.response_serializer
            )
        if h.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                stream(h.unary_stream), h.request_deserializer, h.response_serializer
            )
        return handler  # (the API has no client-streaming calls)


def _status(span: Span, context: grpc.ServicerContext) -> None:
    code = context.code()  # type: ignore[attr-defined]  # None: OK
    value = grpc.StatusCode.OK.value[0] if code is None else code.value[0]
    span.set_attribute("rpc.grpc.status_code", value)
    if code not in (None, grpc.StatusCode.OK):
        span.set_status(Status(StatusCode.ERROR, code.name))


class _TracedResolver:
    def __init__(self, inner: ProviderResolver, tracer: trace.Tracer) -> None:
        self.inner = inner
        self.tracer = tracer

    def provider(self, customer: str, account: Account) -> Provider:
        return _TracedProvider(self.inner.provider(customer, account), self.tracer)  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:  # (what else the resolver offers)
        return getattr(self.inner, name)


class _TracedProvider:
    """Forwards everything; each provider verb runs in a CLIENT span ``provider.<verb>``
    with the cloud, account and region (a verb's first argument, when it is one)."""

    def __init__(self, inner: Provider, tracer: trace.Tracer) -> None:
        self.inner = inner
        self.tracer = tracer
        self.cloud = inner.cloud
        self.account = inner.account

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name not in PROVIDER_VERBS or not callable(value):
            return value
        fn, tracer = value, self.tracer
        cloud = getattr(self.cloud, "value", str(self.cloud))

        def traced(*args: Any, **kwargs: Any) -> Any:
            attributes: dict[str, str] = {"gpucap.cloud": cloud, "gpucap.account": self.account}
            region = args[0] if args else getattr(kwargs.get("request"), "region", None)
            if isinstance(region, str):
                attributes["gpucap.region"] = region
            elif args and hasattr(args[0], "region"):
                attributes["gpucap.region"] = str(args[0].region)
            with tracer.start_as_current_span(
                f"provider.{name}", kind=SpanKind.CLIENT, attributes=attributes
            ):
                return fn(*args, **kwargs)

        return traced
