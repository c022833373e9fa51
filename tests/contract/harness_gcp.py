"""GCP contract harness: the real ``google.cloud.compute_v1`` REST clients (and an authorized
``requests`` session for Cloud Storage) against the wire fake in ``tests/fakes/gcp_server.py``.

The fake runs once per test session on 127.0.0.1 (free port); each harness gets a project of
its own and a reset fault list, so tests never see each other's instances or faults.
Faults are injected on the wire, so google-api-core's and our own retry behaviour is what
runs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest

from providers.base import TAG_INTENT
from providers.gcp.provider import GcpProvider
from providers.gcp.session import GcpSession
from providers.gcp.tags import TAGS_METADATA_KEY, USER_DATA_METADATA_KEY
from providers.retry import RetryPolicy
from tests.contract.harness import CONTRACT_RETRY, Fault
from tests.fakes.gcp_server import START, FakeGcp
from tests.fakes.gcp_server import start as start_fake

REGION = "us-central1"
ZONE = "us-central1-a"
INSTANCE_TYPE = "a3-highgpu-8g"
BUCKET = "gpucap-contract"

# Harness fault -> the fake's wire fault (clouds.md §A.6 / §E.2 payloads).
WIRE_FAULT: dict[str, str] = {
    "capacity": "stockout",  # operation DONE with ZONE_RESOURCE_POOL_EXHAUSTED, 503
    "quota": "quota",  # 403 quotaExceeded NVIDIA_H100_GPUS in the region
    "throttle": "too_many_requests",  # 429 RESOURCE_EXHAUSTED rateLimitExceeded
    "transient": "server_error",  # 503 backendError
    "auth": "permission_denied",  # 403 forbidden (compute.instances.create)
}


def intent_of(instance: dict[str, object]) -> str:
    """The intent an instance in the fake carries (from the exact tags in its metadata)."""
    meta = instance.get("metadata")
    items = meta.get("items", []) if isinstance(meta, dict) else []
    for item in items:
        if item.get("key") == TAGS_METADATA_KEY:
            return str(json.loads(item["value"]).get(TAG_INTENT, ""))
    return ""


@dataclass
class GcpHarness:
    fake: FakeGcp
    provider: GcpProvider
    project: str
    region: str = REGION
    zone: str = ZONE
    instance_type: str = INSTANCE_TYPE
    retry_budget: int = CONTRACT_RETRY.max_attempts
    unknown_instance_id: str = f"{ZONE}/gpucap-never-made/4242"
    has_placement_objects: bool = True

    def inject(self, fault: Fault, *, count: int = 1, zone: str | None = None) -> None:
        self.fake.inject(WIRE_FAULT[fault], count=count, zone=zone)

    def inject_start(self, fault: Fault, *, count: int = 1) -> None:
        self.fake.inject(WIRE_FAULT[fault], count=count, method=START)

    def create_requests(self) -> int:
        return sum(
            1
            for r in self.fake.requests_seen
            if r.method == "POST" and r.path.endswith("/instances")
        )

    def instances_with_intent(self, intent_id: str) -> int:
        return sum(1 for i in self.fake.live_instances(self.project) if intent_of(i) == intent_id)

    def user_data_of(self, instance_id: str) -> str:
        for i in self.fake.live_instances(self.project):
            if i.get("name") in instance_id.split("/"):  # (ids read zone/name/id)
                items = (i.get("metadata") or {}).get("items") or []
                return next((x["value"] for x in items if x["key"] == USER_DATA_METADATA_KEY), "")
        return ""

    def placement_of(self, instance_id: str) -> str | None:
        for i in self.fake.live_instances(self.project):
            if i.get("name") in instance_id.split("/"):
                names = sorted(link.rsplit("/", 1)[-1] for link in i.get("resourcePolicies", []))
                return ",".join(names) or None
        return None

    def placement_objects(self) -> Mapping[str, Mapping[str, str]]:
        # Resource policies have no labels: the ownership tags are the JSON description.
        return {
            r["name"]: json.loads(r["description"] or "{}")
            for r in self.fake.policies(self.project)
        }

    def drop_next_placement_create(self) -> bool:
        self.fake.inject("drop", method="resourcePolicies.insert")
        return True

    def crash_after_create(self) -> None:
        self.fake.inject("drop")

    def object_uri(self, key: str) -> str:
        return f"gs://{BUCKET}/{self.project}/{key}"

    def put_object(self, uri: str, data: bytes) -> None:
        bucket, _, key = uri.removeprefix("gs://").partition("/")
        self.fake.put_object(bucket, key, data)

    def get_object(self, uri: str) -> bytes | None:
        bucket, _, key = uri.removeprefix("gs://").partition("/")
        return self.fake.get_object(bucket, key)


def make_provider(
    fake: FakeGcp,
    project: str,
    *,
    service_account: str | None = None,
    retry: RetryPolicy = CONTRACT_RETRY,
    source_credentials: object = None,
    account: str = "contract-gcp",
) -> GcpProvider:
    session = GcpSession(
        project=project,
        account=account,
        service_account=service_account,
        endpoint_url=fake.endpoint,
        source_credentials=source_credentials,
    )
    return GcpProvider(session, retry=retry, op_deadline_s=10.0)


@pytest.fixture(scope="session")
def gcp_fake() -> Iterator[FakeGcp]:
    fake = start_fake()
    yield fake
    fake.stop()


@pytest.fixture
def gcp_harness(gcp_fake: FakeGcp) -> Iterator[GcpHarness]:
    gcp_fake.reset()
    project = f"gpucap-ct-{uuid.uuid4().hex[:10]}"
    yield GcpHarness(fake=gcp_fake, provider=make_provider(gcp_fake, project), project=project)
    gcp_fake.reset()
