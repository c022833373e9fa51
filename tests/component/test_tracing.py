"""OpenTelemetry traces (controlplane/tracing.py) into the SDK's in-memory exporter: a
gRPC call over a real channel is a SERVER span named by its method, with the store
transaction it committed as its child; a provider verb through the traced resolver is a
CLIENT span with its cloud, account and region. Without ``tracing:`` in the daemon config
nothing of OpenTelemetry is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

if os.environ.get("CI") != "true":  # (under CI the extra is installed: a missing one fails)
    pytest.importorskip("opentelemetry.sdk", reason="the gpucap[otel] extra is not installed")

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from controlplane.api import ControlPlaneService  # noqa: E402
from controlplane.grpc.client import ControlPlaneClient  # noqa: E402
from controlplane.grpc.server import serve  # noqa: E402
from controlplane.resolvers import SimResolver  # noqa: E402
from controlplane.store.db import Store  # noqa: E402
from controlplane.store.models import Account  # noqa: E402
from controlplane.tracing import Tracing  # noqa: E402
from providers.sim import SimCloud  # noqa: E402
from schema.daemon_config import DaemonConfig  # noqa: E402
from schema.gen.gpucap.v1 import control_plane_pb2 as pb  # noqa: E402
from tests.policy_texts import example_policy  # noqa: E402


@pytest.fixture
def traced() -> Iterator[tuple[Tracing, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tracing = Tracing("gpucap-test", exporter, batch=False)
    tracing.start()
    yield tracing, exporter
    tracing.shutdown()


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_a_grpc_call_and_its_store_write_are_spans(
    traced: tuple[Tracing, InMemorySpanExporter], sqlite_store: Store
) -> None:
    tracing, exporter = traced
    server = serve(ControlPlaneService(sqlite_store), "127.0.0.1:0", tracing=tracing.interceptor())
    try:
        with ControlPlaneClient(f"127.0.0.1:{server.port}") as client:
            client.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=example_policy(), applied_by="t"))
            with pytest.raises(grpc.RpcError) as refused:
                client.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml="customer: [", applied_by="t"))
    finally:
        server.stop(grace=0)
    spans = exporter.get_finished_spans()
    good, bad = by_name(spans, "gpucap.v1.ControlPlane/ApplyPolicy")
    assert good.kind == SpanKind.SERVER and good.attributes is not None
    assert dict(good.attributes) == {
        "rpc.system": "grpc",
        "rpc.service": "gpucap.v1.ControlPlane",
        "rpc.method": "ApplyPolicy",
        "rpc.grpc.status_code": 0,
    }
    assert good.resource.attributes["service.name"] == "gpucap-test"
    assert bad.attributes is not None
    assert bad.attributes["rpc.grpc.status_code"] == refused.value.code().value[0]
    assert bad.status.status_code == StatusCode.ERROR
    # The policy's write: a committed store transaction inside the call's span.
    assert good.context is not None
    writes = [
        s
        for s in by_name(spans, "store.transaction")
        if s.parent is not None and s.parent.span_id == good.context.span_id
    ]
    assert writes, [(s.name, s.parent) for s in spans]
    assert any(s.attributes and s.attributes["gpucap.store.outcome"] == "commit" for s in writes)
    assert all(s.attributes and s.attributes["db.system"] == "sqlite" for s in writes)
    assert all(s.kind == SpanKind.CLIENT for s in writes)


def test_a_store_read_outside_any_call_is_a_root_span_rolled_back(
    traced: tuple[Tracing, InMemorySpanExporter], sqlite_store: Store
) -> None:
    _, exporter = traced
    with sqlite_store.session() as s:
        s.query(Account).count()
    (span,) = by_name(exporter.get_finished_spans(), "store.transaction")
    assert span.parent is None and span.attributes is not None
    assert span.attributes["gpucap.store.outcome"] in ("commit", "rollback")


def test_after_shutdown_the_store_makes_no_spans(sqlite_store: Store) -> None:
    exporter = InMemorySpanExporter()
    tracing = Tracing("gpucap-test", exporter, batch=False)
    tracing.start()
    tracing.shutdown()
    with sqlite_store.session() as s:
        s.query(Account).count()
    assert exporter.get_finished_spans() == ()


def test_a_provider_verb_through_the_traced_resolver_is_a_span(
    traced: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = traced
    acct = Account(
        customer="acme",
        name="acme-aws",
        cloud="aws",
        owner="customer",
        regions={"regions": ["us-east-1"]},
        credentials_ref={"role_arn": "arn:aws:iam::111122223333:role/gpucap"},
    )
    provider = tracing.resolver(SimResolver(SimCloud())).provider("acme", acct)
    assert provider.list_nodes("us-east-1", {"gpucap-managed": "true"}) == []
    assert "acme-aws" in provider.account
    (span,) = by_name(exporter.get_finished_spans(), "provider.list_nodes")
    assert span.kind == SpanKind.CLIENT and span.attributes is not None
    assert dict(span.attributes) == {
        "gpucap.cloud": "aws",
        "gpucap.account": provider.account,  # (as the provider names it: the sim's "acme/acme-aws")
        "gpucap.region": "us-east-1",
    }


def test_without_tracing_config_nothing_of_opentelemetry_is_imported() -> None:
    assert DaemonConfig().tracing is None
    code = (
        "import sys, controlplane.daemon, controlplane.grpc.server, controlplane.cli.main\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )
    assert out.stdout.strip() == "[]"


class _Collector:
    """An OTLP/HTTP trace receiver on a free loopback port: the span names it was sent."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        received: list[tuple[str, str]] = []  # (service.name, span name)
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = ExportTraceServiceRequest.FromString(body)
                for rs in req.resource_spans:
                    service = next(
                        a.value.string_value
                        for a in rs.resource.attributes
                        if a.key == "service.name"
                    )
                    for ss in rs.scope_spans:
                        received.extend((service, s.name) for s in ss.spans)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_daemon_configured_with_tracing_exports_its_spans_over_otlp(tmp_path: Path) -> None:
    from controlplane.daemon import Daemon, Wiring
    from controlplane.resolvers import SimHealth
    from schema.daemon_config import GrpcConfig, TracingConfig
    from tests.component.test_control_loop import POLICY
    from tests.component.test_daemon_leadership import FAST, Stallable

    collector = _Collector()
    sim = SimCloud()
    wiring = Wiring(
        database_url=f"sqlite:///{tmp_path / 'gpucap.db'}",
        providers=SimResolver(sim),
        health=SimHealth(sim),
        metrics_source=Stallable(),
        tuning=FAST,
        policy_texts=[("demo", POLICY)],
    )
    config = DaemonConfig(
        grpc=GrpcConfig(addr="127.0.0.1:0"),
        metrics_addr="",
        tracing=TracingConfig(otlp_endpoint=collector.url, service_name="gpucap-e2e"),
    )
    d = Daemon(config, wiring)
    d.start()
    try:
        with ControlPlaneClient(f"127.0.0.1:{d.grpc_port}") as client:
            client.stub.ListModels(pb.ListModelsRequest())
        time.sleep(1.0)  # a few ticks: the offerings job lists each account's offerings
    finally:
        d.stop()  # flushes the batched spans
        collector.server.shutdown()
    names = {name for service, name in collector.received if service == "gpucap-e2e"}
    assert "gpucap.v1.ControlPlane/ListModels" in names, names
    assert "store.transaction" in names
    assert any(n.startswith("provider.") for n in names), names
