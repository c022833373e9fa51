"""A node's create is retried with what its first attempt chose: a baked image that became
ready between the attempts does not change the retry (a cloud refuses one idempotency token
with other parameters, and a lost answer may have launched the first already); the next
node takes the new image. On SQLite and PostgreSQL, through the reconciler on the simulated
cloud, which refuses a token reused with other parameters as EC2 does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import LoopContext
from controlplane.loop.reconcile import reconcile
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import MachineImage, Node
from controlplane.telemetry import Metrics
from providers.errors import InvalidRequest
from providers.retry import NO_RETRY
from providers.sim import SimCloud
from schema.types import Cloud
from tests.component.oncall_kit import add_replica
from tests.component.test_image_loop import POLICY, POOL, Clock

RUNTIME = "vllm/vllm-openai:v1"


def _ready_image(store: Store, cloud: SimCloud, now: float) -> str:
    """A baked image of the pool's key, ready now (as the image job leaves one)."""
    image = cloud.new_image("us-east-1", "gpucap-chat-1", account="acme/acme-aws")
    at = datetime.fromtimestamp(now, UTC)
    with store.session() as s:
        s.add(
            MachineImage(
                id="img-1",
                customer="acme",
                account="acme-aws",
                cloud="aws",
                region="us-east-1",
                runtime_image=RUNTIME,
                instance_type="p5.48xlarge",
                state="ready",
                image_name=image.name,
                image_id=image.image_id,
                created_at=at,
                state_at=at,
                ready_at=at,
            )
        )
    return image.image_id


def _node(store: Store, node_id: str) -> Node:
    with store.session() as s:
        return s.get_one(Node, node_id)


def test_a_retry_sends_what_the_first_attempt_chose(store: Store) -> None:
    ControlPlaneService(store).apply_policy(POLICY.format(image=RUNTIME), "a.yaml", "alice")
    first = add_replica(store, "chat", POOL, "pending", ["pending"], rid="r-first")
    with store.session() as s:
        for n in s.scalars(select(Node)):
            n.instance_id, n.zone = None, None  # intents, not yet created
    clock = Clock()
    cloud = SimCloud(clock=clock)
    ctx = LoopContext(
        store=store,
        providers=SimResolver(cloud, retry=NO_RETRY),
        metrics_source=SyntheticTraffic({}),
        health=SimHealth(cloud),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        clock=clock,
    )
    cloud.inject(Cloud.AWS, "acme/acme-aws", "transient")  # the first attempt fails
    reconcile(ctx)
    row = _node(store, f"{first}-n0")
    assert (row.attempts, row.instance_id, row.launch_image) == (1, None, None)

    image = _ready_image(store, cloud, clock())  # a baked image is ready meanwhile
    clock.t += 3600  # past any backoff
    reconcile(ctx)
    row = _node(store, f"{first}-n0")
    assert row.instance_id is not None and row.launch_image is None
    [inst] = [i for i in cloud.instances.values() if i.intent_id == row.id]
    assert inst.image is None  # the base image, as the first attempt asked

    # A new intent chooses anew: the baked image.
    second = add_replica(store, "chat", POOL, "pending", ["pending"], rid="r-second")
    with store.session() as s:
        n = s.get_one(Node, f"{second}-n0")
        n.instance_id, n.zone = None, None
    reconcile(ctx)
    assert _node(store, f"{second}-n0").launch_image == image
    [inst2] = [i for i in cloud.instances.values() if i.intent_id == f"{second}-n0"]
    assert inst2.image == image


def test_the_simulated_cloud_refuses_a_token_reused_with_other_parameters() -> None:
    cloud = SimCloud()
    args = dict(instance_type="p5.48xlarge", region="us-east-1", zone=None, tags={})
    inst, created = cloud.launch(Cloud.AWS, "acct", intent_id="n-1", user_data="a", **args)
    again, created_again = cloud.launch(Cloud.AWS, "acct", intent_id="n-1", user_data="a", **args)
    assert created and not created_again and again.instance_id == inst.instance_id
    with pytest.raises(InvalidRequest) as err:
        cloud.launch(Cloud.AWS, "acct", intent_id="n-1", user_data="b", **args)
    assert err.value.code == "IdempotentParameterMismatch"
