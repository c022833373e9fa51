"""The provider contract (``providers/base.py``), checked against every adapter through its
emulator: the simulated cloud, AWS on moto, GCP and OCI on their wire fakes.

Assertions are on the resulting state, read from the emulator where it matters
(``instances_with_intent``), never on which calls were made.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from bootstrap import render
from controlplane.api.fit import usable_pools
from controlplane.node_boot import node_boot
from providers.base import (
    MANAGED_VALUE,
    TAG_INTENT,
    TAG_MANAGED,
    TAG_PLACEMENT,
    TAG_POOL,
    CloudNode,
    InstanceStatus,
    NodeRequest,
    ownership_tags,
    placement_name,
)
from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InUse,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)
from schema.catalog import INSTANCE_TYPES
from schema.policy_file import parse_policy
from tests.contract.harness import Harness
from tests.policy_texts import example_policy

CUSTOMER = "contract-co"


def _request(h: Harness, *, pool: str | None = None, intent: str | None = None) -> NodeRequest:
    intent = intent or f"n-{uuid.uuid4().hex[:16]}"
    pool = pool or f"pool-{uuid.uuid4().hex[:8]}"
    return NodeRequest(
        intent_id=intent,
        instance_type=h.instance_type,
        region=h.region,
        zone=h.zone,
        user_data="#!/bin/sh\necho gpucap-node\n",
        tags=ownership_tags(intent, CUSTOMER, pool, "llama-70b"),
    )


def _live(node: CloudNode | None) -> bool:
    return node is not None and node.status != InstanceStatus.TERMINATED


# --- create: find-or-create ------------------------------------------------------------


def test_create_returns_a_tagged_node_in_the_requested_place(harness: Harness) -> None:
    req = _request(harness)
    result = harness.provider.create_node(req)
    assert result.created is True
    node = result.node
    assert node.intent_id == req.intent_id
    assert node.instance_type == harness.instance_type
    assert node.region == harness.region
    assert node.zone == harness.zone
    assert node.tags[TAG_INTENT] == req.intent_id
    assert node.tags[TAG_POOL] == req.tags[TAG_POOL]
    assert node.status in (InstanceStatus.PENDING, InstanceStatus.RUNNING)
    assert harness.instances_with_intent(req.intent_id) == 1


def test_create_twice_with_one_intent_makes_one_instance(harness: Harness) -> None:
    req = _request(harness)
    first = harness.provider.create_node(req)
    second = harness.provider.create_node(req)
    assert first.created is True
    assert second.created is False
    assert second.node.instance_id == first.node.instance_id
    assert harness.instances_with_intent(req.intent_id) == 1


def test_crash_after_create_then_retry_finds_the_instance(harness: Harness) -> None:
    req = _request(harness)
    harness.crash_after_create()
    try:
        result = harness.provider.create_node(req)
    except TransientError:
        # The adapter may surface the lost response; the caller's retry must then find it.
        result = harness.provider.create_node(req)
    assert result.created is False, "the instance made before the crash must be found"
    assert result.node.intent_id == req.intent_id
    assert harness.instances_with_intent(req.intent_id) == 1


# --- describe / list / terminate -------------------------------------------------------


def test_describe_returns_the_node_and_none_for_unknown(harness: Harness) -> None:
    req = _request(harness)
    made = harness.provider.create_node(req).node
    seen = harness.provider.describe_node(harness.region, made.instance_id)
    assert seen is not None
    assert seen.instance_id == made.instance_id
    assert seen.intent_id == req.intent_id
    assert seen.tags[TAG_INTENT] == req.intent_id
    assert harness.provider.describe_node(harness.region, harness.unknown_instance_id) is None


def test_list_by_ownership_tags_returns_exactly_the_matching_nodes(harness: Harness) -> None:
    pool_a = f"pool-{uuid.uuid4().hex[:8]}"
    pool_b = f"pool-{uuid.uuid4().hex[:8]}"
    a1 = harness.provider.create_node(_request(harness, pool=pool_a)).node
    a2 = harness.provider.create_node(_request(harness, pool=pool_a)).node
    b1 = harness.provider.create_node(_request(harness, pool=pool_b)).node

    listed = harness.provider.list_nodes(harness.region, {TAG_POOL: pool_a})
    assert sorted(n.instance_id for n in listed) == sorted([a1.instance_id, a2.instance_id])
    both = harness.provider.list_nodes(harness.region, {TAG_POOL: pool_b, TAG_INTENT: b1.intent_id})
    assert [n.instance_id for n in both] == [b1.instance_id]
    assert harness.provider.list_nodes(harness.region, {TAG_POOL: "no-such-pool"}) == []


def test_terminate_is_idempotent_and_terminated_nodes_are_not_listed(harness: Harness) -> None:
    pool = f"pool-{uuid.uuid4().hex[:8]}"
    req = _request(harness, pool=pool)
    node = harness.provider.create_node(req).node
    harness.provider.terminate_node(harness.region, node.instance_id)
    harness.provider.terminate_node(harness.region, node.instance_id)  # again: still fine
    assert harness.instances_with_intent(req.intent_id) == 0
    assert harness.provider.list_nodes(harness.region, {TAG_POOL: pool}) == []
    assert not _live(harness.provider.describe_node(harness.region, node.instance_id))


def test_terminate_unknown_instance_is_success(harness: Harness) -> None:
    harness.provider.terminate_node(harness.region, harness.unknown_instance_id)


# --- offerings -------------------------------------------------------------------------


def test_offerings_cover_the_catalog_h100_h200_types_with_price_and_availability(
    harness: Harness,
) -> None:
    offerings = harness.provider.list_offerings([harness.region])
    assert offerings, "no offerings at all"
    cloud = harness.provider.cloud
    expected = {t.name for t in INSTANCE_TYPES if t.cloud == cloud and t.gpus == 8}
    if not expected:  # the simulated cloud may use its own names; it must still offer H100
        expected = {harness.instance_type}
    names = {o.instance_type for o in offerings}
    assert expected <= names, f"missing offerings: {sorted(expected - names)}"
    for o in offerings:
        assert o.region == harness.region
        assert o.zone
        assert o.price_usd_per_hour > 0
        assert isinstance(o.available, bool)
        assert o.available or o.reason, f"{o} is unavailable without a reason"
    ours = [o for o in offerings if o.instance_type == harness.instance_type]
    assert any(o.zone == harness.zone and o.available for o in ours)


# --- injected faults: typed errors with scope -----------------------------------------


def test_capacity_fault_is_capacity_unavailable_at_once(harness: Harness) -> None:
    harness.inject("capacity", count=1, zone=harness.zone)
    req = _request(harness)
    with pytest.raises(CapacityUnavailable) as info:
        harness.provider.create_node(req)
    err = info.value
    assert err.scope in (Scope.ZONE, Scope.REGION)
    assert err.region == harness.region
    if err.scope == Scope.ZONE:
        assert err.zone == harness.zone
    assert err.retryable is False
    assert harness.instances_with_intent(req.intent_id) == 0
    # One injected fault, one raise: the SDK did not retry the stockout behind our back (a
    # retry would have consumed the fault and succeeded). The next create goes through.
    assert harness.provider.create_node(req).created is True
    assert harness.instances_with_intent(req.intent_id) == 1


def test_quota_fault_is_quota_exceeded_for_the_account_region(harness: Harness) -> None:
    harness.inject("quota", count=1)
    req = _request(harness)
    with pytest.raises(QuotaExceeded) as info:
        harness.provider.create_node(req)
    assert info.value.scope == Scope.ACCOUNT_REGION
    assert info.value.region == harness.region
    assert harness.instances_with_intent(req.intent_id) == 0


def test_auth_fault_is_auth_failed_for_the_account(harness: Harness) -> None:
    harness.inject("auth", count=1)
    req = _request(harness)
    with pytest.raises(AuthFailed) as info:
        harness.provider.create_node(req)
    assert info.value.scope == Scope.ACCOUNT
    assert harness.instances_with_intent(req.intent_id) == 0


@pytest.mark.parametrize("fault", ["throttle", "transient"])
def test_retryable_fault_below_the_budget_is_absorbed(harness: Harness, fault: str) -> None:
    assert harness.retry_budget >= 2, "a retry budget of 1 means no retries at all"
    harness.inject(fault, count=harness.retry_budget - 1)  # type: ignore[arg-type]
    req = _request(harness)
    result = harness.provider.create_node(req)
    assert result.node.intent_id == req.intent_id
    assert harness.instances_with_intent(req.intent_id) == 1


@pytest.mark.parametrize(
    ("fault", "kind"), [("throttle", Throttled), ("transient", TransientError)]
)
def test_retryable_fault_at_the_budget_raises_after_bounded_retries(
    harness: Harness, fault: str, kind: type[ProviderError]
) -> None:
    harness.inject(fault, count=harness.retry_budget)  # type: ignore[arg-type]
    req = _request(harness)
    with pytest.raises(kind) as info:
        harness.provider.create_node(req)
    assert info.value.retryable is True
    assert harness.instances_with_intent(req.intent_id) == 0
    # The budget was spent on exactly the injected faults: the next create succeeds at once.
    assert harness.provider.create_node(req).created is True


@pytest.mark.parametrize("fault", ["throttle", "transient"])
def test_retries_happen_in_one_layer_only(harness: Harness, fault: str) -> None:
    """The emulator sees one create request per attempt of the provider's retry policy: no
    SDK-level retry underneath multiplies them (botocore alone would send 3 per attempt on a
    503, clouds.md §E.1)."""
    before = harness.create_requests()
    harness.inject(fault, count=harness.retry_budget)  # type: ignore[arg-type]
    with pytest.raises(ProviderError):
        harness.provider.create_node(_request(harness))
    assert harness.create_requests() - before == harness.retry_budget


def test_a_stockout_is_one_request_on_the_wire(harness: Harness) -> None:
    before = harness.create_requests()
    harness.inject("capacity", count=harness.retry_budget, zone=harness.zone)
    with pytest.raises(CapacityUnavailable):
        harness.provider.create_node(_request(harness))
    assert harness.create_requests() - before == 1


# --- images and objects ----------------------------------------------------------------


def test_image_create_describe_delete(harness: Harness) -> None:
    source = harness.provider.create_node(_request(harness)).node
    name = f"gpucap-contract-{uuid.uuid4().hex[:8]}"
    image = harness.provider.create_image(harness.region, source.instance_id, name)
    assert image.image_id
    assert image.name == name
    assert image.region == harness.region
    assert image.state in ("pending", "available")
    seen = harness.provider.describe_image(harness.region, image.image_id)
    assert seen is not None
    assert seen.image_id == image.image_id
    assert seen.state in ("pending", "available")
    harness.provider.delete_image(harness.region, image.image_id)
    assert harness.provider.describe_image(harness.region, image.image_id) is None
    harness.provider.delete_image(harness.region, image.image_id)  # idempotent


def test_copy_object_is_server_side_and_exact(harness: Harness) -> None:
    key = uuid.uuid4().hex[:8]
    src = harness.object_uri(f"weights/{key}/model.safetensors")
    dst = harness.object_uri(f"staged/{key}/model.safetensors")
    payload = b"weights:" + uuid.uuid4().bytes * 64
    harness.put_object(src, payload)
    assert harness.get_object(dst) is None
    harness.provider.copy_object(src, dst)
    assert harness.get_object(dst) == payload
    assert harness.get_object(src) == payload  # a copy, not a move


# --- user data -------------------------------------------------------------------------


def test_a_create_carries_the_rendered_user_data_and_no_credential(harness: Harness) -> None:
    """What the daemon renders for a node (bootstrap.render) reaches the cloud intact, as
    the cloud's own API returns it; nothing of the policy's credentials is in it."""
    policy = parse_policy(example_policy()).policy
    model = policy.model("llama-8b")
    assert model is not None
    pool = usable_pools(policy, model)[0]
    text = render(node_boot(policy.customer, model, pool, "n-ud", token="single-use"))
    req = replace(_request(harness), user_data=text)
    made = harness.provider.create_node(req).node
    held = harness.user_data_of(made.instance_id)
    assert held == text and held.startswith("#cloud-config\n")
    for acct in policy.accounts:
        for ref in acct.credentials.model_dump(exclude_none=True).values():
            assert str(ref) not in held


# --- gangs: co-located placement -------------------------------------------------------


def _gang_key() -> str:
    return f"r-{uuid.uuid4().hex[:16]}"  # a replica id, the key the caller passes


def _gang_request(h: Harness, key: str, *, pool: str | None = None) -> NodeRequest:
    return replace(_request(h, pool=pool), placement_group=key)


def test_the_nodes_of_a_gang_land_in_one_placement_object(harness: Harness) -> None:
    key, pool = _gang_key(), f"pool-{uuid.uuid4().hex[:8]}"
    before = set(harness.placement_objects())
    a = harness.provider.create_node(_gang_request(harness, key, pool=pool)).node
    b = harness.provider.create_node(_gang_request(harness, key, pool=pool)).node
    assert a.instance_id != b.instance_id
    where = harness.placement_of(a.instance_id)
    assert where is not None and where == harness.placement_of(b.instance_id)
    assert a.zone == b.zone == harness.zone
    assert a.tags[TAG_PLACEMENT] == b.tags[TAG_PLACEMENT] == key
    made = set(harness.placement_objects()) - before
    if harness.has_placement_objects:
        assert where == placement_name(key)  # as the cloud reports the instance
        assert made == {placement_name(key)}  # the second node found the first's object
        other = harness.provider.create_node(_gang_request(harness, _gang_key())).node
        assert harness.placement_of(other.instance_id) not in (None, where)
    else:  # OCI: the gang is its AD and fault domain, the request's AD
        assert where.startswith(f"{harness.zone}/")
        assert made == set()


def test_a_retried_gang_create_makes_nothing_new(harness: Harness) -> None:
    req = _gang_request(harness, _gang_key())
    first = harness.provider.create_node(req)
    objects = harness.placement_objects()
    again = harness.provider.create_node(req)
    assert first.created is True and again.created is False
    assert again.node.instance_id == first.node.instance_id
    assert harness.instances_with_intent(req.intent_id) == 1
    assert harness.placement_objects() == objects


def test_a_gang_create_after_a_lost_response_finds_the_instance(harness: Harness) -> None:
    req = _gang_request(harness, _gang_key())
    before = len(harness.placement_objects())
    harness.crash_after_create()
    try:
        result = harness.provider.create_node(req)
    except TransientError:
        result = harness.provider.create_node(req)
    assert result.created is False
    assert harness.instances_with_intent(req.intent_id) == 1
    assert len(harness.placement_objects()) == before + int(harness.has_placement_objects)
    assert harness.placement_of(result.node.instance_id) is not None


def test_a_lost_placement_create_response_is_found_on_the_retry(harness: Harness) -> None:
    if not harness.drop_next_placement_create():
        pytest.skip("this cloud sends no placement-object create over a wire")
    key = _gang_key()
    before = set(harness.placement_objects())
    node = harness.provider.create_node(_gang_request(harness, key)).node
    assert set(harness.placement_objects()) - before == {placement_name(key)}
    assert harness.placement_of(node.instance_id) == placement_name(key)
    assert harness.instances_with_intent(node.intent_id) == 1


def test_the_placement_object_carries_the_ownership_tags(harness: Harness) -> None:
    key = _gang_key()
    req = _gang_request(harness, key)
    harness.provider.create_node(req)
    objects = harness.placement_objects()
    if not harness.has_placement_objects:
        assert objects == {}  # nothing was made, so nothing can leak untagged
        return
    expected = {k: v for k, v in req.tags.items() if k != TAG_INTENT}
    expected |= {TAG_MANAGED: MANAGED_VALUE, TAG_PLACEMENT: key}
    assert objects[placement_name(key)] == expected  # the gang's, not one node's intent


def test_delete_placement_group_waits_for_the_nodes_and_is_idempotent(harness: Harness) -> None:
    key = _gang_key()
    nodes = [harness.provider.create_node(_gang_request(harness, key)).node for _ in range(2)]
    if harness.has_placement_objects:
        with pytest.raises(InUse) as info:
            harness.provider.delete_placement_group(harness.region, key)
        assert info.value.retryable is False
        assert placement_name(key) in harness.placement_objects()  # nothing deleted
    for n in nodes:
        harness.provider.terminate_node(harness.region, n.instance_id)
    harness.provider.delete_placement_group(harness.region, key)
    assert placement_name(key) not in harness.placement_objects()
    harness.provider.delete_placement_group(harness.region, key)  # again: still fine
    harness.provider.delete_placement_group(harness.region, _gang_key())  # never made


def test_a_single_node_request_is_placed_as_before(harness: Harness) -> None:
    before = harness.placement_objects()
    node = harness.provider.create_node(_request(harness)).node
    assert TAG_PLACEMENT not in node.tags
    assert harness.placement_objects() == before
    if harness.has_placement_objects:
        assert harness.placement_of(node.instance_id) is None
