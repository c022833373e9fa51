"""The gRPC API end to end over a real channel: an in-process server on a free loopback port,
the real store (SQLite), no mocks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from controlplane.api import ControlPlaneService, StatusView
from controlplane.grpc.client import ControlPlaneClient, error_details, format_problem
from controlplane.grpc.server import (
    GrpcServer,
    InsecureBindError,
    check_bind_allowed,
    is_loopback,
    serve,
)
from controlplane.jobticks import JobTicks
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, Pool, Replica
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.policy_texts import edited, example_policy
from tests.tls_certs import self_signed_localhost

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def job_ticks() -> JobTicks:
    return JobTicks()


@pytest.fixture
def svc(sqlite_store: Store, job_ticks: JobTicks) -> ControlPlaneService:
    return ControlPlaneService(sqlite_store, job_ticks=job_ticks)


@pytest.fixture
def server(svc: ControlPlaneService) -> Iterator[GrpcServer]:
    srv = serve(svc, "127.0.0.1:0")
    yield srv
    srv.stop(grace=0)


@pytest.fixture
def client(server: GrpcServer) -> Iterator[ControlPlaneClient]:
    with ControlPlaneClient(f"127.0.0.1:{server.port}", timeout=10) as c:
        yield c


@pytest.fixture
def applied(client: ControlPlaneClient) -> pb.ApplyPolicyResponse:
    return client.stub.ApplyPolicy(
        pb.ApplyPolicyRequest(yaml=example_policy(), source="policy.yaml", applied_by="alice")
    )


def _fails(call: Any, *args: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call(*args)
    return err.value


def _spec(name: str = "mistral-7b", **kw: Any) -> pb.ModelSpec:
    base: dict[str, Any] = {
        "name": name,
        "shapes": [pb.ShapeOption(shape="1xH100", max_concurrency=16)],
        "max_replicas": 4,
        "clouds": ["aws"],
    }
    base.update(kw)
    return pb.ModelSpec(**base)


# --------------------------------------------------------------------------- policies


def test_validate_policy_reports_problems_without_changing_anything(
    client: ControlPlaneClient, svc: ControlPlaneService
) -> None:
    good = client.stub.ValidatePolicy(pb.ValidatePolicyRequest(yaml=example_policy()))
    assert good.valid and good.customer == "acme" and len(good.sha256) == 64

    bad_text = edited(example_policy(), "max_replicas: 40", "max_replicas: many")
    bad = client.stub.ValidatePolicy(pb.ValidatePolicyRequest(yaml=bad_text, source="p.yaml"))
    assert not bad.valid
    [problem] = bad.problems
    assert (problem.file, problem.field) == ("p.yaml", "models[0].max_replicas")
    assert problem.line == bad_text.splitlines().index("    max_replicas: many") + 1
    assert "integer" in problem.reason
    assert svc.status().customers == 0


def test_apply_and_get_policy(client: ControlPlaneClient, applied: pb.ApplyPolicyResponse) -> None:
    assert applied.changed
    assert (applied.policy.customer, applied.policy.version) == ("acme", 1)
    assert applied.policy.applied_by == "alice" and applied.policy.active
    assert applied.policy.applied_at.seconds > 0

    same = client.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=example_policy(), applied_by="bob"))
    assert not same.changed and same.policy.version == 1

    got = client.stub.GetPolicy(pb.GetPolicyRequest())  # the only customer
    assert got.yaml == example_policy() and got.sha256 == applied.policy.sha256
    assert client.stub.GetPolicy(pb.GetPolicyRequest(customer="acme", version=1)).version == 1
    assert _fails(client.stub.GetPolicy, pb.GetPolicyRequest(customer="zz")).code() == (
        grpc.StatusCode.NOT_FOUND
    )


def test_apply_bad_policy_is_invalid_argument_with_every_problem(
    client: ControlPlaneClient, applied: pb.ApplyPolicyResponse
) -> None:
    text = edited(example_policy(), "max_replicas: 40", "max_replicas: -3")
    text = edited(text, "    priority: 50\n", "    priority: 50\n    colour: blue\n")
    err = _fails(
        client.stub.ApplyPolicy, pb.ApplyPolicyRequest(yaml=text, source="bad.yaml", applied_by="m")
    )

    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = error_details(err)
    assert [f for f, _ in details.field_violations] == [
        "models[0].max_replicas",
        "models[2].colour",
    ]
    lines = [format_problem(p) for p in details.policy_problems]
    lines_of_text = text.splitlines()
    assert lines == [
        f"bad.yaml:{lines_of_text.index('    max_replicas: -3') + 1}:5: models[0].max_replicas: "
        "Input should be greater than or equal to 0 (got -3)",
        f"bad.yaml:{lines_of_text.index('    colour: blue') + 1}:5: models[2].colour: "
        "unknown field",
    ]
    active = client.stub.GetPolicy(pb.GetPolicyRequest(customer="acme"))
    assert active.version == 1 and active.sha256 == applied.policy.sha256


# --------------------------------------------------------------------------- models


def test_model_lifecycle(client: ControlPlaneClient, applied: pb.ApplyPolicyResponse) -> None:
    stub = client.stub
    deployed = stub.DeployModel(pb.DeployModelRequest(customer="acme", spec=_spec()))
    assert (deployed.source, deployed.spec.max_replicas, deployed.spec.min_replicas) == (
        "api",
        4,
        0,
    )
    assert deployed.spec.target.metric == "concurrency"  # the policy default was applied
    assert not deployed.HasField("pinned_replicas") and not deployed.HasField("deleted_at")

    got = stub.GetModel(pb.GetModelRequest(customer="acme", name="mistral-7b"))
    assert got.spec == deployed.spec
    names = [m.name for m in stub.ListModels(pb.ListModelsRequest(customer="acme")).models]
    assert names == ["deepseek-r1", "llama-70b", "llama-8b", "mistral-7b"]

    updated = stub.UpdateModel(
        pb.UpdateModelRequest(
            customer="acme",
            spec=pb.ModelSpec(name="mistral-7b", max_replicas=9, latency_slo_ms=700),
            update_mask=FieldMask(paths=["max_replicas"]),
        )
    )
    assert updated.spec.max_replicas == 9 and updated.spec.latency_slo_ms == 2000

    pinned = stub.PinModel(pb.PinModelRequest(customer="acme", name="mistral-7b", replicas=3))
    assert pinned.pinned_replicas == 3 and pinned.HasField("pinned_replicas")
    unpinned = stub.PinModel(pb.PinModelRequest(customer="acme", name="mistral-7b"))
    assert not unpinned.HasField("pinned_replicas")
    assert stub.PauseModel(
        pb.PauseModelRequest(customer="acme", name="llama-8b", paused=True)
    ).paused

    deleted = stub.DeleteModel(pb.DeleteModelRequest(customer="acme", name="mistral-7b"))
    assert deleted.HasField("deleted_at")
    names = [m.name for m in stub.ListModels(pb.ListModelsRequest()).models]
    assert "mistral-7b" not in names
    with_deleted = stub.ListModels(pb.ListModelsRequest(include_deleted=True)).models
    assert "mistral-7b" in [m.name for m in with_deleted]


def test_deploy_with_scaling_behaviour_round_trips(
    client: ControlPlaneClient, applied: pb.ApplyPolicyResponse
) -> None:
    spec = _spec(scaling=pb.ScalingBehavior(scale_up_delay_s=30, max_scale_down_rate=4))
    deployed = client.stub.DeployModel(pb.DeployModelRequest(customer="acme", spec=spec))
    got = client.stub.GetModel(pb.GetModelRequest(customer="acme", name=spec.name)).spec.scaling
    assert (got.scale_up_delay_s, got.max_scale_down_rate) == (30, 4)
    assert got.max_scale_up_rate == 1000  # the default, stored with the spec
    assert not got.HasField("scale_down_delay_s")  # unset: the daemon's default applies
    assert deployed.spec.scaling == got


def test_deploy_with_a_runtime_round_trips(
    client: ControlPlaneClient, applied: pb.ApplyPolicyResponse
) -> None:
    runtime = pb.Runtime(engine="sglang", args=["--trust-remote-code"], env={"A": "1"}, port=9000)
    client.stub.DeployModel(pb.DeployModelRequest(customer="acme", spec=_spec(runtime=runtime)))
    got = client.stub.GetModel(pb.GetModelRequest(customer="acme", name="mistral-7b")).spec.runtime
    assert (got.engine, list(got.args), dict(got.env), got.port) == (
        "sglang",
        ["--trust-remote-code"],
        {"A": "1"},
        9000,
    )
    assert not got.HasField("image")  # unset: the engine's own


# Every ModelSpec field set, to values other than the defaults: what GetModel returns must
# be exactly this (nothing dropped or defaulted on the way through the store).
FULL_SPEC = pb.ModelSpec(
    name="mistral-7b",
    shapes=[
        pb.ShapeOption(shape="8xH100", max_concurrency=64, tokens_per_s=2400),
        pb.ShapeOption(shape="2x8xH100", max_concurrency=100, tokens_per_s=3000),
    ],
    min_replicas=1,
    max_replicas=6,
    target=pb.ScalingTarget(metric="tokens_per_s", utilization=0.5),
    latency_slo_ms=900,
    clouds=["aws", "gcp"],
    regions=["us-east-1", "us-central1"],
    priority=300,
    weights=pb.Weights(
        uri="s3://acme-models/mistral/", size_gb=14.5, mirrors=["gs://acme-models/mistral/"]
    ),
    scale_to_zero_grace_s=120,
    scaling=pb.ScalingBehavior(
        scale_up_delay_s=30, scale_down_delay_s=90, max_scale_up_rate=4, max_scale_down_rate=3
    ),
    runtime=pb.Runtime(
        engine="sglang",
        image="ghcr.io/acme/sglang:1",
        args=["--trust-remote-code"],
        env={"A": "1"},
        port=9000,
        tensor_parallel=8,
        pipeline_parallel=1,
    ),
    staging=pb.Staging(enabled=True, regions_ahead=3),
    baked_image=pb.BakedImage(enabled=False),
    warm_pool=pb.WarmPool(max_nodes=4, mode="ready", disk_gb=500),
    health=pb.Health(failure_threshold=5, timeout_s=1.5, drain_timeout_s=45),
)


def test_every_spec_field_round_trips_through_deploy_and_get(
    client: ControlPlaneClient, applied: pb.ApplyPolicyResponse
) -> None:
    deployed = client.stub.DeployModel(pb.DeployModelRequest(customer="acme", spec=FULL_SPEC))
    got = client.stub.GetModel(pb.GetModelRequest(customer="acme", name=FULL_SPEC.name))
    assert got.spec == FULL_SPEC, got.spec
    assert deployed.spec == FULL_SPEC
    [listed] = [
        m for m in client.stub.ListModels(pb.ListModelsRequest()).models if m.name == "mistral-7b"
    ]
    assert listed.spec == FULL_SPEC


def test_cold_start_settings_default_as_in_a_policy_file(
    client: ControlPlaneClient, applied: pb.ApplyPolicyResponse
) -> None:
    """Set but empty messages take the policy's defaults; unset ones stay unset."""
    spec = _spec(
        weights=pb.Weights(uri="s3://acme-models/mistral/", size_gb=14.5),
        staging=pb.Staging(),
        baked_image=pb.BakedImage(),
        warm_pool=pb.WarmPool(max_nodes=2),
    )
    got = client.stub.DeployModel(pb.DeployModelRequest(customer="acme", spec=spec)).spec
    assert (got.staging.enabled, got.staging.regions_ahead, got.baked_image.enabled) == (
        True,
        1,
        True,
    )
    assert (got.warm_pool.max_nodes, got.warm_pool.mode, got.warm_pool.disk_gb) == (
        2,
        "stopped",
        200,
    )
    assert (got.health.failure_threshold, got.health.drain_timeout_s) == (3, 30)
    assert list(got.weights.mirrors) == []
    bare = client.stub.GetModel(pb.GetModelRequest(customer="acme", name="llama-8b")).spec
    assert not bare.HasField("staging") and not bare.HasField("baked_image")
    assert not bare.HasField("warm_pool") and bare.health.timeout_s == 2.0

    # UpdateModel with a mask: a named field set changes it, a named field unset drops it.
    updated = client.stub.UpdateModel(
        pb.UpdateModelRequest(
            customer="acme",
            spec=pb.ModelSpec(name="mistral-7b", warm_pool=pb.WarmPool(max_nodes=3, mode="ready")),
            update_mask=FieldMask(paths=["warm_pool", "staging"]),
        )
    ).spec
    assert (updated.warm_pool.max_nodes, updated.warm_pool.mode) == (3, "ready")
    assert not updated.HasField("staging") and updated.baked_image.enabled


def test_a_policy_files_cold_start_settings_show_in_get_model(
    client: ControlPlaneClient,
) -> None:
    text = edited(
        example_policy(),
        "      uri: s3://acme-models/llama-3.1-70b-instruct/\n      size_gb: 141\n",
        "      uri: s3://acme-models/llama-3.1-70b-instruct/\n      size_gb: 141\n"
        "      mirrors: [gs://acme-models/llama-3.1-70b-instruct/]\n"
        "    staging: {regions_ahead: 2}\n"
        "    baked_image: {}\n"
        "    warm_pool: {max_nodes: 2, disk_gb: 300}\n"
        "    health: {failure_threshold: 4}\n",
    )
    client.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=text, source="policy.yaml"))
    got = client.stub.GetModel(pb.GetModelRequest(customer="acme", name="llama-70b"))
    assert got.source == "policy"
    spec = got.spec
    assert list(spec.weights.mirrors) == ["gs://acme-models/llama-3.1-70b-instruct/"]
    assert spec.staging == pb.Staging(enabled=True, regions_ahead=2)
    assert spec.baked_image == pb.BakedImage(enabled=True)
    assert spec.warm_pool == pb.WarmPool(max_nodes=2, mode="stopped", disk_gb=300)
    assert spec.health == pb.Health(failure_threshold=4, timeout_s=2.0, drain_timeout_s=30)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (_spec(min_replicas=5, max_replicas=2), "spec.min_replicas"),
        (
            _spec(shapes=[pb.ShapeOption(shape="16xH100", max_concurrency=1)]),
            "spec.shapes[0].shape",
        ),
        (_spec(shapes=[pb.ShapeOption(shape="1xH100")]), "spec.shapes[0].max_concurrency"),
        (_spec(clouds=["azure"]), "spec.clouds[0]"),
        (_spec(regions=["mars-north-1"]), "spec.regions[0]"),
        (_spec(target=pb.ScalingTarget(metric="vibes")), "spec.target.metric"),
        (_spec(target=pb.ScalingTarget(utilization=1.5)), "spec.target.utilization"),
        (
            _spec(scaling=pb.ScalingBehavior(max_scale_down_rate=0.5)),
            "spec.scaling.max_scale_down_rate",
        ),
        (_spec(scaling=pb.ScalingBehavior(scale_up_delay_s=-1)), "spec.scaling.scale_up_delay_s"),
        (_spec(name=""), "spec.name"),
        (pb.ModelSpec(name="x"), "spec.shapes"),
        (_spec(runtime=pb.Runtime(engine="tgi")), "spec.runtime.engine"),
        (_spec(runtime=pb.Runtime(port=22)), "spec.runtime.port"),
        (_spec(runtime=pb.Runtime(tensor_parallel=2)), "spec.runtime.tensor_parallel"),
        (_spec(warm_pool=pb.WarmPool(max_nodes=0)), "spec.warm_pool.max_nodes"),
        (_spec(warm_pool=pb.WarmPool(max_nodes=1001)), "spec.warm_pool.max_nodes"),
        (_spec(warm_pool=pb.WarmPool()), "spec.warm_pool.max_nodes"),  # required
        (  # a bound that holds no replica of the smallest shape (a 2-node gang)
            _spec(
                shapes=[pb.ShapeOption(shape="2x8xH100", max_concurrency=1)],
                warm_pool=pb.WarmPool(max_nodes=1),
            ),
            "spec.warm_pool.max_nodes",
        ),
        (_spec(warm_pool=pb.WarmPool(max_nodes=1, mode="hot")), "spec.warm_pool.mode"),
        (_spec(warm_pool=pb.WarmPool(max_nodes=1, disk_gb=0)), "spec.warm_pool.disk_gb"),
        (
            _spec(
                weights=pb.Weights(uri="s3://m/", size_gb=1),
                staging=pb.Staging(regions_ahead=21),
            ),
            "spec.staging.regions_ahead",
        ),
        (_spec(staging=pb.Staging()), "spec.staging"),  # nothing to stage: no weights
        (
            _spec(weights=pb.Weights(uri="s3://m/", size_gb=1, mirrors=["s3://other/"])),
            "spec.weights.mirrors[0]",
        ),
        (_spec(health=pb.Health(failure_threshold=0)), "spec.health.failure_threshold"),
        (_spec(health=pb.Health(timeout_s=0)), "spec.health.timeout_s"),
    ],
)
def test_deploy_invalid_spec_is_invalid_argument_naming_the_field(
    client: ControlPlaneClient, applied: pb.ApplyPolicyResponse, spec: pb.ModelSpec, field: str
) -> None:
    err = _fails(client.stub.DeployModel, pb.DeployModelRequest(customer="acme", spec=spec))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(err).field_violations[0][0] == field
    assert field in (err.details() or "")


# Every RPC with bad input: the status says what is wrong, never INTERNAL.
BAD_REQUESTS: list[tuple[str, Any, grpc.StatusCode]] = [
    ("ApplyPolicy", pb.ApplyPolicyRequest(yaml=""), grpc.StatusCode.INVALID_ARGUMENT),
    ("ApplyPolicy", pb.ApplyPolicyRequest(yaml="{{{"), grpc.StatusCode.INVALID_ARGUMENT),
    ("ApplyPolicy", pb.ApplyPolicyRequest(yaml="- a\n- b\n"), grpc.StatusCode.INVALID_ARGUMENT),
    ("GetPolicy", pb.GetPolicyRequest(customer="ghost"), grpc.StatusCode.NOT_FOUND),
    ("DeployModel", pb.DeployModelRequest(spec=_spec()), grpc.StatusCode.INVALID_ARGUMENT),
    (
        "DeployModel",
        pb.DeployModelRequest(customer="ghost", spec=_spec()),
        grpc.StatusCode.NOT_FOUND,
    ),
    ("DeployModel", pb.DeployModelRequest(customer="acme"), grpc.StatusCode.INVALID_ARGUMENT),
    (
        "DeployModel",
        pb.DeployModelRequest(customer="acme", spec=_spec(name="llama-8b")),
        grpc.StatusCode.ALREADY_EXISTS,
    ),
    ("UpdateModel", pb.UpdateModelRequest(customer="acme"), grpc.StatusCode.INVALID_ARGUMENT),
    (
        "UpdateModel",
        pb.UpdateModelRequest(customer="acme", spec=_spec(name="ghost")),
        grpc.StatusCode.NOT_FOUND,
    ),
    (
        "UpdateModel",
        pb.UpdateModelRequest(
            customer="acme", spec=pb.ModelSpec(name="llama-8b"), update_mask=FieldMask(paths=["x"])
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    ),
    (
        "UpdateModel",
        pb.UpdateModelRequest(
            customer="acme",
            spec=pb.ModelSpec(name="llama-8b", max_replicas=3),
            update_mask=FieldMask(paths=["max_replicas"]),
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    ),
    ("DeleteModel", pb.DeleteModelRequest(customer="acme"), grpc.StatusCode.INVALID_ARGUMENT),
    ("DeleteModel", pb.DeleteModelRequest(customer="acme", name="x"), grpc.StatusCode.NOT_FOUND),
    ("GetModel", pb.GetModelRequest(), grpc.StatusCode.INVALID_ARGUMENT),
    ("GetModel", pb.GetModelRequest(customer="acme", name="ghost"), grpc.StatusCode.NOT_FOUND),
    (
        "PinModel",
        pb.PinModelRequest(customer="acme", name="llama-8b", replicas=10_000),
        grpc.StatusCode.INVALID_ARGUMENT,
    ),
    ("PinModel", pb.PinModelRequest(customer="acme", name="x"), grpc.StatusCode.NOT_FOUND),
    ("PauseModel", pb.PauseModelRequest(name="llama-8b"), grpc.StatusCode.INVALID_ARGUMENT),
    ("CordonPool", pb.CordonPoolRequest(), grpc.StatusCode.INVALID_ARGUMENT),
    ("CordonPool", pb.CordonPoolRequest(pool_id="a/b/c/d"), grpc.StatusCode.NOT_FOUND),
    ("ListNodes", pb.ListNodesRequest(states=["asleep"]), grpc.StatusCode.INVALID_ARGUMENT),
    ("ListWarmPools", pb.ListWarmPoolsRequest(model="ghost"), grpc.StatusCode.NOT_FOUND),
    ("ListWarmPools", pb.ListWarmPoolsRequest(customer="ghost"), grpc.StatusCode.NOT_FOUND),
]


@pytest.mark.parametrize(
    ("method", "request_", "code"),
    BAD_REQUESTS,
    ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(BAD_REQUESTS)],
)
def test_bad_input_never_reaches_internal(
    client: ControlPlaneClient,
    applied: pb.ApplyPolicyResponse,
    method: str,
    request_: Any,
    code: grpc.StatusCode,
) -> None:
    err = _fails(client.call, method, request_)
    assert err.code() == code, err.details()
    assert err.details()
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        assert error_details(err).field_violations, "INVALID_ARGUMENT must name a field"


def test_unexpected_exception_is_internal_without_leaking_details(sqlite_store: Store) -> None:
    class BrokenService(ControlPlaneService):
        def status(self) -> StatusView:
            raise RuntimeError("secret internals")

    srv = serve(BrokenService(sqlite_store), "127.0.0.1:0")
    try:
        with ControlPlaneClient(f"127.0.0.1:{srv.port}") as c:
            err = _fails(c.stub.GetStatus, pb.GetStatusRequest())
    finally:
        srv.stop(grace=0)
    assert err.code() == grpc.StatusCode.INTERNAL
    assert "secret internals" not in (err.details() or "")


# --------------------------------------------------------------------------- fleet, status


def _seed_nodes(store: Store) -> None:
    """Replica and node rows as the reconciler writes them."""
    with store.session() as s:
        model = s.query(ModelRow).filter_by(name="llama-70b").one()
        pool = s.get(Pool, "acme/acme-aws/us-east-1/p5.48xlarge")
        assert pool is not None
        s.add(
            Replica(
                id="r1",
                model_id=model.id,
                pool_id=pool.id,
                gpu_shape="8xH100",
                state="ready",
                created_at=T0,
            )
        )
        s.flush()
        s.add(
            Node(
                id="n1",
                replica_id="r1",
                pool_id=pool.id,
                customer="acme",
                account="acme-aws",
                cloud="aws",
                region="us-east-1",
                zone="us-east-1a",
                instance_type="p5.48xlarge",
                idempotency_token="tok-1",
                instance_id="i-0abc",
                state="ready",
                pending_at=T0,
                ready_at=T0,
            )
        )


def test_nodes_pools_and_status(
    client: ControlPlaneClient,
    applied: pb.ApplyPolicyResponse,
    sqlite_store: Store,
    svc: ControlPlaneService,
    job_ticks: JobTicks,
) -> None:
    _seed_nodes(sqlite_store)
    stub = client.stub
    [node] = stub.ListNodes(pb.ListNodesRequest(customer="acme", model="llama-70b")).nodes
    assert (node.id, node.model, node.cloud, node.instance_id, node.state) == (
        "n1",
        "llama-70b",
        "aws",
        "i-0abc",
        "ready",
    )
    assert node.ready_at.ToDatetime(tzinfo=UTC) == T0 and not node.HasField("failed_at")
    assert stub.ListNodes(pb.ListNodesRequest(states=["pending"])).nodes == []

    pools = {p.id: p for p in stub.ListPools(pb.ListPoolsRequest(customer="acme")).pools}
    east = pools["acme/acme-aws/us-east-1/p5.48xlarge"]
    assert (east.tier, east.committed, dict(east.nodes_by_state)) == ("committed", 2, {"ready": 1})
    oci = stub.ListPools(pb.ListPoolsRequest(cloud="oci")).pools
    assert oci and {p.tier for p in oci} == {"shared"}
    cordoned = stub.CordonPool(pb.CordonPoolRequest(pool_id=east.id, cordoned=True, reason="x"))
    assert cordoned.cordoned

    model = stub.GetModel(pb.GetModelRequest(customer="acme", name="llama-70b"))
    assert model.ready_replicas == 1 and dict(model.replicas_by_state) == {"ready": 1}

    job_ticks.record("reconcile", T0, 0.5, error="boom")
    status = stub.GetStatus(pb.GetStatusRequest())
    assert (status.customers, status.models, status.pools) == (1, 3, len(pools))
    assert dict(status.nodes_by_state) == {"ready": 1}
    [job] = status.jobs
    assert (job.job, job.runs, job.failures, job.last_error) == ("reconcile", 1, 1, "boom")
    assert status.version and status.uptime_s >= 0
    assert status.last_event_id == svc.last_event_id() > 0


# --------------------------------------------------------------------------- events


def test_list_events(client: ControlPlaneClient, applied: pb.ApplyPolicyResponse) -> None:
    events = client.stub.ListEvents(pb.ListEventsRequest(limit=1000)).events
    assert "policy.applied" in [e.kind for e in events]
    after = client.stub.ListEvents(pb.ListEventsRequest(since_id=events[0].id)).events
    assert [e.id for e in after] == [e.id for e in events[1:]]


def test_stream_events_sends_backlog_then_new_events_until_cancelled(
    client: ControlPlaneClient, applied: pb.ApplyPolicyResponse
) -> None:
    stream = client.stub.StreamEvents(pb.StreamEventsRequest(tail=2))
    got: list[pb.Event] = [next(stream), next(stream)]  # the backlog
    backlog_last = got[-1].id

    def change() -> None:
        time.sleep(0.2)
        client.stub.PauseModel(pb.PauseModelRequest(customer="acme", name="llama-8b", paused=True))

    threading.Thread(target=change).start()
    new = next(stream)
    assert new.id > backlog_last and new.kind == "model.paused" and new.model == "llama-8b"
    stream.cancel()
    with pytest.raises(grpc.RpcError) as err:
        next(stream)
    assert err.value.code() == grpc.StatusCode.CANCELLED


def test_stream_events_ends_cleanly_when_the_server_stops(
    svc: ControlPlaneService, applied: pb.ApplyPolicyResponse, server: GrpcServer
) -> None:
    # `applied` populated the store through the fixture server; this one is a second server.
    srv = serve(svc, "127.0.0.1:0")
    with ControlPlaneClient(f"127.0.0.1:{srv.port}") as c:
        first = svc.last_event_id()
        stream = c.stub.StreamEvents(pb.StreamEventsRequest(since_id=first - 1))
        assert next(stream).id == first
        threading.Timer(0.3, srv.stop, kwargs={"grace": 2}).start()
        rest = list(stream)  # ends (status OK) instead of hanging
    assert rest == []


# --------------------------------------------------------------------------- health, reflection


def test_health_and_reflection(client: ControlPlaneClient) -> None:
    health = health_pb2_grpc.HealthStub(client.channel)
    for service in ("", "gpucap.v1.ControlPlane"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

    db = ProtoReflectionDescriptorDatabase(client.channel)
    services = db.get_services()
    assert "gpucap.v1.ControlPlane" in services
    assert "grpc.health.v1.Health" in services
    desc = db.FindFileContainingSymbol("gpucap.v1.ControlPlane")
    assert desc.package == "gpucap.v1"


# --------------------------------------------------------------------------- transport security


@pytest.mark.parametrize(
    ("addr", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("127.5.5.5:1", True),
        ("[::1]:50051", True),
        ("localhost:50051", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        ("10.1.2.3:50051", False),
        ("gpucap.internal:50051", False),
    ],
)
def test_is_loopback(addr: str, loopback: bool) -> None:
    assert is_loopback(addr) is loopback


def test_refuses_non_loopback_without_tls_and_token(
    svc: ControlPlaneService, tmp_path: Path
) -> None:
    certs = self_signed_localhost(tmp_path)
    with pytest.raises(InsecureBindError, match="TLS .* and an API token"):
        serve(svc, "0.0.0.0:0")
    with pytest.raises(InsecureBindError, match="without an API token"):
        serve(svc, "0.0.0.0:0", tls_cert=certs.cert, tls_key=certs.key)
    with pytest.raises(InsecureBindError, match=r"without TLS \(certificate \+ key\)"):
        serve(svc, "0.0.0.0:0", token="t0ken")
    # Both configured: allowed (checked without binding a public interface in a test).
    check_bind_allowed("0.0.0.0:50051", tls=True, token=True)


def test_token_is_required_on_every_call(svc: ControlPlaneService) -> None:
    srv = serve(svc, "127.0.0.1:0", token="s3cret")
    addr = f"127.0.0.1:{srv.port}"
    try:
        for token in (None, "wrong"):
            with ControlPlaneClient(addr, token=token) as c:
                err = _fails(c.stub.GetStatus, pb.GetStatusRequest())
                assert err.code() == grpc.StatusCode.UNAUTHENTICATED
                stream = c.stub.StreamEvents(pb.StreamEventsRequest())
                assert _fails(next, stream).code() == grpc.StatusCode.UNAUTHENTICATED
                health = health_pb2_grpc.HealthStub(c.channel)
                err = _fails(health.Check, health_pb2.HealthCheckRequest())
                assert err.code() == grpc.StatusCode.UNAUTHENTICATED
        with ControlPlaneClient(addr, token="s3cret") as c:
            assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 0
    finally:
        srv.stop(grace=0)


def test_tls_with_token_on_loopback(svc: ControlPlaneService, tmp_path: Path) -> None:
    certs = self_signed_localhost(tmp_path)
    srv = serve(svc, "127.0.0.1:0", tls_cert=certs.cert, tls_key=certs.key, token="s3cret")
    try:
        with ControlPlaneClient(f"localhost:{srv.port}", token="s3cret", ca_file=certs.cert) as c:
            assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 0
        with ControlPlaneClient(f"127.0.0.1:{srv.port}", token="s3cret", timeout=2) as plain:
            err = _fails(plain.stub.GetStatus, pb.GetStatusRequest())
            assert err.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        srv.stop(grace=0)


def test_event_streams_are_capped_so_unary_calls_keep_working(
    svc: ControlPlaneService, applied: pb.ApplyPolicyResponse
) -> None:
    srv = serve(svc, "127.0.0.1:0", max_workers=4)  # at most 2 streams
    try:
        with ControlPlaneClient(f"127.0.0.1:{srv.port}") as c:
            request = pb.StreamEventsRequest(tail=1)
            open_streams = [c.stub.StreamEvents(request) for _ in range(2)]
            for stream in open_streams:
                next(stream)  # each is now holding its slot
            third = c.stub.StreamEvents(request)
            assert _fails(next, third).code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert c.stub.GetStatus(pb.GetStatusRequest()).customers == 1
            open_streams[0].cancel()
            # The slot frees once the cancelled handler notices (within one poll).
            deadline = time.monotonic() + 5
            while True:
                again = c.stub.StreamEvents(request)
                try:
                    assert next(again).kind
                    break
                except grpc.RpcError as err:
                    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert time.monotonic() < deadline, "slot never freed"
                    time.sleep(0.1)
            again.cancel()
            open_streams[1].cancel()
    finally:
        srv.stop(grace=0)
