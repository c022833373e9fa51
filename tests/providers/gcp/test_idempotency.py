"""Never a second VM for one intent: requestId dedupe at the (fake) API, find-or-create in
the adapter, the request-id chain past spent tokens, stale ids after a name is reused, and
our own operation polling when ``wait`` returns early. Assertions are on the emulator's
state (ground truth), not on the adapter's word."""

from __future__ import annotations

import uuid

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from providers.base import TAG_INTENT, TAG_POOL, InstanceStatus, NodeRequest, ownership_tags
from providers.errors import CapacityUnavailable, InvalidRequest, TransientError
from providers.gcp.provider import GcpProvider
from providers.gcp.session import GcpSession
from providers.gcp.tags import label_value, labels_for, request_id, vm_name
from providers.retry import NO_RETRY
from tests.contract.harness_gcp import GcpHarness, make_provider
from tests.fakes.gcp_server import FakeGcp

REGION, ZONE, H100 = "us-central1", "us-central1-a", "a3-highgpu-8g"


def request(intent: str | None = None, **kw: object) -> NodeRequest:
    intent = intent or f"n-{uuid.uuid4().hex[:12]}"
    base = {
        "intent_id": intent,
        "instance_type": H100,
        "region": REGION,
        "zone": ZONE,
        "tags": ownership_tags(intent, "acme", "h100-pool", "llama-70b"),
    }
    return NodeRequest(**{**base, **kw})  # type: ignore[arg-type]


def insert_request_ids(fake: FakeGcp) -> list[str]:
    return [
        r.query.get("requestId", "")
        for r in fake.requests_seen
        if r.method == "POST" and r.path.endswith("/instances")
    ]


def test_same_request_id_at_the_api_returns_the_same_operation_and_one_vm(
    fake: FakeGcp, project: str
) -> None:
    """The fake's dedupe, through the raw SDK: what the adapter relies on."""
    client = compute_v1.InstancesClient(
        transport="rest",
        client_options=ClientOptions(api_endpoint=fake.endpoint),
        credentials=AnonymousCredentials(),
    )
    body = compute_v1.Instance(name="node-1", machine_type=f"zones/{ZONE}/machineTypes/{H100}")
    rid = str(uuid.uuid4())
    ops = [
        client.insert_unary(
            request=compute_v1.InsertInstanceRequest(
                project=project, zone=ZONE, instance_resource=body, request_id=rid
            )
        )
        for _ in range(3)
    ]
    assert len({op.name for op in ops}) == 1
    assert len(fake.live_instances(project)) == 1


def test_create_sends_the_intent_derived_request_id(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    req = request()
    provider.create_node(req)
    assert insert_request_ids(fake) == [request_id(req.intent_id)]
    assert uuid.UUID(request_id(req.intent_id)).version == 5  # a valid, non-zero UUID


def test_lost_response_is_retried_inside_one_create_and_finds_the_vm(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    req = request()
    fake.inject("drop")
    result = provider.create_node(req)  # the adapter's own retry finds what the drop hid
    assert result.created is False
    assert harness.instances_with_intent(req.intent_id) == 1
    assert insert_request_ids(fake) == [request_id(req.intent_id)]


def test_crash_after_create_then_a_new_process_retries(
    fake: FakeGcp, project: str, harness: GcpHarness
) -> None:
    """A process that dies after the insert: a new provider (new process) retries the intent."""
    req = request()
    fake.inject("drop")
    doomed = make_provider(fake, project, retry=NO_RETRY)  # dies at the first failure
    with pytest.raises(TransientError):
        doomed.create_node(req)
    assert harness.instances_with_intent(req.intent_id) == 1  # the insert did happen
    again = make_provider(fake, project).create_node(req)
    assert again.created is False
    assert harness.instances_with_intent(req.intent_id) == 1


def test_a_spent_token_after_a_stockout_moves_to_the_next_one(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    req = request()
    fake.inject("stockout", zone=ZONE)
    with pytest.raises(CapacityUnavailable):
        provider.create_node(req)
    result = provider.create_node(req)
    assert result.created is True
    assert harness.instances_with_intent(req.intent_id) == 1
    first, replay, fresh = insert_request_ids(fake)
    assert first == replay == request_id(req.intent_id)  # the server returned the failed op
    assert fresh != first


def test_crash_while_walking_the_token_chain_makes_one_vm(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    req = request()
    fake.inject("stockout", zone=ZONE)
    with pytest.raises(CapacityUnavailable):
        provider.create_node(req)
    # The replay of the spent token passes; the second token's insert makes the VM and its
    # answer is lost. The next attempt must find it.
    fake.inject("drop", skip=1)
    result = provider.create_node(req)
    assert result.created is False
    assert harness.instances_with_intent(req.intent_id) == 1
    # and once more from scratch: the chain walk meets the same operations, nothing new
    assert provider.create_node(req).created is False
    assert harness.instances_with_intent(req.intent_id) == 1


def test_stale_id_never_touches_the_newer_vm_with_the_same_name(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    req = request()
    old = provider.create_node(req).node
    provider.terminate_node(REGION, old.instance_id)
    new = provider.create_node(req).node
    assert new.instance_id.split("/")[:2] == old.instance_id.split("/")[:2]  # same zone/name
    assert new.instance_id != old.instance_id
    assert provider.describe_node(REGION, old.instance_id) is None
    provider.terminate_node(REGION, old.instance_id)  # stale: must not delete the new one
    assert harness.instances_with_intent(req.intent_id) == 1
    seen = provider.describe_node(REGION, new.instance_id)
    assert seen is not None and seen.status == InstanceStatus.RUNNING


def test_a_foreign_vm_holding_our_name_is_not_adopted(
    fake: FakeGcp, provider: GcpProvider, project: str
) -> None:
    req = request()
    client = compute_v1.InstancesClient(
        transport="rest",
        client_options=ClientOptions(api_endpoint=fake.endpoint),
        credentials=AnonymousCredentials(),
    )
    client.insert_unary(
        project=project,
        zone=ZONE,
        instance_resource=compute_v1.Instance(
            name=vm_name(req.intent_id), machine_type=f"zones/{ZONE}/machineTypes/{H100}"
        ),
    )
    with pytest.raises(InvalidRequest, match="not this intent"):
        provider.create_node(req)


def test_best_effort_wait_is_polled_until_done(project: str) -> None:
    slow = FakeGcp(op_polls=4, wait_is_best_effort=True).start()
    try:
        provider = make_provider(slow, project)
        req = request()
        result = provider.create_node(req)
        assert result.created is True
        assert result.node.status == InstanceStatus.RUNNING
        waits = [r for r in slow.requests_seen if r.method == "POST" and r.path.endswith("/wait")]
        assert len(waits) >= 4
    finally:
        slow.stop()


def test_zone_is_picked_when_the_request_leaves_it_open(
    provider: GcpProvider, harness: GcpHarness
) -> None:
    req = request(zone=None, instance_type="a3-megagpu-8g")
    node = provider.create_node(req).node
    assert node.zone == "us-central1-a"  # the first zone of the region offering it
    # a retry without a zone finds the same VM (the search covers the region)
    assert provider.create_node(req).node.instance_id == node.instance_id
    assert harness.instances_with_intent(req.intent_id) == 1


def test_reservation_and_user_data_reach_the_instance(
    fake: FakeGcp, provider: GcpProvider, project: str
) -> None:
    req = request(reservation="h100-res-1", user_data="#cloud-config\n")
    provider.create_node(req)
    (inst,) = fake.live_instances(project)
    assert inst["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["h100-res-1"],
    }
    items = {i["key"]: i["value"] for i in inst["metadata"]["items"]}
    assert items["user-data"] == "#cloud-config\n"
    assert inst["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_the_nodes_service_account_is_attached_when_the_account_names_one(
    fake: FakeGcp, project: str
) -> None:
    """What the node reads its weights with: the account's node_service_account, with the
    cloud-platform scope (the account's IAM says what it may do); none when not named."""
    email = f"gpucap-node@{project}.iam.gserviceaccount.com"
    session = GcpSession(project=project, account="nodes-gcp", endpoint_url=fake.endpoint)
    with_identity = GcpProvider(session, node_service_account=email, op_deadline_s=10.0)
    with_identity.create_node(request())
    without = GcpProvider(session, op_deadline_s=10.0)
    without.create_node(request())
    attached = [i.get("serviceAccounts") for i in fake.live_instances(project)]
    assert sorted(attached, key=str) == sorted(
        [[{"email": email, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}], None],
        key=str,
    )


# --- labels: GCP rules, exact tags round-trip -------------------------------------------


def test_tags_that_break_label_rules_still_round_trip_and_filter(
    fake: FakeGcp, provider: GcpProvider, project: str
) -> None:
    intent = "Node:ABC/" + "x" * 80  # uppercase, ':' '/', and longer than 63
    pool = "Pool.H100"
    req = request(intent=intent, tags=ownership_tags(intent, "Acme Corp", pool, "Llama-70B"))
    node = provider.create_node(req).node
    assert node.intent_id == intent
    assert node.tags[TAG_POOL] == pool
    (inst,) = fake.live_instances(project)
    for k, v in inst["labels"].items():  # what GCP would accept
        assert k == k.lower() and len(k) <= 63 and len(v) <= 63 and v == v.lower()
    assert [n.instance_id for n in provider.list_nodes(REGION, {TAG_POOL: pool})] == [
        node.instance_id
    ]
    # a different value that maps to the same lowercase text is still a different tag
    assert provider.list_nodes(REGION, {TAG_POOL: "pool.h100"}) == []


def test_label_values_are_distinct_for_distinct_tags() -> None:
    assert label_value("abc") == "abc"
    assert label_value("ABC") != label_value("abc")
    assert label_value("a" * 70) != label_value("a" * 71)
    assert all(len(v) <= 63 for v in labels_for({"K": "v" * 200, "9x": "y"}).values())
    assert set(labels_for({"9x": "y", TAG_INTENT: "i"})) == {"k9x", "gpucap-intent"}


@pytest.mark.parametrize("intent", ["a", "Node_1", "x" * 200, "---", "日本"])
def test_vm_names_are_valid_gcp_names(intent: str) -> None:
    import re

    name = vm_name(intent)
    assert re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name), name
    assert vm_name(intent) == name  # deterministic


def test_an_operation_still_running_at_the_deadline_returns_the_provisioning_vm(
    project: str,
) -> None:
    slow = FakeGcp(op_polls=10_000, wait_is_best_effort=True).start()
    try:
        provider = GcpProvider(
            GcpSession(project=project, account="t", endpoint_url=slow.endpoint),
            retry=NO_RETRY,
            op_deadline_s=0.3,
        )
        req = request()
        result = provider.create_node(req)
        assert result.created is True
        assert result.node.status == InstanceStatus.PENDING
        assert provider.create_node(req).created is False  # and a retry finds it
        assert len(slow.live_instances(project)) == 1
    finally:
        slow.stop()


def test_injected_latency_slows_but_does_not_break_a_create(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    import time

    fake.inject("latency", seconds=0.3)
    req = request()
    start = time.monotonic()
    assert provider.create_node(req).created is True
    assert time.monotonic() - start >= 0.3
    assert harness.instances_with_intent(req.intent_id) == 1
