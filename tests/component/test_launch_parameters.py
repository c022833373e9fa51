"""A node's create is retried with what its first attempt chose: a baked image or a staged
copy of its weights that became ready between the attempts does not change the retry (a
cloud refuses one idempotency token with other parameters, and a lost answer may have
launched the first already); the next node takes the new image, the new copy. A node's user
data lists every ready staged copy of its cloud, its own account's nearest first, then the
origins. On SQLite and PostgreSQL, through the reconciler on the simulated cloud, which
refuses a token reused with other parameters as EC2 does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import LoopContext
from controlplane.loop.context import BootConfig
from controlplane.loop.reconcile import reconcile
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import MachineImage, Node, WeightCopy
from controlplane.telemetry import Metrics
from providers.errors import InvalidRequest
from providers.retry import NO_RETRY
from providers.sim import SimCloud
from schema.types import Cloud
from tests.component.oncall_kit import add_replica
from tests.component.test_image_loop import POLICY, POOL, Clock
from tests.component.test_node_phases import TOKENS

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


def _intent(store: Store, rid: str) -> str:
    """A replica of chat in POOL whose node is an intent, not yet created."""
    add_replica(store, "chat", POOL, "pending", ["pending"], rid=rid)
    with store.session() as s:
        for n in s.scalars(select(Node).where(Node.replica_id == rid)):
            n.instance_id, n.zone = None, None
    return rid


def _first_attempt_fails(
    store: Store, boot: BootConfig | None = None
) -> tuple[Clock, SimCloud, LoopContext]:
    """A reconcile pass on the simulated cloud whose create fails (a transient error), so
    the intents have made their first attempt and chosen what they launch with."""
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
        boot=boot,
    )
    cloud.inject(Cloud.AWS, "acme/acme-aws", "transient")
    reconcile(ctx)
    return clock, cloud, ctx


def test_a_retry_sends_what_the_first_attempt_chose(store: Store) -> None:
    ControlPlaneService(store).apply_policy(POLICY.format(image=RUNTIME), "a.yaml", "alice")
    first = _intent(store, "r-first")
    clock, cloud, ctx = _first_attempt_fails(store)
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
    second = _intent(store, "r-second")
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


WEIGHTS_POLICY = """\
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    weights:
      uri: gs://acme-origin/chat/
      size_gb: 16
      mirrors: [s3://acme-origin/chat/]
"""


def _copy(store: Store, account: str, region: str, cloud: str = "aws", state: str = "ready") -> str:
    """A staged copy of chat's weights as the staging job leaves one; returns its URI."""
    uri = f"{'gs' if cloud == 'gcp' else 's3'}://{account}-{region}/gpucap-weights/acme/chat/"
    at = datetime(2026, 12, 3, tzinfo=UTC)
    with store.session() as s:
        s.add(
            WeightCopy(
                customer="acme",
                model="chat",
                account=account,
                cloud=cloud,
                region=region,
                source_uri="s3://acme-origin/chat/",
                dest_uri=uri,
                state=state,
                created_at=at,
                updated_at=at,
            )
        )
    return uri


def _sources(user_data: str) -> list[str]:
    files = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
    return str(files["/etc/gpucap/weights.sources"]).splitlines()


def test_a_node_fetches_from_staged_copies_nearest_first_as_its_first_attempt_chose(
    store: Store,
) -> None:
    ControlPlaneService(store).apply_policy(WEIGHTS_POLICY, "a.yaml", "alice")
    far = _copy(store, "acme-aws", "eu-west-1")
    west = _copy(store, "acme-aws", "us-west-2")
    east = _copy(store, "acme-aws", "us-east-2")
    other = _copy(store, "acme-shared", "us-east-1")  # (another account: after its own's)
    _copy(store, "acme-gcp", "us-east1", cloud="gcp")  # (another cloud: its origin serves)
    _copy(store, "acme-aws", "ap-south-1", state="failed")
    first = _intent(store, "r-first")
    clock, cloud, ctx = _first_attempt_fails(
        store, BootConfig(TOKENS, "http://127.0.0.1:9/v1/node-phases")
    )
    # Its cloud's origin before the other's; the copies nearest first, its account's first.
    chosen = [east, west, far, other, "s3://acme-origin/chat/", "gs://acme-origin/chat/"]
    row = _node(store, f"{first}-n0")
    assert (row.attempts, row.launch_weights_uri, row.launch_weights_sources) == (1, None, chosen)

    here = _copy(store, "acme-aws", "us-east-1")  # ready meanwhile, in the node's own site
    clock.t += 3600  # past any backoff
    reconcile(ctx)  # (the simulated cloud refuses the token with other user data)
    row = _node(store, f"{first}-n0")
    assert row.instance_id is not None and row.launch_weights_sources == chosen
    [inst] = [i for i in cloud.instances.values() if i.intent_id == row.id]
    assert _sources(inst.user_data) == chosen

    # A new intent chooses anew: its own site's copy first; the other account's is left
    # out (six sources at most, the origins kept).
    second = _intent(store, "r-second")
    reconcile(ctx)
    row = _node(store, f"{second}-n0")
    assert row.launch_weights_uri == here
    [inst2] = [i for i in cloud.instances.values() if i.intent_id == row.id]
    assert _sources(inst2.user_data) == [here, east, west, far, *chosen[-2:]]
