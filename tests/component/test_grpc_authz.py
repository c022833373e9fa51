"""Per-tenant authorization over a real server and store (SQLite and PostgreSQL): every RPC
called as every role, lists and streams filtered by role, client certificates mapped to
roles, the shared token as admin."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from sqlalchemy import select

from controlplane import api_tokens
from controlplane.api import ControlPlaneService
from controlplane.authz import ADMIN, RULES, SERVICE, CertRoles, Role, Scope
from controlplane.grpc.client import ControlPlaneClient
from controlplane.grpc.server import GrpcServer, InsecureBindError, serve
from controlplane.store.db import Store
from controlplane.store.models import DecisionRecord, Pool
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.component.oncall_kit import add_replica
from tests.policy_texts import edited, engines_policy
from tests.tls_certs import ca_signed_localhost

C = grpc.StatusCode
ACME = engines_policy({"chat-a": ("vllm", 8000)})
GLOBEX = edited(
    edited(
        edited(ACME, "customer: acme", "customer: globex"), "name: acme-aws", "name: globex-aws"
    ),
    "name: chat-a",
    "name: chat-g",
)
SHARED = "the-shared-token"
ROLES = ("admin", "owner", "other", "anonymous", "revoked", "expired")


@dataclass(frozen=True)
class World:
    addr: str
    tokens: dict[str, str | None]  # role name -> bearer token
    pool: str  # one of acme's pools
    node: str  # an acme node, ready
    decision: int  # an acme decision
    other_decision: int  # a globex decision
    store: Store


def _decision(store: Store, customer: str, model: str) -> int:
    with store.session() as s:
        row = DecisionRecord(
            at=datetime.now(UTC),
            kind="autoscale",
            customer=customer,
            model=model,
            desired=1,
            reason="hold",
            detail="",
            inputs={},
        )
        s.add(row)
        s.flush()
        return row.id


@pytest.fixture
def world(store: Store) -> Iterator[World]:
    svc = ControlPlaneService(store)
    svc.apply_policy(ACME, source="acme.yaml", applied_by="t")
    svc.apply_policy(GLOBEX, source="globex.yaml", applied_by="t")
    spec = _spec("api-m")
    svc.deploy_model("acme", _spec_view(svc, spec))
    for role in ROLES:
        svc.deploy_model("acme", _spec_view(svc, _spec(f"del-{role}")))
    with store.session() as s:
        pool = s.scalars(select(Pool.id).where(Pool.customer == "acme").order_by(Pool.id)).first()
    assert pool is not None
    rid = add_replica(store, "chat-a", pool, "ready", ["ready"], private_ip="10.0.0.5")
    now = datetime.now(UTC)
    past = now - timedelta(days=2)

    def token(role: Role, **kw: Any) -> str:
        return api_tokens.create(store, role, **{"now": now, **kw}).token

    revoked = api_tokens.create(store, Role("acme"), now=now)
    api_tokens.revoke(store, revoked.view.id, now=now)
    tokens: dict[str, str | None] = {
        "admin": token(ADMIN, description="on-call"),
        "owner": token(Role("acme")),
        "other": token(Role("globex")),
        "anonymous": None,
        "revoked": revoked.token,
        "expired": token(Role("acme"), now=past, expires_at=past + timedelta(hours=1)),
    }
    srv = serve(svc, "127.0.0.1:0", auth=True, token=SHARED, token_cache_s=0)
    try:
        yield World(
            f"127.0.0.1:{srv.port}",
            tokens,
            pool,
            f"{rid}-n0",
            _decision(store, "acme", "chat-a"),
            _decision(store, "globex", "chat-g"),
            store,
        )
    finally:
        srv.stop(grace=0)


def _spec(name: str, **kw: Any) -> pb.ModelSpec:
    return pb.ModelSpec(
        name=name,
        shapes=[pb.ShapeOption(shape="1xH100", max_concurrency=16)],
        max_replicas=kw.pop("max_replicas", 2),
        clouds=["aws"],
        **kw,
    )


def _spec_view(svc: ControlPlaneService, spec: pb.ModelSpec) -> Any:
    from controlplane.grpc import convert

    return convert.spec_from_pb(spec)


# Per RPC, a request about one of acme's resources, given the calling role's name (so that
# writes of different roles do not collide).
REQUESTS: dict[str, Callable[[World, str], Message]] = {
    "ValidatePolicy": lambda w, r: pb.ValidatePolicyRequest(yaml=ACME),
    "ApplyPolicy": lambda w, r: pb.ApplyPolicyRequest(yaml=ACME, applied_by=r),
    "GetPolicy": lambda w, r: pb.GetPolicyRequest(customer="acme"),
    "DeployModel": lambda w, r: pb.DeployModelRequest(customer="acme", spec=_spec(f"new-{r}")),
    "UpdateModel": lambda w, r: pb.UpdateModelRequest(
        customer="acme", spec=_spec("api-m", max_replicas=3)
    ),
    "DeleteModel": lambda w, r: pb.DeleteModelRequest(customer="acme", name=f"del-{r}"),
    "GetModel": lambda w, r: pb.GetModelRequest(customer="acme", name="chat-a"),
    "ListModels": lambda w, r: pb.ListModelsRequest(customer="acme"),
    "PinModel": lambda w, r: pb.PinModelRequest(customer="acme", name="chat-a", replicas=1),
    "PauseModel": lambda w, r: pb.PauseModelRequest(customer="acme", name="chat-a", paused=True),
    "CordonPool": lambda w, r: pb.CordonPoolRequest(pool_id=w.pool, cordoned=True, reason=r),
    "CordonPools": lambda w, r: pb.CordonPoolsRequest(
        selector=pb.PoolSelector(customer="acme"), cordoned=True, reason=r
    ),
    "DrainNode": lambda w, r: pb.DrainNodeRequest(node_id=w.node, reason=r),
    "ReportNodePhase": lambda w, r: pb.ReportNodePhaseRequest(
        node_id=w.node, token="not-its-token", phase="booted", at=1.0
    ),
    "ListDecisions": lambda w, r: pb.ListDecisionsRequest(customer="acme"),
    "ReplayDecision": lambda w, r: pb.ReplayDecisionRequest(id=w.decision),
    "ListNodes": lambda w, r: pb.ListNodesRequest(customer="acme"),
    "ListEndpoints": lambda w, r: pb.ListEndpointsRequest(customer="acme"),
    "WatchEndpoints": lambda w, r: pb.WatchEndpointsRequest(customer="acme"),
    "ListPools": lambda w, r: pb.ListPoolsRequest(customer="acme"),
    "ExplainModel": lambda w, r: pb.ExplainModelRequest(customer="acme", model="chat-a"),
    "ListStaging": lambda w, r: pb.ListStagingRequest(customer="acme"),
    "ListImages": lambda w, r: pb.ListImagesRequest(customer="acme"),
    "ListWarmPools": lambda w, r: pb.ListWarmPoolsRequest(customer="acme"),
    "Audit": lambda w, r: pb.AuditRequest(customer="acme"),
    "GetUsage": lambda w, r: pb.GetUsageRequest(customer="acme"),
    "GetStatus": lambda w, r: pb.GetStatusRequest(),
    "ListEvents": lambda w, r: pb.ListEventsRequest(customer="acme"),
    "StreamEvents": lambda w, r: pb.StreamEventsRequest(customer="acme", tail=1),
}
# What the admin gets where it is not OK: the service's own answer, not authorization's.
ADMIN_CODE = {
    "ReportNodePhase": C.UNAUTHENTICATED,  # (the node's boot token is wrong)
    "ReplayDecision": C.FAILED_PRECONDITION,  # (a record without inputs)
    "Audit": C.FAILED_PRECONDITION,  # (no cloud access in this service)
}
METHODS = pb.DESCRIPTOR.services_by_name["ControlPlane"].methods


def _call(client: ControlPlaneClient, name: str, request: Message) -> tuple[grpc.StatusCode, Any]:
    method = getattr(client.stub, name)
    try:
        if name in ("WatchEndpoints", "StreamEvents"):
            stream = method(request, timeout=10)
            try:
                return C.OK, next(stream)
            finally:
                stream.cancel()
        return C.OK, method(request, timeout=10)
    except grpc.RpcError as err:
        return err.code(), err.details()


def _expected(name: str, role: str) -> grpc.StatusCode:
    rule = RULES[f"/{SERVICE}/{name}"]
    admin = ADMIN_CODE.get(name, C.OK)
    if role == "admin" or rule.scope is Scope.NODE_TOKEN:
        return admin  # (a node's report does not depend on an API credential)
    if role in ("anonymous", "revoked", "expired"):
        return C.UNAUTHENTICATED
    if not rule.customers:
        return C.PERMISSION_DENIED
    return admin if role == "owner" else C.NOT_FOUND


def test_every_rpc_as_every_role(world: World) -> None:
    assert sorted(REQUESTS) == sorted(m.name for m in METHODS), "a request for every RPC"
    wrong = []
    for role in ROLES:
        with ControlPlaneClient(world.addr, token=world.tokens[role]) as c:
            for m in METHODS:
                got, detail = _call(c, m.name, REQUESTS[m.name](world, role))
                want = _expected(m.name, role)
                if got != want:
                    wrong.append(
                        f"{m.name} as {role}: {got.name} ({str(detail)[:80]}), want {want.name}"
                    )
    assert not wrong, "\n".join(wrong)

    # Refused calls changed nothing: only the admin's and the owner's deletes happened.
    with ControlPlaneClient(world.addr, token=SHARED) as admin:
        names = {
            m.name
            for m in admin.stub.ListModels(pb.ListModelsRequest(customer="acme")).models
            if not m.HasField("deleted_at")
        }
    assert {f"del-{r}" for r in ROLES} & names == {f"del-{r}" for r in ROLES[2:]}
    assert {f"new-{r}" for r in ROLES} & names == {"new-admin", "new-owner"}


def test_another_customers_resources_look_like_missing_ones(world: World) -> None:
    with ControlPlaneClient(world.addr, token=world.tokens["other"]) as globex:
        for request_of in (
            lambda name: pb.GetModelRequest(customer=name, name="chat-a"),
            lambda name: pb.ListModelsRequest(customer=name),
            lambda name: pb.GetPolicyRequest(customer=name),
        ):
            method = {"GetModelRequest": "GetModel", "ListModelsRequest": "ListModels"}.get(
                request_of("x").DESCRIPTOR.name, "GetPolicy"
            )
            existing = _call(globex, method, request_of("acme"))
            missing = _call(globex, method, request_of("nosuch"))
            assert existing[0] == missing[0] == C.NOT_FOUND
            assert existing[1].replace("acme", "X") == missing[1].replace("nosuch", "X")
        replay = _call(globex, "ReplayDecision", pb.ReplayDecisionRequest(id=world.decision))
        unknown = _call(globex, "ReplayDecision", pb.ReplayDecisionRequest(id=10**6))
        assert replay[0] == unknown[0] == C.NOT_FOUND


def test_lists_and_streams_are_filtered_by_role(world: World) -> None:
    with ControlPlaneClient(world.addr, token=world.tokens["owner"]) as acme:
        s = acme.stub
        assert {m.customer for m in s.ListModels(pb.ListModelsRequest()).models} == {"acme"}
        assert {p.customer for p in s.ListPools(pb.ListPoolsRequest()).pools} == {"acme"}
        assert [n.id for n in s.ListNodes(pb.ListNodesRequest()).nodes] == [world.node]
        events = s.ListEvents(pb.ListEventsRequest(limit=1000)).events
        assert events and {e.customer for e in events} == {"acme"}
        paged = s.ListEvents(pb.ListEventsRequest(page_size=1000)).events
        assert [e.id for e in paged] == [e.id for e in events]
        stream = s.StreamEvents(pb.StreamEventsRequest(tail=1000), timeout=10)
        streamed = [next(stream) for _ in events]
        stream.cancel()
        assert [e.id for e in streamed] == [e.id for e in events]
        decisions = s.ListDecisions(pb.ListDecisionsRequest()).decisions
        assert [d.id for d in decisions] == [world.decision]
        assert s.GetPolicy(pb.GetPolicyRequest()).customer == "acme"  # its own, unnamed
        watch = s.WatchEndpoints(pb.WatchEndpointsRequest(), timeout=10)
        assert [e.node_id for e in next(watch).endpoints] == [world.node]
        watch.cancel()
        listed = s.ListEndpoints(pb.ListEndpointsRequest()).endpoints
        assert [e.node_id for e in listed] == [world.node]
    with ControlPlaneClient(world.addr, token=world.tokens["other"]) as globex:
        watch = globex.stub.WatchEndpoints(pb.WatchEndpointsRequest(), timeout=10)
        assert list(next(watch).endpoints) == []  # (acme's endpoint is not globex's)
        watch.cancel()
        assert not globex.stub.ListEndpoints(pb.ListEndpointsRequest()).endpoints
        assert not globex.stub.ListNodes(pb.ListNodesRequest()).nodes
        decided = globex.stub.ListDecisions(pb.ListDecisionsRequest()).decisions
        assert [d.id for d in decided] == [world.other_decision]
    with ControlPlaneClient(world.addr, token=world.tokens["admin"]) as admin:
        every = admin.stub.ListModels(pb.ListModelsRequest()).models
        assert {m.customer for m in every} == {"acme", "globex"}
        all_events = admin.stub.ListEvents(pb.ListEventsRequest(limit=1000)).events
        assert {e.customer for e in all_events} >= {"acme", "globex"}


def test_the_shared_token_is_admin_and_a_revoked_token_stops_at_once(world: World) -> None:
    with ControlPlaneClient(world.addr, token=SHARED) as c:
        assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 2
    with ControlPlaneClient(world.addr, token=world.tokens["owner"]) as c:
        assert c.stub.GetModel(pb.GetModelRequest(name="chat-a")).customer == "acme"
        [token_id] = [
            v.id
            for v in api_tokens.list_tokens(world.store)
            if world.tokens["owner"] and world.tokens["owner"].startswith(f"gpct_{v.id}_")
        ]
        api_tokens.revoke(world.store, token_id, now=datetime.now(UTC))
        assert _call(c, "GetModel", pb.GetModelRequest(name="chat-a"))[0] == C.UNAUTHENTICATED
    owner = world.tokens["owner"]
    assert owner is not None
    for forged in (
        owner[:-1] + ("A" if owner[-1] != "A" else "B"),
        "Bearer",
        "gpct_",
        SHARED + "x",
    ):
        with ControlPlaneClient(world.addr, token=forged) as c:
            assert _call(c, "ListModels", pb.ListModelsRequest())[0] == C.UNAUTHENTICATED


def test_tokens_are_stored_hashed(world: World) -> None:
    from controlplane.store.models import ApiToken

    with world.store.session() as s:
        stored = [(r.id, r.secret_sha256) for r in s.scalars(select(ApiToken))]
    for token in world.tokens.values():
        if token is None:
            continue
        secret = token.split("_", 2)[2]
        assert all(secret not in h for _, h in stored)


def test_client_certificates_map_to_roles(sqlite_store: Store, tmp_path: Path) -> None:
    svc = ControlPlaneService(sqlite_store)
    svc.apply_policy(ACME, source="acme.yaml", applied_by="t")
    svc.apply_policy(GLOBEX, source="globex.yaml", applied_by="t")
    pki = ca_signed_localhost(
        tmp_path,
        clients={
            "ci-acme": ["spiffe://gpucap.test/customer/acme"],
            "oncall": [],
            "stranger": ["spiffe://elsewhere.test/admin"],
        },
    )
    roles = CertRoles({"oncall": ADMIN}, spiffe_domain="gpucap.test")
    srv = serve(
        svc,
        "127.0.0.1:0",
        tls_cert=pki.server.cert,
        tls_key=pki.server.key,
        tls_client_ca=pki.ca,
        cert_roles=roles,
    )
    addr = f"localhost:{srv.port}"

    def client(cn: str | None, token: str | None = None) -> ControlPlaneClient:
        files = pki.clients[cn] if cn else None
        return ControlPlaneClient(
            addr,
            ca_file=pki.ca,
            cert_file=files.cert if files else None,
            key_file=files.key if files else None,
            token=token,
        )

    try:
        with client("ci-acme") as c:
            models = c.stub.ListModels(pb.ListModelsRequest()).models
            assert {m.customer for m in models} == {"acme"}
            assert _call(c, "GetStatus", pb.GetStatusRequest())[0] == C.PERMISSION_DENIED
            assert _call(c, "ListModels", pb.ListModelsRequest(customer="globex"))[0] == (
                C.NOT_FOUND
            )
        with client("oncall") as c:
            assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 2
        with client("stranger") as c:  # a verified certificate that maps to no role
            assert _call(c, "ListModels", pb.ListModelsRequest())[0] == C.UNAUTHENTICATED
        with client(None) as c:  # no certificate: the handshake fails
            assert _call(c, "ListModels", pb.ListModelsRequest())[0] == C.UNAVAILABLE
        admin = api_tokens.create(sqlite_store, ADMIN, now=datetime.now(UTC)).token
        with client("stranger", token=admin) as c:  # a token wins over the certificate
            assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 2
        with client("ci-acme", token="gpct_0123456789abcdef_" + "x" * 40) as c:
            # A bad token is refused even with a good certificate: it claims another identity.
            assert _call(c, "ListModels", pb.ListModelsRequest())[0] == C.UNAUTHENTICATED
    finally:
        srv.stop(grace=0)


def test_authentication_off_only_on_loopback(sqlite_store: Store, tmp_path: Path) -> None:
    svc = ControlPlaneService(sqlite_store)
    with pytest.raises(InsecureBindError, match="TLS"):
        serve(svc, "0.0.0.0:0", auth=True)
    pki = ca_signed_localhost(tmp_path)
    with pytest.raises(ValueError, match="client certificates .* need TLS"):
        serve(svc, "127.0.0.1:0", tls_client_ca=pki.ca)


def test_no_authentication_on_loopback_everyone_is_admin(sqlite_store: Store) -> None:
    svc = ControlPlaneService(sqlite_store)
    svc.apply_policy(ACME, source="acme.yaml", applied_by="t")
    srv: GrpcServer = serve(svc, "127.0.0.1:0")
    try:
        with ControlPlaneClient(f"127.0.0.1:{srv.port}") as c:
            assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 1
            assert c.stub.DrainNode is not None
    finally:
        srv.stop(grace=0)


def test_a_store_that_does_not_answer_is_unavailable_not_a_crash(world: World) -> None:
    from sqlalchemy import text

    with world.store.session() as s:
        s.execute(text("DROP TABLE api_tokens"))
    with ControlPlaneClient(world.addr, token=world.tokens["owner"]) as c:
        assert _call(c, "ListModels", pb.ListModelsRequest())[0] == C.UNAVAILABLE
    with ControlPlaneClient(world.addr, token=SHARED) as c:  # (the shared token needs no row)
        assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 2


def test_a_customer_applies_its_policy_but_not_its_accounts(world: World) -> None:
    more_models = edited(ACME, "max_concurrency: 16", "max_concurrency: 24")
    more_regions = edited(ACME, "regions: [us-east-1]", "regions: [us-east-1, us-west-2]")
    with ControlPlaneClient(world.addr, token=world.tokens["owner"]) as c:
        done = c.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=more_models, applied_by="ci"))
        assert done.changed and done.policy.version == 2
        owner_id = (world.tokens["owner"] or "").split("_")[1]
        # Who the credential says, beside what the caller wrote.
        assert done.policy.applied_by == f"ci [customer:acme by token {owner_id}]"
        code, detail = _call(c, "ApplyPolicy", pb.ApplyPolicyRequest(yaml=more_regions))
        assert code == C.PERMISSION_DENIED and "accounts or overflow" in detail
        # A dry run only shows the change: allowed.
        c.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=more_regions, dry_run=True))
        assert c.stub.GetPolicy(pb.GetPolicyRequest()).version == 2  # (unchanged)
    newco = api_tokens.create(world.store, Role("newco"), now=datetime.now(UTC)).token
    first = edited(ACME, "customer: acme", "customer: newco")
    with ControlPlaneClient(world.addr, token=newco) as c:
        code, detail = _call(c, "ApplyPolicy", pb.ApplyPolicyRequest(yaml=first))
        assert code == C.PERMISSION_DENIED and "first policy" in detail
    with ControlPlaneClient(world.addr, token=world.tokens["admin"]) as c:
        assert c.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=more_regions)).policy.version == 3
        assert c.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=first)).policy.version == 1
