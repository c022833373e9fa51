"""Stop and start on OCI beyond the shared contract: the host a stopped instance gives back
(so a START meets the fake's own "Out of host capacity", not only an injected one), and
the fake's InstanceAction semantics (retry token, refused transitions) as OCI has them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from providers.base import InstanceStatus
from providers.errors import CapacityUnavailable, Scope
from tests.contract.harness_oci import REGION
from tests.providers.oci.conftest import World

SHAPE = "BM.GPU.H100.8"


def _state(world: World, instance_id: str) -> str:
    return next(str(i["lifecycleState"]) for i in world.fake.instances() if i["id"] == instance_id)


def test_a_stopped_instance_gives_its_host_back_and_a_start_can_find_none(
    world: World, node_request: Callable[..., Any]
) -> None:
    provider = world.provider()
    ad = world.fake.ad_name(world.a.tenancy, REGION, 1)
    world.fake.set_hosts(REGION, ad, SHAPE, 1)  # one host in the AD
    parked = provider.create_node(node_request(ad)).node
    provider.stop_node(REGION, parked.instance_id)
    assert _state(world, parked.instance_id) in ("STOPPING", "STOPPED")

    # The freed host goes to a new launch; the parked node then has nowhere to start.
    other = provider.create_node(node_request(ad)).node
    with pytest.raises(CapacityUnavailable) as info:
        provider.start_node(REGION, parked.instance_id)
    assert info.value.scope == Scope.ZONE
    assert (info.value.zone, info.value.instance_type) == (ad, SHAPE)
    assert info.value.code == "InternalError"  # OCI's stockout: a 500 "Out of host capacity."
    assert _state(world, parked.instance_id) == "STOPPED"

    # Once the host is free again (terminating the other gives it back), the start works.
    provider.terminate_node(REGION, other.instance_id)
    provider.start_node(REGION, parked.instance_id)
    seen = provider.describe_node(REGION, parked.instance_id)
    assert seen is not None and seen.status == InstanceStatus.RUNNING

    # Terminating a stopped instance must not hand its host back a second time.
    provider.stop_node(REGION, parked.instance_id)
    provider.terminate_node(REGION, parked.instance_id)
    provider.create_node(node_request(ad))
    with pytest.raises(CapacityUnavailable):
        provider.create_node(node_request(ad))


def test_fake_instance_action_honours_the_retry_token_and_refuses_wrong_states(
    world: World, node_request: Callable[..., Any]
) -> None:
    import oci

    provider = world.provider()
    ad = world.fake.ad_name(world.a.tenancy, REGION, 1)
    a = provider.create_node(node_request(ad)).node.instance_id
    b = provider.create_node(node_request(ad)).node.instance_id
    compute = provider.session.compute(REGION)
    none = oci.retry.NoneRetryStrategy()
    for iid in (a, b):
        compute.get_instance(iid, retry_strategy=none)  # PROVISIONING -> RUNNING

    first = compute.instance_action(a, "STOP", opc_retry_token="tok-a", retry_strategy=none)
    assert first.data.lifecycle_state == "STOPPING"
    assert compute.get_instance(a, retry_strategy=none).data.lifecycle_state == "STOPPED"
    # A replay answers what the first request answered and acts no more.
    again = compute.instance_action(a, "STOP", opc_retry_token="tok-a", retry_strategy=none)
    assert again.data.lifecycle_state == "STOPPING"
    assert _state(world, a) == "STOPPED"
    # The same token for another instance or another action is a conflict, not a replay.
    for iid, action in ((b, "STOP"), (a, "START")):
        with pytest.raises(oci.exceptions.ServiceError) as info:
            compute.instance_action(iid, action, opc_retry_token="tok-a", retry_strategy=none)
        assert (info.value.status, info.value.code) == (409, "InvalidatedRetryToken")
    assert (_state(world, a), _state(world, b)) == ("STOPPED", "RUNNING")

    # START while it is still stopping is refused; SOFTSTOP stops like STOP.
    compute.instance_action(b, "SOFTSTOP", retry_strategy=none)
    with pytest.raises(oci.exceptions.ServiceError) as info:
        compute.instance_action(b, "START", retry_strategy=none)
    assert (info.value.status, info.value.code) == (409, "IncorrectState")
    assert compute.get_instance(b, retry_strategy=none).data.lifecycle_state == "STOPPED"
    started = compute.instance_action(b, "START", retry_strategy=none)
    assert started.data.lifecycle_state == "STARTING"
    assert compute.get_instance(b, retry_strategy=none).data.lifecycle_state == "RUNNING"
