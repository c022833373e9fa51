"""``WatchEndpoints`` over a real channel, on SQLite and PostgreSQL: the state of the world,
then each change of it, with a revision that names exactly one set of endpoints, survives a
restart and is shared by every daemon of one database."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from sqlalchemy import select

from controlplane.api import ControlPlaneService
from controlplane.grpc.client import ControlPlaneClient, error_details
from controlplane.grpc.server import GrpcServer, serve
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Replica
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.component.oncall_kit import add_replica
from tests.policy_texts import example_policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EAST = "acme/acme-aws/us-east-1/p5.48xlarge"
POLL_S = 0.05


@pytest.fixture
def svc(store: Store) -> ControlPlaneService:
    service = ControlPlaneService(store)
    service.apply_policy(example_policy(), "policy.yaml", "alice")
    return service


@pytest.fixture
def server(svc: ControlPlaneService) -> Iterator[GrpcServer]:
    srv = serve(svc, "127.0.0.1:0", stream_poll_s=POLL_S)
    yield srv
    srv.stop(grace=0)


@pytest.fixture
def client(server: GrpcServer) -> Iterator[ControlPlaneClient]:
    with ControlPlaneClient(f"127.0.0.1:{server.port}") as c:
        yield c


def _replica(store: Store, rid: str, state: str, ip: str | None, model: str = "llama-70b") -> None:
    """A one-node replica, as placement and the reconciler would record it."""
    add_replica(store, model, EAST, state, [state], rid=rid, private_ip=ip)


def _set(store: Store, rid: str, *, state: str | None = None, ip: str | None = None) -> None:
    with store.session() as s:
        r = s.get_one(Replica, rid)
        if state is not None:
            r.state = r.nodes[0].state = state
        if ip is not None:
            r.nodes[0].private_ip = ip


def _watch(
    c: ControlPlaneClient, timeout: float | None = None, **kw: Any
) -> Iterator[pb.EndpointsSnapshot]:
    return iter(c.stub.WatchEndpoints(pb.WatchEndpointsRequest(**kw), timeout=timeout))


def _replicas(endpoints: Iterable[pb.Endpoint]) -> list[str]:
    return sorted(e.replica_id for e in endpoints)


def _quiet(c: ControlPlaneClient, since: int, **kw: Any) -> None:
    """A watcher resuming at ``since`` gets nothing (for a second)."""
    with pytest.raises(grpc.RpcError) as err:
        next(_watch(c, timeout=1.0, since_revision=since, **kw))
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_parked_warm_replica_is_neither_routed_to_nor_scraped(
    client: ControlPlaneClient, svc: ControlPlaneService, store: Store
) -> None:
    """A warm-pool replica boots to ready before it is stopped (or waits ready): routers
    must not send it traffic it would be stopped with, until it is resumed."""
    _replica(store, "r1", "ready", "10.0.0.1")
    _replica(store, "parked", "ready", "10.0.0.9")
    with store.session() as s:
        s.get_one(Replica, "parked").warm = True
    listed = client.stub.ListEndpoints(pb.ListEndpointsRequest(model="llama-70b")).endpoints
    assert _replicas(listed) == ["r1"]
    assert [e.replica_id for e in svc.scrape_targets()] == ["r1"]
    with store.session() as s:
        s.get_one(Replica, "parked").warm = False  # resumed: it is the model's again
    listed = client.stub.ListEndpoints(pb.ListEndpointsRequest(model="llama-70b")).endpoints
    assert _replicas(listed) == ["parked", "r1"]


def test_the_state_then_a_message_for_each_change(client: ControlPlaneClient, store: Store) -> None:
    _replica(store, "r1", "ready", "10.0.0.1")
    _replica(store, "r2", "running", "10.0.0.2")
    _replica(store, "r3", "ready", None)  # address not known yet: not listed
    stream = _watch(client, model="llama-70b")

    first = next(stream)
    assert first.revision > 0 and _replicas(first.endpoints) == ["r1"]
    (e,) = first.endpoints
    assert (e.customer, e.address, e.node_id, e.engine) == ("acme", "10.0.0.1", "r1-n0", "vllm")
    assert not first.added and not first.removed  # (a first message: take `endpoints`)

    _set(store, "r2", state="ready")  # a replica became ready
    became_ready = next(stream)
    assert became_ready.revision > first.revision
    assert _replicas(became_ready.endpoints) == ["r1", "r2"]
    assert _replicas(became_ready.added) == ["r2"] and not became_ready.removed

    _set(store, "r3", ip="10.0.0.3")  # its address became known
    addressed = next(stream)
    assert _replicas(addressed.added) == ["r3"] and addressed.revision > became_ready.revision

    _set(store, "r1", state="draining")  # one drains
    drained = next(stream)
    assert _replicas(drained.endpoints) == ["r2", "r3"] and _replicas(drained.removed) == ["r1"]

    _set(store, "r2", ip="10.0.0.22")  # a new address: the old one out, the new one in
    moved = next(stream)
    assert [e.address for e in moved.added] == ["10.0.0.22"]
    assert [e.address for e in moved.removed] == ["10.0.0.2"]

    with store.session() as s:  # the model deleted
        s.scalars(select(ModelRow).where(ModelRow.name == "llama-70b")).one().deleted_at = T0
    deleted = next(stream)
    assert not deleted.endpoints and _replicas(deleted.removed) == ["r2", "r3"]
    assert deleted.revision > moved.revision


def test_resuming_at_the_current_revision_waits_for_a_change(
    client: ControlPlaneClient, store: Store, svc: ControlPlaneService
) -> None:
    _replica(store, "r1", "ready", "10.0.0.1")
    current = next(_watch(client, model="llama-70b")).revision
    _quiet(client, current, model="llama-70b")

    # Nothing in the selection changed: another model's replicas, an override, a replica
    # still starting. The revision stays.
    _replica(store, "other", "ready", "10.0.9.9", model="llama-8b")
    svc.pause_model("acme", "llama-70b", True)
    _replica(store, "r2", "running", "10.0.0.2")
    assert svc.endpoints_snapshot(model="llama-70b").revision == current
    _quiet(client, current, model="llama-70b")

    stream = _watch(client, since_revision=current, model="llama-70b")
    threading.Timer(0.3, _set, (store, "r2"), {"state": "ready"}).start()
    changed = next(stream)
    assert changed.revision > current and _replicas(changed.endpoints) == ["r1", "r2"]
    assert not changed.added  # (what the client had at `since` is not known to the server)


def test_resuming_at_another_revision_gets_the_state_at_once(
    client: ControlPlaneClient, store: Store
) -> None:
    _replica(store, "r1", "ready", "10.0.0.1")
    old = next(_watch(client)).revision
    _replica(store, "r2", "ready", "10.0.0.2")
    for since in (old, 10**12):  # behind, or from some other database
        got = next(_watch(client, timeout=5, since_revision=since))
        assert got.revision > old and _replicas(got.endpoints) == ["r1", "r2"]


def test_an_unknown_model_is_an_empty_list_at_revision_zero(client: ControlPlaneClient) -> None:
    got = next(_watch(client, timeout=5, customer="acme", model="no-such-model"))
    assert (got.revision, list(got.endpoints)) == (0, [])


def test_the_revision_survives_a_restart_and_is_shared_by_daemons_of_one_database(
    db_url: str, store: Store, svc: ControlPlaneService
) -> None:
    _replica(store, "r1", "ready", "10.0.0.1")
    first = serve(svc, "127.0.0.1:0", stream_poll_s=POLL_S)
    with ControlPlaneClient(f"127.0.0.1:{first.port}") as c:
        before = next(_watch(c, timeout=5)).revision
    first.stop(grace=0)
    store.close()

    # A restart: a new store and server on the same database, and a second daemon beside it.
    daemons = [Store.from_url(db_url), Store.from_url(db_url)]
    servers = [serve(ControlPlaneService(s), "127.0.0.1:0", stream_poll_s=POLL_S) for s in daemons]
    clients = [ControlPlaneClient(f"127.0.0.1:{srv.port}") for srv in servers]
    try:
        for c in clients:
            again = next(_watch(c, timeout=5))
            assert again.revision == before and _replicas(again.endpoints) == ["r1"]
            _quiet(c, before)
        streams = [_watch(c, since_revision=before) for c in clients]
        _replica(daemons[0], "r2", "ready", "10.0.0.2")
        after = [next(stream) for stream in streams]
        assert after[0].revision == after[1].revision > before
        assert all(_replicas(a.endpoints) == ["r1", "r2"] for a in after)
    finally:
        for c in clients:
            c.close()
        for srv in servers:
            srv.stop(grace=0)
        for s in daemons:
            s.close()


def test_concurrent_readers_never_give_one_revision_to_two_sets(
    db_url: str, store: Store, svc: ControlPlaneService
) -> None:
    """Readers on two stores (two daemons) while the set changes: each revision names one
    set, and each reader sees revisions only grow."""
    services = [svc, ControlPlaneService(other := Store.from_url(db_url))]
    seen: dict[int, set[tuple[str, ...]]] = {}
    done = threading.Event()
    errors: list[BaseException] = []

    def reader(service: ControlPlaneService) -> None:
        last = 0
        try:
            while not done.is_set():
                snap = service.endpoints_snapshot(customer="acme")
                assert snap.revision >= last
                last = snap.revision
                seen.setdefault(snap.revision, set()).add(
                    tuple(sorted(e.replica_id for e in snap.endpoints))
                )
        except BaseException as exc:  # reported below, from the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(s,)) for s in services * 2]
    for t in threads:
        t.start()
    try:
        for i in range(8):
            _replica(store, f"r{i}", "ready", f"10.0.1.{i}")
            if i % 3 == 2:
                _set(store, f"r{i - 1}", state="draining")
    finally:
        done.set()
        for t in threads:
            t.join()
        other.close()
    assert not errors, errors
    assert all(len(sets) == 1 for sets in seen.values()), seen
    final = svc.endpoints_snapshot(customer="acme")
    assert seen[final.revision] == {tuple(sorted(e.replica_id for e in final.endpoints))}


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"since_revision": -1}, "since_revision"),
        ({"model": "Llama_70B"}, "model"),
        ({"customer": "acme corp"}, "customer"),
    ],
)
def test_bad_fields_are_invalid_argument_naming_the_field(
    client: ControlPlaneClient, request_fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        next(_watch(client, timeout=5, **request_fields))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in error_details(err.value).field_violations] == [field]


def test_the_token_is_required(svc: ControlPlaneService) -> None:
    srv = serve(svc, "127.0.0.1:0", token="s3cret", stream_poll_s=POLL_S)
    try:
        with ControlPlaneClient(f"127.0.0.1:{srv.port}", token="wrong") as c:
            with pytest.raises(grpc.RpcError) as err:
                next(_watch(c, timeout=5))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with ControlPlaneClient(f"127.0.0.1:{srv.port}", token="s3cret") as c:
            assert next(c.watch_endpoints(pb.WatchEndpointsRequest())).revision == 0
    finally:
        srv.stop(grace=0)


def test_the_stream_ends_on_cancel_and_when_the_server_stops(
    client: ControlPlaneClient, svc: ControlPlaneService
) -> None:
    call = client.stub.WatchEndpoints(pb.WatchEndpointsRequest())
    next(call)
    call.cancel()
    with pytest.raises(grpc.RpcError) as err:
        next(call)
    assert err.value.code() == grpc.StatusCode.CANCELLED

    srv = serve(svc, "127.0.0.1:0", stream_poll_s=POLL_S)
    with ControlPlaneClient(f"127.0.0.1:{srv.port}") as c:
        stream = c.watch_endpoints(pb.WatchEndpointsRequest())
        next(stream)
        threading.Timer(0.3, srv.stop, kwargs={"grace": 2}).start()
        assert list(stream) == []  # ends (status OK) instead of hanging
