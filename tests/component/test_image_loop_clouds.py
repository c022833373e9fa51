"""The image job against the GCP and OCI wire fakes through the real SDK clients
(google-cloud-compute, oci), on SQLite and PostgreSQL, as test_image_loop_aws does on moto:
the builder is a real instance in the fake (which runs no user data, so the test sends the
builder's "baked" report with its token, as node.sh would), the image is made from it with
gpucap's labels or freeform tags, the builder is terminated, the next node of the model
boots from the image (the fake records the boot disk's source image, and refuses an image
it does not hold), and after a rebuild the superseded image is deleted."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import select

from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop
from controlplane.resolvers import account_model
from controlplane.store.db import Store
from controlplane.store.models import Account as AccountRow
from controlplane.store.models import Node
from providers.base import TAG_INTENT, InstanceStatus, Provider
from providers.gcp.instances import parse_instance_id
from providers.gcp.provider import GcpProvider
from providers.gcp.session import GcpSession
from providers.gcp.tags import labels_for
from providers.oci import OciProvider
from tests.component.image_kit import TIMINGS, Clock, bake, builds, image_loop
from tests.component.oncall_kit import add_replica
from tests.contract.harness import CONTRACT_RETRY
from tests.contract.harness_gcp import gcp_fake
from tests.contract.harness_oci import TEST_RETRY, OciWorld, oci_world
from tests.fakes.gcp_server import FakeGcp

__all__ = ["gcp_fake", "oci_world"]

GCP_POLICY = """\
customer: acme
accounts:
  - name: acme-gcp
    cloud: gcp
    regions: [us-central1]
    credentials:
      project: {project}
      service_account: gpucap@{project}.iam.gserviceaccount.com
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    runtime:
      image: vllm/vllm-openai:v1
    baked_image: {{}}
"""
OCI_POLICY = """\
customer: acme
accounts:
  - name: shared-oci
    cloud: oci
    owner: shared
    regions: [us-ashburn-1]
    credentials:
      tenancy: {tenancy}
      compartment_id: {compartment}
      profile: {profile}
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    runtime:
      image: vllm/vllm-openai:v1
    baked_image: {{}}
"""


@dataclass
class Cloud:
    """One cloud's fake, as the image job and the test see it."""

    policy: str
    pool: str  # the pool a node of the model is created in
    make: Callable[[AccountRow], Provider]
    boot_image_of: Callable[[str], str | None]  # instance id -> what its boot disk came from
    image_exists: Callable[[str], bool]  # ground truth, read from the fake directly
    managed: Callable[[str], bool]  # the image carries gpucap's tags and its intent id


class Resolver:
    def __init__(self, make: Callable[[AccountRow], Provider]) -> None:
        self.make, self._cache = make, dict[str, Provider]()

    def provider(self, customer: str, account: AccountRow) -> Provider:
        if account.name not in self._cache:
            self._cache[account.name] = self.make(account)
        return self._cache[account.name]


def gcp_cloud(fake: FakeGcp) -> Cloud:
    fake.reset()
    project = f"gpucap-img-{uuid.uuid4().hex[:10]}"

    def make(account: AccountRow) -> Provider:
        session = GcpSession(project=project, account=account.name, endpoint_url=fake.endpoint)
        return GcpProvider(session, retry=CONTRACT_RETRY, op_deadline_s=10.0)

    def boot_image_of(instance_id: str) -> str | None:
        zone, name, _ = parse_instance_id(instance_id)
        return fake.boot_image_of(project, zone, name)

    def managed(bid: str) -> bool:
        image = next(i for (p, _), i in fake.images.items() if p == project)
        want = labels_for({"gpucap-managed": "true", TAG_INTENT: bid}).items()
        return want <= image["labels"].items()

    return Cloud(
        GCP_POLICY.format(project=project),
        "acme/acme-gcp/us-central1/a3-highgpu-8g",
        make,
        boot_image_of,
        lambda image_id: (project, image_id) in fake.images,
        managed,
    )


def oci_cloud(world: OciWorld) -> Cloud:
    ident = world.ident

    def make(account: AccountRow) -> Provider:
        return OciProvider(
            account_model(account),
            endpoint_url=world.fake.endpoint_template,
            config_file=str(world.config_file),
            retry=TEST_RETRY,
        )

    def instance(instance_id: str) -> dict[str, object]:
        return next(i for i in world.fake.instances() if i["id"] == instance_id)

    def image(image_id: str) -> dict[str, object] | None:
        return next((i for i in world.fake.images() if i["id"] == image_id), None)

    def managed(bid: str) -> bool:
        return any(
            (i.get("freeformTags") or {}).get(TAG_INTENT) == bid
            and (i.get("freeformTags") or {}).get("gpucap-managed") == "true"
            for i in world.fake.images()
        )

    def exists(image_id: str) -> bool:
        found = image(image_id)
        return found is not None and found["lifecycleState"] != "DELETED"

    return Cloud(
        OCI_POLICY.format(
            tenancy=ident.tenancy, compartment=ident.compartment, profile=ident.profile
        ),
        "acme/shared-oci/us-ashburn-1/BM.GPU.H100.8",
        make,
        lambda instance_id: str(instance(instance_id)["imageId"]),
        exists,
        managed,
    )


@pytest.fixture(params=["gcp", "oci"])
def cloud(request: pytest.FixtureRequest) -> Cloud:
    if request.param == "gcp":
        return gcp_cloud(request.getfixturevalue("gcp_fake"))
    return oci_cloud(request.getfixturevalue("oci_world"))


@pytest.fixture
def world(store: Store, cloud: Cloud) -> Iterator[tuple[ControlLoop, Clock, ControlPlaneService]]:
    svc = ControlPlaneService(store)
    svc.apply_policy(cloud.policy, source="a.yaml", applied_by="t")
    clock = Clock()
    yield image_loop(store, Resolver(cloud.make), clock), clock, svc


def test_a_build_is_used_by_the_next_node_and_a_rebuild_deletes_the_old_image(
    world: tuple[ControlLoop, Clock, ControlPlaneService], store: Store, cloud: Cloud
) -> None:
    loop, clock, svc = world
    first = bake(loop, svc, store, "vllm@sha256:cd")
    assert first.image_id and cloud.image_exists(first.image_id) and cloud.managed(first.id)
    assert first.source_digest == "vllm@sha256:cd"
    with store.session() as s:
        acct = s.scalars(select(AccountRow)).one()
        s.expunge(acct)
    provider = loop.ctx.providers.provider("acme", acct)
    assert first.builder_instance_id is not None
    gone = provider.describe_node(first.region, first.builder_instance_id)
    assert gone is None or gone.status == InstanceStatus.TERMINATED
    seen = provider.describe_image(first.region, first.image_id)
    assert seen is not None and seen.tags.get(TAG_INTENT) == first.id  # (what gc reads)
    assert seen.created_at is not None and abs(seen.created_at - time.time()) < 60

    # The next node of the model boots from the baked image.
    # (an intent id of its own: the OCI fake lives for the session, and create is
    # find-or-create on the intent)
    rid = add_replica(store, "chat", cloud.pool, "pending", ["pending"], rid=f"r-{uuid.uuid4()}")
    with store.session() as s:  # (not created yet, in a zone the provider picks)
        s.get_one(Node, f"{rid}-n0").instance_id = None
        s.get_one(Node, f"{rid}-n0").zone = None
    loop.reconcile()
    with store.session() as s:
        (node,) = s.scalars(select(Node).where(Node.instance_id.is_not(None)))
    assert node.instance_id is not None
    assert (cloud.boot_image_of(node.instance_id) or "").endswith(first.image_id)

    clock.t += TIMINGS.max_age_s + 1  # stale: rebuilt, then the old one goes
    second = bake(loop, svc, store, "vllm@sha256:cd")
    assert second.image_version == 2 and second.image_id != first.image_id
    clock.t += 1  # (past the grace, 0 s here)
    loop.bake_images()
    assert {b.id: b.state for b in builds(store)} == {first.id: "deleted", second.id: "ready"}
    assert second.image_id and cloud.image_exists(second.image_id)
    assert not cloud.image_exists(first.image_id)
