"""Every paged List RPC over a real gRPC server, on SQLite and PostgreSQL (AIP-158):
walking the pages with rows inserted between them returns every row that existed before
the first page exactly once (and no row twice); a bad page_size or page_token is
INVALID_ARGUMENT naming the field; the CLI's list commands show every row across pages."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from sqlalchemy import insert, select, update
from typer.testing import CliRunner

from controlplane.api import ControlPlaneService, InvalidArgumentError
from controlplane.cli.main import app
from controlplane.grpc import convert
from controlplane.grpc.client import ControlPlaneClient
from controlplane.grpc.server import GrpcServer, serve
from controlplane.store.db import Store
from controlplane.store.models import (
    DecisionRecord,
    Event,
    MachineImage,
    Model,
    Node,
    Pool,
    Replica,
    WeightCopy,
)
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

POLICY = resources.files("controlplane.demo").joinpath("policy.yaml").read_text()
NOW = datetime(2026, 12, 1, tzinfo=UTC)
PAGE = 7  # rows per page: several pages of each list below


@dataclass
class Fleet:
    store: Store
    template: dict[str, Any]
    pool_ids: list[str]
    n: int = 0

    def add(self, count: int) -> None:
        """``count`` more of everything: models (each with a ready replica on a node with
        an address, and a warm one), events, decisions, weight copies and images."""
        with self.store.session() as s:
            for _ in range(count):
                self.n += 1
                i, name = self.n, f"m{self.n:04d}"
                at = NOW + timedelta(seconds=i)
                pool = self.pool_ids[i % len(self.pool_ids)]
                mid = s.execute(
                    insert(Model).returning(Model.id),
                    {
                        "customer": "demo",
                        "name": name,
                        "spec": {**self.template, "name": name},
                        "source": "api",
                        "desired_replicas": 1,
                        "desired_reason": "test",
                        "paused": False,
                        "autoscaler_state": {},
                        "created_at": at,
                        "updated_at": at,
                        "version": 1,
                    },
                ).scalar_one()
                for warm in (False, True):
                    rid = f"r{i:04d}{'w' if warm else ''}"
                    s.execute(
                        insert(Replica),
                        {
                            "id": rid,
                            "model_id": mid,
                            "pool_id": pool,
                            "gpu_shape": "1xH100",
                            "state": "ready",
                            "created_at": at,
                            "ready_at": at,
                            "warm": warm,
                            "version": 1,
                        },
                    )
                    s.execute(
                        insert(Node),
                        {
                            "id": f"n-{rid}",
                            "replica_id": rid,
                            "pool_id": pool,
                            "customer": "demo",
                            "account": "demo-aws",
                            "cloud": "aws",
                            "region": "us-east-1",
                            "instance_type": "p5.4xlarge",
                            "idempotency_token": f"n-{rid}",
                            "instance_id": f"i-{rid}",
                            "state": "ready",
                            "pending_at": at,
                            "ready_at": at,
                            "private_ip": f"10.0.{i // 250}.{i % 250}",
                            "version": 1,
                        },
                    )
                s.add(
                    Pool(
                        id=f"demo/extra-{i:04d}/us-east-1/p5.4xlarge",
                        customer="demo",
                        account=f"extra-{i:04d}",
                        cloud="aws",
                        owner="customer",
                        region="us-east-1",
                        instance_type="p5.4xlarge",
                        gpu_shape="1xH100",
                        tier="on_demand",
                        price_usd_per_hour=float(i % 5),
                    )
                )
                s.add(Event(at=at, kind="test", customer="demo", model=name, message=name))
                s.add(
                    DecisionRecord(
                        at=at, kind="autoscale", customer="demo", model=name, desired=1, reason="t"
                    )
                )
                s.add(
                    WeightCopy(
                        customer="demo",
                        model=name,
                        account="demo-aws",
                        cloud="aws",
                        region="us-east-1",
                        source_uri=f"s3://w/{name}/",
                        dest_uri=f"s3://stage/{name}/",
                        state="ready",
                        created_at=at,
                        updated_at=at,
                    )
                )
                s.add(
                    MachineImage(
                        id=f"img-{i:04d}",
                        customer="demo",
                        account="demo-aws",
                        cloud="aws",
                        region="us-east-1",
                        runtime_image=f"vllm:{i}",
                        instance_type="p5.4xlarge",
                        state="ready",
                        image_name=f"img-{i:04d}",
                        image_id=f"ami-{i:04d}",
                        created_at=at,
                        state_at=at,
                        ready_at=at,
                    )
                )


@dataclass(frozen=True)
class Listing:
    rpc: str
    request: Message
    items: Callable[[Any], Any]
    key: Callable[[Any], Hashable]


LISTINGS = [
    Listing("ListModels", pb.ListModelsRequest(), lambda r: r.models, lambda m: m.name),
    Listing("ListNodes", pb.ListNodesRequest(), lambda r: r.nodes, lambda n: n.id),
    Listing("ListPools", pb.ListPoolsRequest(), lambda r: r.pools, lambda p: p.id),
    Listing(
        "ListEndpoints", pb.ListEndpointsRequest(), lambda r: r.endpoints, lambda e: e.replica_id
    ),
    Listing("ListStaging", pb.ListStagingRequest(), lambda r: r.copies, lambda c: c.model),
    Listing("ListImages", pb.ListImagesRequest(), lambda r: r.images, lambda i: i.id),
    Listing(
        "ListWarmPools",
        pb.ListWarmPoolsRequest(),
        lambda r: r.pools,
        lambda p: (p.model, p.pool_id),
    ),
    Listing("ListDecisions", pb.ListDecisionsRequest(), lambda r: r.decisions, lambda d: d.id),
    Listing("ListEvents", pb.ListEventsRequest(), lambda r: r.events, lambda e: e.id),
]


@pytest.fixture
def fleet(store: Store) -> Fleet:
    svc = ControlPlaneService(store)
    svc.apply_policy(POLICY, source="demo", applied_by="test")
    with store.session() as s:
        template = dict(s.scalars(select(Model.spec).where(Model.name == "chat-8b")).one())
        pools = sorted(s.scalars(select(Pool.id).where(Pool.instance_type == "p5.4xlarge")))
    f = Fleet(store, template, pools)
    f.add(20)
    return f


@pytest.fixture
def server(fleet: Fleet) -> Iterator[GrpcServer]:
    srv = serve(ControlPlaneService(fleet.store), "127.0.0.1:0")
    yield srv
    srv.stop(None)


@pytest.fixture
def client(server: GrpcServer) -> Iterator[ControlPlaneClient]:
    with ControlPlaneClient(f"127.0.0.1:{server.port}") as c:
        yield c


def _walk(
    client: ControlPlaneClient, listing: Listing, between: Callable[[], None], size: int = PAGE
) -> tuple[list[Hashable], int]:
    call = getattr(client.stub, listing.rpc)
    req: Any = type(listing.request)()
    req.CopyFrom(listing.request)
    req.page_size = size
    keys: list[Hashable] = []
    pages = 0
    while True:
        resp = call(req, timeout=10)
        pages += 1
        keys += [listing.key(x) for x in listing.items(resp)]
        assert len(listing.items(resp)) <= size
        if not resp.next_page_token:
            return keys, pages
        between()
        req.page_token = resp.next_page_token


@pytest.mark.parametrize("listing", LISTINGS, ids=lambda x: x.rpc)
def test_pages_cover_every_row_once_under_concurrent_inserts(
    client: ControlPlaneClient, fleet: Fleet, listing: Listing
) -> None:
    before, one_page = _walk(client, listing, lambda: None, size=1000)
    assert one_page == 1 and len(before) >= 20

    keys, pages = _walk(client, listing, lambda: fleet.add(2))

    assert pages >= 3
    counts = Counter(keys)
    assert [k for k, n in counts.items() if n > 1] == []  # no row twice
    assert set(before) <= set(counts)  # every row that was there, exactly once


@pytest.mark.parametrize("listing", LISTINGS, ids=lambda x: x.rpc)
def test_bad_page_size_or_token_is_invalid_argument_naming_the_field(
    client: ControlPlaneClient, listing: Listing
) -> None:
    call = getattr(client.stub, listing.rpc)
    first: Any = type(listing.request)()
    first.page_size = 3
    token = call(first, timeout=10).next_page_token
    assert token
    other: Any = type(listing.request)()
    other.CopyFrom(first)
    if listing.rpc == "ListEvents":
        other.model = "m0001"  # the token was given for another filter
    elif listing.rpc == "ListPools":
        other.include_inactive = True
    else:
        other.customer = "demo"
    cases = [
        ("page_token", {"page_token": "not-a-token"}),
        ("page_token", {"page_token": token[:-4] + "AAAA"}),
        ("page_token", {"page_token": token, "_req": other}),
    ]
    for field, change in cases:
        req: Any = change.pop("_req", None) or type(listing.request)()
        if req is not other:
            req.page_size = 3
        for k, v in change.items():
            setattr(req, k, v)
        with pytest.raises(grpc.RpcError) as err:
            call(req, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, change)
        assert field in (err.value.details() or ""), err.value.details()


def test_page_size_over_the_most_is_cut_to_it(client: ControlPlaneClient, fleet: Fleet) -> None:
    fleet.add(1000 - fleet.n + 5)  # 1,008 models with the policy's three
    resp = client.stub.ListModels(pb.ListModelsRequest(page_size=5000), timeout=30)
    assert len(resp.models) == 1000 and resp.next_page_token
    default = client.stub.ListModels(pb.ListModelsRequest(), timeout=30)
    assert len(default.models) == 100 and default.next_page_token


@pytest.mark.parametrize(
    ("argv", "field", "rows"),
    [
        (["models"], "models", 23),
        (["nodes"], "nodes", 40),
        (["pools", "--all"], "pools", None),
        (["endpoints"], "endpoints", 20),
        (["images"], "images", 20),
        (["staging"], "copies", 20),
        (["warm"], "pools", 20),
    ],
)
def test_cli_lists_every_row_across_pages(
    server: GrpcServer, fleet: Fleet, argv: list[str], field: str, rows: int | None
) -> None:
    fleet.add(230)  # past the default page of 100: three pages and more
    expected = rows + 230 if rows is not None else None
    if argv[0] == "nodes":
        expected = 40 + 460
    out = CliRunner().invoke(
        app, [*argv, "--addr", f"127.0.0.1:{server.port}", "--output", "json", "--timeout", "60"]
    )
    assert out.exit_code == 0, out.output
    got = json.loads(out.output).get(field, [])
    if expected is None:  # pools: as many as the store has
        with fleet.store.session() as s:
            expected = len(list(s.scalars(select(Pool.id))))
    assert len(got) == expected


def test_a_negative_page_size_is_invalid_argument_naming_it(fleet: Fleet) -> None:
    """(page_size is unsigned on the wire, so only an in-process caller can send one.)"""
    svc = ControlPlaneService(fleet.store)
    pages: list[Callable[..., object]] = [
        svc.models_page,
        svc.nodes_page,
        svc.pools_page,
        svc.endpoints_page,
        svc.staging_page,
        svc.images_page,
        svc.warm_pools_page,
        svc.decisions_page,
        svc.events_page,
    ]
    for page in pages:
        with pytest.raises(InvalidArgumentError) as err:
            page(page_size=-1)
        assert err.value.field == "page_size"


def test_a_page_token_cannot_move_between_lists(client: ControlPlaneClient) -> None:
    token = client.stub.ListNodes(pb.ListNodesRequest(page_size=2), timeout=10).next_page_token
    with pytest.raises(grpc.RpcError) as err:
        client.stub.ListModels(pb.ListModelsRequest(page_size=2, page_token=token), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "page_token" in (err.value.details() or "")


def test_list_models_shows_every_change_at_once(client: ControlPlaneClient, fleet: Fleet) -> None:
    """The server keeps each model's message between calls (``convert.ModelMessages``); a
    change the page's read can see is in the very next ListModels, the cached message never
    served for it: the decider's Core UPDATE of desired_* (the row's version stays), a
    replica changing state, added or gone (terminated), an API write (the version moves). Every
    model of each page equals its message converted afresh from GetModel's view."""
    svc = ControlPlaneService(fleet.store)

    def listed() -> dict[str, pb.Model]:
        resp = client.stub.ListModels(pb.ListModelsRequest(page_size=1000), timeout=10)
        return {m.name: m for m in resp.models}

    def version(name: str) -> int:
        with fleet.store.session() as s:
            return s.scalars(select(Model.version).where(Model.name == name)).one()

    def write(stmt: Any) -> None:
        with fleet.store.session() as s:
            s.execute(stmt)

    first = listed()  # (every model's message cached)
    assert first["m0001"].desired_replicas == 1
    assert first["m0001"].ready_replicas == 2
    v1 = version("m0001")
    write(
        update(Model)
        .where(Model.name == "m0001")
        .values(desired_replicas=4, desired_reason="burst")
        .execution_options(synchronize_session=False)
    )
    assert version("m0001") == v1  # (as the decide job writes: no version bump)
    got = listed()
    assert (got["m0001"].desired_replicas, got["m0001"].reason) == (4, "burst")

    write(update(Replica).where(Replica.id == "r0002").values(state="draining"))
    got = listed()["m0002"]
    assert (got.ready_replicas, got.draining_replicas) == (1, 1)
    assert dict(got.replicas_by_state) == {"ready": 1, "draining": 1}

    with fleet.store.session() as s:
        mid = s.scalars(select(Model.id).where(Model.name == "m0003")).one()
    write(
        insert(Replica).values(
            id="r-new",
            model_id=mid,
            pool_id=fleet.pool_ids[0],
            gpu_shape="1xH100",
            state="pending",
            created_at=NOW,
            version=1,
        )
    )
    assert listed()["m0003"].provisioning_replicas == 1
    write(update(Replica).where(Replica.id.in_(["r0004", "r0004w"])).values(state="terminated"))
    got = listed()["m0004"]
    assert (got.ready_replicas, dict(got.replicas_by_state)) == (0, {})

    svc.pause_model("demo", "m0005", True, "test")
    svc.pin_model("demo", "m0006", 3, "test")
    got = listed()
    assert got["m0005"].paused and got["m0006"].pinned_replicas == 3
    for name, message in got.items():
        assert message == convert.model(svc.get_model("demo", name)), name
