"""Authorization as the daemon's config file turns it on: an in-process daemon on the
simulated cloud whose ``grpc`` section sets TLS, a client CA, certificate roles and API
tokens; and the section's bad input, refused naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest

from controlplane import api_tokens
from controlplane.authz import Role
from controlplane.daemon import Daemon, Wiring
from controlplane.grpc.client import ControlPlaneClient
from controlplane.resolvers import SimHealth, SimResolver
from providers.sim import SimCloud
from schema.daemon_config import DaemonConfig
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.policy_file import PolicyError, parse_yaml_model
from tests.component.test_control_loop import POLICY
from tests.component.test_daemon_leadership import FAST, Stallable
from tests.tls_certs import LocalPki, ca_signed_localhost

CONFIG = """\
metrics_addr: ""
grpc:
  addr: 127.0.0.1:0
  tls_cert: {pki}/localhost.crt
  tls_key: {pki}/localhost.key
  auth: true
  tls_client_ca: {pki}/ca.pem
  tls_client_roles: {{oncall: admin}}
  tls_client_spiffe_domain: gpucap.test
"""


def parse(text: str) -> DaemonConfig:
    cfg, _ = parse_yaml_model(text, DaemonConfig, "daemon.yaml")
    return cfg


@pytest.fixture
def pki(tmp_path: Path) -> LocalPki:
    return ca_signed_localhost(
        tmp_path, clients={"oncall": [], "ci": ["spiffe://gpucap.test/customer/demo"]}
    )


@pytest.fixture
def daemon(tmp_path: Path, pki: LocalPki) -> Iterator[Daemon]:
    sim = SimCloud()
    wiring = Wiring(
        database_url=f"sqlite:///{tmp_path / 'gpucap.db'}",
        providers=SimResolver(sim),
        health=SimHealth(sim),
        metrics_source=Stallable(),
        tuning=FAST,
        policy_texts=[("demo", POLICY)],
    )
    d = Daemon(parse(CONFIG.format(pki=pki.ca.parent)), wiring)
    d.start()
    yield d
    d.stop()


def test_the_config_file_turns_on_certificates_and_tokens(daemon: Daemon, pki: LocalPki) -> None:
    addr = f"localhost:{daemon.grpc_port}"

    def client(cn: str, token: str | None = None) -> ControlPlaneClient:
        files = pki.clients[cn]
        return ControlPlaneClient(
            addr, ca_file=pki.ca, cert_file=files.cert, key_file=files.key, token=token
        )

    with client("oncall") as c:  # tls_client_roles: its CN is admin
        assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 1
    with client("ci") as c:  # its SPIFFE id: customer:demo
        assert {m.customer for m in c.stub.ListModels(pb.ListModelsRequest()).models} == {"demo"}
        with pytest.raises(grpc.RpcError) as err:
            c.stub.GetStatus(pb.GetStatusRequest())
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert daemon.store is not None
    other = api_tokens.create(daemon.store, Role("globex"), now=datetime.now(UTC)).token
    with client("oncall", token=other) as c:  # the token decides the role
        with pytest.raises(grpc.RpcError) as err:
            c.stub.ListModels(pb.ListModelsRequest(customer="demo"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("tls_client_roles: {oncall: root}", "grpc.tls_client_roles.oncall"),
        ("tls_client_roles: {oncall: 'customer:Acme'}", "grpc.tls_client_roles.oncall"),
        ("tls_client_ca: ca.pem", "grpc"),  # (without tls_cert and tls_key)
        ("tls_client_spiffe_domain: 'not a domain'", "grpc.tls_client_spiffe_domain"),
        ("auth: maybe", "grpc.auth"),
    ],
)
def test_bad_grpc_auth_settings_are_refused_naming_the_field(section: str, field: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse(f"grpc:\n  {section}\n")
    assert [p.field for p in err.value.problems] == [field]


def test_the_cli_presents_a_client_certificate(daemon: Daemon, pki: LocalPki) -> None:
    from typer.testing import CliRunner

    from controlplane.cli.main import app

    files = pki.clients["ci"]
    env = {
        "GPUCAP_ADDR": f"localhost:{daemon.grpc_port}",
        "GPUCAP_CA": str(pki.ca),
        "GPUCAP_CLIENT_CERT": str(files.cert),
        "GPUCAP_CLIENT_KEY": str(files.key),
        "GPUCAP_TOKEN": "",
    }
    out = CliRunner().invoke(app, ["models", "-o", "json"], env=env)
    assert out.exit_code == 0, out.output
    assert '"customer": "demo"' in out.stdout
    denied = CliRunner().invoke(app, ["status"], env=env)
    assert denied.exit_code == 1 and "needs the admin role" in denied.output
