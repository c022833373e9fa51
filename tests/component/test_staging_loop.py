"""The staging job (controlplane/loop/staging.py) through the control loop, against moto's
S3 (server mode, behind the fault proxy) and the real store on SQLite and PostgreSQL:
copies follow placement, advance within the bandwidth limit, survive a lost answer, are
verified, serve new nodes, are fetched again when corrupted, evicted least recently used,
and every failure leaves nodes on the origin with an event."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.staging import staged_copy
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.node_boot import node_boot
from controlplane.resolvers import CloudResolver, SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Event, Pool, Replica, WeightCopy
from controlplane.telemetry import Metrics
from providers.credentials import ExternalIdGenerator
from providers.sim import SimCloud
from schema.policy import Model as ModelSpec
from schema.types import Cloud
from tests.component.oncall_kit import T0, add_replica
from tests.fakes.moto_server import MotoEmulator, moto, moto_server
from tests.policy_texts import STAGING_POLICY
from tests.providers.aws.test_staging_objects import PARTS, put_multipart

__all__ = ["moto", "moto_server"]

MiB = 1024 * 1024
EAST = "acme/acme-aws/us-east-1/p5.48xlarge"
POLICY = STAGING_POLICY


class Clock:
    def __init__(self) -> None:
        self.t = T0.timestamp()

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def s3(moto: MotoEmulator) -> Any:
    moto.reset_state()
    client = boto3.client("s3", region_name="us-east-1", endpoint_url=moto.direct_url)
    for bucket in ("acme-origin", "acme-weights-us-east-1", "acme-weights-us-west-2"):
        client.create_bucket(Bucket=bucket)
    put_multipart(client, "llama/model.safetensors", PARTS)
    client.put_object(Bucket="acme-origin", Key="llama/config.json", Body=b'{"layers": 80}')
    return client


@pytest.fixture
def world(store: Store, moto: MotoEmulator, s3: Any) -> Iterator[tuple[ControlLoop, Clock]]:
    ControlPlaneService(store).apply_policy(POLICY, source="acme.yaml", applied_by="test")
    clock = Clock()
    ids = ExternalIdGenerator(secret=f"staging-test-{uuid.uuid4().hex}".encode())
    tuning = replace(Tuning(), staging_bytes_per_tick=5 * MiB, staging_max_concurrent=1)
    ctx = LoopContext(
        store=store,
        providers=CloudResolver(ids, {Cloud.AWS: moto.endpoint_url}),
        metrics_source=SyntheticTraffic({}),
        health=SimHealth(SimCloud()),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=tuning,
        clock=clock,
    )
    yield ControlLoop(ctx), clock


def copies(store: Store) -> dict[str, WeightCopy]:
    with store.session() as s:
        return {r.region: r for r in s.scalars(select(WeightCopy))}


def events(store: Store, kind: str) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(Event.message).where(Event.kind == kind)))


def tick(loop: ControlLoop, clock: Clock, n: int = 1) -> None:
    for _ in range(n):
        clock.t += 30
        loop.stage_weights()


def uri_for_a_new_node(store: Store, region: str) -> str | None:
    with store.session() as s:
        pool = s.get(Pool, f"acme/acme-aws/{region}/p5.48xlarge")
        assert pool is not None
        staged = staged_copy(s, "acme", "llama", "acme-aws", region, T0)
        spec = ModelSpec.model_validate(
            {
                "name": "llama",
                "shapes": [{"shape": "8xH100", "max_concurrency": 64}],
                "weights": {"uri": "s3://acme-origin/llama/", "size_gb": 0.016},
            }
        )
        return node_boot("acme", spec, pool, "n-1", staged_uri=staged).weights_uri


def test_copies_follow_placement_resume_after_a_lost_answer_and_serve_new_nodes(
    world: tuple[ControlLoop, Clock], store: Store, moto: MotoEmulator, s3: Any
) -> None:
    loop, clock = world
    add_replica(store, "llama", EAST, "ready", ["ready"])
    tick(loop, clock)
    rows = copies(store)
    # Where the replica runs, and the next region placement would pick.
    assert sorted(rows) == ["us-east-1", "us-west-2"]
    east = rows["us-east-1"]
    assert (east.state, east.reason) == ("copying", "replicas run here")
    assert rows["us-west-2"].reason == "placement's choice #1 ahead"
    assert east.dest_uri == "s3://acme-weights-us-east-1/gpucap-weights/acme/llama/"
    assert 0 < east.bytes_done < east.bytes_total == sum(map(len, PARTS)) + 14
    assert uri_for_a_new_node(store, "us-east-1") == "s3://acme-origin/llama/"  # not yet

    moto.drop_next_response("UploadPartCopy")  # copied at the cloud, the answer lost
    tick(loop, clock)
    assert copies(store)["us-east-1"].state == "copying"
    tick(loop, clock, 6)
    rows = copies(store)
    assert {r.state for r in rows.values()} == {"ready"}
    for region in ("us-east-1", "us-west-2"):
        got = s3.get_object(
            Bucket=f"acme-weights-{region}", Key="gpucap-weights/acme/llama/model.safetensors"
        )
        assert (
            got["ETag"]
            == s3.head_object(Bucket="acme-origin", Key="llama/model.safetensors")["ETag"]
        )
    assert len(events(store, "staging.ready")) == 2
    assert uri_for_a_new_node(store, "us-east-1") == rows["us-east-1"].dest_uri
    assert not s3.list_multipart_uploads(Bucket="acme-weights-us-east-1").get("Uploads")


def test_a_corrupted_copy_is_detected_and_fetched_again(
    world: tuple[ControlLoop, Clock], store: Store, s3: Any
) -> None:
    loop, clock = world
    add_replica(store, "llama", EAST, "ready", ["ready"])
    tick(loop, clock, 8)
    assert copies(store)["us-east-1"].state == "ready"
    key = "gpucap-weights/acme/llama/config.json"
    s3.put_object(Bucket="acme-weights-us-east-1", Key=key, Body=b'{"layers": 81}')
    clock.t += loop.ctx.tuning.staging_verify_every_s
    tick(loop, clock)
    assert copies(store)["us-east-1"].state in ("copying", "ready")
    [message] = events(store, "staging.corrupt")
    assert "us-east-1" in message and "config.json" in message
    tick(loop, clock, 2)
    assert copies(store)["us-east-1"].state == "ready"
    body = s3.get_object(Bucket="acme-weights-us-east-1", Key=key)["Body"].read()
    assert body == b'{"layers": 80}'


def test_a_missing_origin_leaves_nodes_on_the_origin_path_with_an_event(
    world: tuple[ControlLoop, Clock], store: Store, s3: Any
) -> None:
    loop, clock = world
    s3.delete_objects(
        Bucket="acme-origin",
        Delete={"Objects": [{"Key": "llama/model.safetensors"}, {"Key": "llama/config.json"}]},
    )
    add_replica(store, "llama", EAST, "ready", ["ready"])
    tick(loop, clock)
    east = copies(store)["us-east-1"]
    assert east.state == "failed" and east.retry_at is not None
    [message, *_] = events(store, "staging.origin_missing")
    assert "nodes there fetch from the origin" in message
    assert uri_for_a_new_node(store, "us-east-1") == "s3://acme-origin/llama/"
    tick(loop, clock)  # not retried before retry_at: no second attempt
    assert copies(store)["us-east-1"].attempts == 1
    put_multipart(s3, "llama/model.safetensors", PARTS)
    clock.t += loop.ctx.tuning.staging_retry_s
    tick(loop, clock, 6)
    assert copies(store)["us-east-1"].state == "ready"


def test_the_least_recently_used_copy_is_evicted_when_another_needs_the_room(
    world: tuple[ControlLoop, Clock], store: Store, s3: Any
) -> None:
    loop, clock = world
    ControlPlaneService(store).apply_policy(
        POLICY.replace("budget_gb: 1", "budget_gb: 0.02").replace(
            "regions_ahead: 1", "regions_ahead: 0"
        )
        + POLICY[POLICY.index("  - name: llama") :]
        .replace("name: llama", "name: qwen")
        .replace("acme-origin/llama/", "acme-origin/qwen/"),
        source="acme.yaml",
        applied_by="test",
    )
    put_multipart(s3, "qwen/model.safetensors", PARTS)
    rid = add_replica(store, "llama", EAST, "ready", ["ready"])
    tick(loop, clock, 5)
    assert copies(store)["us-east-1"].state == "ready"
    with store.session() as s:  # llama stops running; qwen starts in the same region
        row = s.get(Replica, rid)
        assert row is not None
        row.state = "terminated"
    add_replica(store, "qwen", EAST, "ready", ["ready"])
    tick(loop, clock, 6)
    with store.session() as s:
        rows = {(r.model, r.state) for r in s.scalars(select(WeightCopy))}
    assert rows == {("llama", "evicted"), ("qwen", "ready")}
    [message] = events(store, "staging.evicting")
    assert "least recently used" in message
    left = s3.list_objects_v2(Bucket="acme-weights-us-east-1").get("Contents", [])
    assert {o["Key"].split("/")[2] for o in left} == {"qwen"}


def test_the_simulated_cloud_stages_too_so_the_demo_and_the_simulator_can(store: Store) -> None:
    ControlPlaneService(store).apply_policy(POLICY, source="acme.yaml", applied_by="test")
    world = SimCloud()
    body = b"weights" * 1000
    world.put_object("s3://acme-origin/llama/model.safetensors", len(body), body)
    clock = Clock()
    tuning = replace(Tuning(), staging_bytes_per_tick=3000)
    ctx = LoopContext(
        store=store,
        providers=SimResolver(world),
        metrics_source=SyntheticTraffic({}),
        health=SimHealth(world),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=tuning,
        clock=clock,
    )
    loop = ControlLoop(ctx)
    add_replica(store, "llama", EAST, "ready", ["ready"])
    tick(loop, clock, 4)
    east = copies(store)["us-east-1"]
    assert east.state == "ready" and east.bytes_done == len(body)
    dest = east.dest_uri + "model.safetensors"
    assert world.object_data[dest] == body
    world.object_data[dest] = b"rot" + body[3:]
    clock.t += tuning.staging_verify_every_s
    tick(loop, clock, 4)
    assert len(events(store, "staging.corrupt")) == 1
    assert copies(store)["us-east-1"].state == "ready" and world.object_data[dest] == body
