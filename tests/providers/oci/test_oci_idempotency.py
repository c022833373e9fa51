"""Never duplicate an instance: opc-retry-token semantics in the fake (as OCI enforces them),
and the adapter's find-or-create across crashes, restarts, token expiry and re-creates.
Instance counts are ground truth read from the emulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from providers.base import TAG_CUSTOMER, TAG_INTENT, TAG_MANAGED, TAG_POOL
from providers.errors import InvalidRequest, TransientError
from providers.oci.errors import Where, translate
from providers.oci.tags import retry_token
from tests.contract.harness_oci import REGION
from tests.providers.oci.conftest import World


def _launch_details(world: World, display_name: str) -> Any:
    import oci

    provider = world.provider()
    compute = provider.session.compute(REGION)
    net = provider.session.network(REGION)
    none = oci.retry.NoneRetryStrategy()
    image = compute.list_images(world.a.compartment, retry_strategy=none).data[0].id
    subnet = net.list_subnets(world.a.compartment, retry_strategy=none).data[0].id
    m = oci.core.models
    details = m.LaunchInstanceDetails(
        compartment_id=world.a.compartment,
        availability_domain=world.fake.ad_name(world.a.tenancy, REGION, 1),
        shape="BM.GPU.H100.8",
        display_name=display_name,
        source_details=m.InstanceSourceViaImageDetails(image_id=image),
        create_vnic_details=m.CreateVnicDetails(subnet_id=subnet),
    )
    return compute, details, none


def test_fake_retry_token_replays_same_body_and_rejects_a_different_one(world: World) -> None:
    import oci

    compute, details, none = _launch_details(world, "node-a")
    first = compute.launch_instance(details, opc_retry_token="tok-1", retry_strategy=none)
    again = compute.launch_instance(details, opc_retry_token="tok-1", retry_strategy=none)
    assert again.data.id == first.data.id
    assert len(world.fake.instances()) == 1

    details.display_name = "node-b"
    with pytest.raises(oci.exceptions.ServiceError) as info:
        compute.launch_instance(details, opc_retry_token="tok-1", retry_strategy=none)
    assert info.value.status == 409
    assert isinstance(translate(info.value, Where(region=REGION)), InvalidRequest)
    assert len(world.fake.instances()) == 1


def test_launch_carries_intent_token_and_ownership_tags(
    world: World, node_request: Callable[..., Any]
) -> None:
    provider = world.provider()
    req = node_request(None, intent="n-tokencheck", reservation="ocid1.capacityreservation.oc1.x")
    node = provider.create_node(req).node
    launches = world.fake.requests("LaunchInstance")
    assert [r.headers.get("opc-retry-token") for r in launches] == [retry_token(req.intent_id)]
    assert retry_token(req.intent_id) == req.intent_id  # short, token-safe ids are used as-is
    (inst,) = world.fake.live_instances_with_tag(TAG_INTENT, req.intent_id)
    assert inst["id"] == node.instance_id
    tags = inst["freeformTags"]
    assert tags[TAG_MANAGED] == "true"
    assert tags[TAG_CUSTOMER] == "acme" and tags[TAG_POOL] == "pool-1"
    assert inst["capacityReservationId"] == "ocid1.capacityreservation.oc1.x"
    assert inst["metadata"]["user_data"] == "IyEvYmluL3NoCmVjaG8gaGkK"  # base64 of the script


def test_long_intent_ids_get_a_stable_token_within_ocis_limit() -> None:
    long_id = "x" * 100
    assert retry_token(long_id) == retry_token(long_id)
    assert len(retry_token(long_id)) <= 64
    assert retry_token("n-1", replaced="ocid1.instance.a") != retry_token("n-1")


def test_crash_then_restart_finds_the_instance(
    world: World, node_request: Callable[..., Any]
) -> None:
    """The response is lost and the process dies; a new process (new provider, no memory)
    retries the same intent and must find the instance, not launch another."""
    req = node_request(world.fake.ad_name(world.a.tenancy, REGION, 1))
    world.fake.drop_next_response("LaunchInstance")
    first = world.provider()
    try:
        result = first.create_node(req)
    except TransientError:
        result = world.provider().create_node(req)
    assert result.created is False
    assert len(world.fake.live_instances_with_tag(TAG_INTENT, req.intent_id)) == 1


def test_find_first_holds_after_the_retry_token_expired(
    world: World, node_request: Callable[..., Any]
) -> None:
    req = node_request(None)
    made = world.provider().create_node(req)
    world.fake.expire_retry_tokens()
    again = world.provider().create_node(req)
    assert (again.created, again.node.instance_id) == (False, made.node.instance_id)
    assert len(world.fake.live_instances_with_tag(TAG_INTENT, req.intent_id)) == 1


def test_recreate_after_terminate_is_not_fooled_by_the_token_replay(
    world: World, node_request: Callable[..., Any]
) -> None:
    """OCI replays a token's first response for 24 h, even once that instance is gone; a
    re-create of the intent must launch a new instance, and survive its own crash too."""
    provider = world.provider()
    req = node_request(world.fake.ad_name(world.a.tenancy, REGION, 1))
    old = provider.create_node(req).node
    provider.terminate_node(REGION, old.instance_id)
    # The first launch is the replay of the old token; the chained launch's response is lost.
    world.fake.drop_next_response("LaunchInstance", skip=1)
    result = provider.create_node(req)  # the next attempt finds what the lost launch made
    assert result.created is False
    assert result.node.instance_id != old.instance_id
    live = world.fake.live_instances_with_tag(TAG_INTENT, req.intent_id)
    assert [i["id"] for i in live] == [result.node.instance_id]
    tokens = [r.headers.get("opc-retry-token") for r in world.fake.requests("LaunchInstance")]
    assert tokens[-1] == retry_token(req.intent_id, replaced=old.instance_id)


def test_every_page_is_read_when_finding_and_listing(
    world: World, node_request: Callable[..., Any]
) -> None:
    """With 2 instances per page, an instance on page 3 must still be found (a find that
    reads one page would launch a duplicate)."""
    provider = world.provider()
    world.fake.page_size = 2
    made = [provider.create_node(node_request(None, pool="paged")).node for _ in range(5)]
    listed = provider.list_nodes(REGION, {TAG_POOL: "paged"})
    assert sorted(n.instance_id for n in listed) == sorted(n.instance_id for n in made)
    oldest = made[0]
    again = provider.create_node(node_request(None, intent=oldest.intent_id, pool="paged"))
    assert (again.created, again.node.instance_id) == (False, oldest.instance_id)
    assert len(world.fake.live_instances()) == 5


def test_running_nodes_carry_their_private_ip(
    world: World, node_request: Callable[..., Any]
) -> None:
    """The health checker needs the node's address; OCI keeps it on the primary VNIC."""
    provider = world.provider()
    made = [provider.create_node(node_request(None, pool="ips")).node for _ in range(2)]
    seen = provider.describe_node(REGION, made[0].instance_id)
    assert seen is not None and seen.private_ip and seen.private_ip.startswith("10.0.")
    listed = {n.instance_id: n.private_ip for n in provider.list_nodes(REGION, {TAG_POOL: "ips"})}
    assert set(listed) == {n.instance_id for n in made}
    assert all(listed.values()) and len(set(listed.values())) == 2
    assert listed[made[0].instance_id] == seen.private_ip


def test_listing_reads_addresses_per_subnet_not_per_node(
    world: World, node_request: Callable[..., Any]
) -> None:
    """The reconcile job lists every (account, region) each tick: the addresses of its nodes
    come from one listing per subnet, so the listing's calls do not grow with the nodes."""
    provider = world.provider()
    made = [provider.create_node(node_request(None, pool="many")).node for _ in range(6)]
    described = {n.instance_id: provider.describe_node(REGION, n.instance_id) for n in made}
    before = len(world.fake.requests())
    listed = {n.instance_id: n.private_ip for n in provider.list_nodes(REGION, {TAG_POOL: "many"})}
    calls = [r.operation for r in world.fake.requests()[before:]]
    assert listed == {i: d.private_ip for i, d in described.items() if d is not None}
    assert all(listed.values()) and len(set(listed.values())) == 6
    assert calls.count("GetVnic") == 0
    assert calls.count("ListPrivateIps") == 1  # the nodes share one subnet
    assert len(calls) == 3, calls  # instances, VNIC attachments, private IPs


def test_recreate_in_another_ad_is_not_stopped_by_the_token_conflict(
    world: World, node_request: Callable[..., Any]
) -> None:
    """The intent's token launched into AD-1; its instance is gone and placement now asks for
    AD-2. The same token with a different body is a 409 at OCI: the adapter must chain the
    token and launch, not fail the intent for 24 hours."""
    provider = world.provider()
    intent = "n-moved"
    old = provider.create_node(node_request(world.fake.ad_name(world.a.tenancy, REGION, 1), intent))
    provider.terminate_node(REGION, old.node.instance_id)
    ad2 = world.fake.ad_name(world.a.tenancy, REGION, 2)
    moved = provider.create_node(node_request(ad2, intent))
    assert moved.created is True and moved.node.zone == ad2
    statuses = [r.status for r in world.fake.requests("LaunchInstance")]
    assert 409 in statuses  # the conflict really happened on the wire
    live = world.fake.live_instances_with_tag(TAG_INTENT, intent)
    assert [i["id"] for i in live] == [moved.node.instance_id]
