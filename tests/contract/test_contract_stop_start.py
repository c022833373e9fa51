"""The warm-pool verbs of the provider contract (``stop_node`` / ``start_node``,
``providers/base.py``), against every adapter through its emulator: the simulated cloud,
AWS on moto, GCP and OCI on their wire fakes.

What the control plane relies on (``controlplane.lifecycle.node.step_warm``,
``controlplane.loop.reconcile._start_failed``): a stopped node is described and listed as
``STOPPED``, never as gone (GCE calls a stopped VM TERMINATED); it keeps its instance id,
zone and tags through a stop and a start; a start that finds no host is
``CapacityUnavailable`` for the node's zone, raised at once.
"""

from __future__ import annotations

import time
import uuid

import pytest

from providers.base import TAG_INTENT, TAG_POOL, CloudNode, InstanceStatus, NodeRequest
from providers.errors import CapacityUnavailable, NotFound, Scope
from tests.contract.harness import Harness
from tests.contract.test_contract import _request

# Long enough for a fake's operation to finish; the emulators move in milliseconds.
SETTLE_S = 10.0


def _await(h: Harness, instance_id: str, status: InstanceStatus) -> CloudNode:
    """The node as described once it shows ``status`` (the clouds move asynchronously)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        node = h.provider.describe_node(h.region, instance_id)
        if node is not None and node.status == status:
            return node
        if time.monotonic() > deadline:
            seen = node.status.value if node is not None else "gone"
            raise AssertionError(f"{instance_id} is {seen} after {SETTLE_S}s, not {status}")
        time.sleep(0.05)


def _running(h: Harness, req: NodeRequest) -> CloudNode:
    made = h.provider.create_node(req).node
    return _await(h, made.instance_id, InstanceStatus.RUNNING)


def _stopped(h: Harness, req: NodeRequest) -> CloudNode:
    node = _running(h, req)
    h.provider.stop_node(h.region, node.instance_id)
    return _await(h, node.instance_id, InstanceStatus.STOPPED)


def _same_node(seen: CloudNode, before: CloudNode) -> None:
    assert seen.instance_id == before.instance_id
    assert seen.intent_id == before.intent_id
    assert seen.zone == before.zone
    assert seen.instance_type == before.instance_type
    assert dict(seen.tags) == dict(before.tags)


def test_a_stopped_node_is_described_and_listed_as_stopped_not_gone(harness: Harness) -> None:
    pool = f"pool-{uuid.uuid4().hex[:8]}"
    req = _request(harness, pool=pool)
    running = _running(harness, req)
    harness.provider.stop_node(harness.region, running.instance_id)
    first = harness.provider.describe_node(harness.region, running.instance_id)
    assert first is not None, "a stopping node was read as gone"
    assert first.status in (InstanceStatus.STOPPING, InstanceStatus.STOPPED)
    stopped = _await(harness, running.instance_id, InstanceStatus.STOPPED)
    _same_node(stopped, running)
    assert stopped.tags[TAG_INTENT] == req.intent_id
    assert stopped.tags[TAG_POOL] == pool
    listed = harness.provider.list_nodes(harness.region, {TAG_POOL: pool})
    assert [(n.instance_id, n.status) for n in listed] == [
        (running.instance_id, InstanceStatus.STOPPED)
    ]
    assert harness.instances_with_intent(req.intent_id) == 1  # the cloud still holds it


def test_stop_is_idempotent(harness: Harness) -> None:
    req = _request(harness)
    stopped = _stopped(harness, req)
    harness.provider.stop_node(harness.region, stopped.instance_id)  # again: still fine
    again = harness.provider.describe_node(harness.region, stopped.instance_id)
    assert again is not None and again.status == InstanceStatus.STOPPED
    _same_node(again, stopped)
    assert harness.instances_with_intent(req.intent_id) == 1


def test_start_brings_the_same_node_back_and_is_harmless_when_running(harness: Harness) -> None:
    pool = f"pool-{uuid.uuid4().hex[:8]}"
    req = _request(harness, pool=pool)
    stopped = _stopped(harness, req)
    harness.provider.start_node(harness.region, stopped.instance_id)
    back = _await(harness, stopped.instance_id, InstanceStatus.RUNNING)
    _same_node(back, stopped)
    harness.provider.start_node(harness.region, back.instance_id)  # running: nothing to do
    still = harness.provider.describe_node(harness.region, back.instance_id)
    assert still is not None and still.status == InstanceStatus.RUNNING
    _same_node(still, back)
    listed = harness.provider.list_nodes(harness.region, {TAG_POOL: pool})
    assert [n.instance_id for n in listed] == [back.instance_id]
    assert harness.instances_with_intent(req.intent_id) == 1


def test_a_node_goes_round_stop_and_start_twice(harness: Harness) -> None:
    """A warm node is parked and resumed many times in its life; nothing accumulates."""
    req = _request(harness)
    node = _running(harness, req)
    for _ in range(2):
        harness.provider.stop_node(harness.region, node.instance_id)
        _same_node(_await(harness, node.instance_id, InstanceStatus.STOPPED), node)
        harness.provider.start_node(harness.region, node.instance_id)
        _same_node(_await(harness, node.instance_id, InstanceStatus.RUNNING), node)
    assert harness.instances_with_intent(req.intent_id) == 1


def test_a_create_for_a_stopped_nodes_intent_finds_it(harness: Harness) -> None:
    """Find-or-create counts a stopped instance as the intent's: a retried create must not
    launch a second GPU node beside the parked one."""
    req = _request(harness)
    stopped = _stopped(harness, req)
    again = harness.provider.create_node(req)
    assert again.created is False
    assert again.node.instance_id == stopped.instance_id
    assert harness.instances_with_intent(req.intent_id) == 1


def test_stop_of_an_unknown_or_terminated_instance_is_success(harness: Harness) -> None:
    harness.provider.stop_node(harness.region, harness.unknown_instance_id)
    req = _request(harness)
    node = harness.provider.create_node(req).node
    harness.provider.terminate_node(harness.region, node.instance_id)
    harness.provider.stop_node(harness.region, node.instance_id)
    assert harness.instances_with_intent(req.intent_id) == 0  # not brought back as stopped
    gone = harness.provider.describe_node(harness.region, node.instance_id)
    assert gone is None or gone.status == InstanceStatus.TERMINATED


def test_start_of_an_unknown_instance_is_not_found(harness: Harness) -> None:
    with pytest.raises(NotFound) as info:
        harness.provider.start_node(harness.region, harness.unknown_instance_id)
    assert info.value.retryable is False


def test_start_of_a_terminated_instance_is_not_found_and_starts_nothing(harness: Harness) -> None:
    req = _request(harness)
    node = _stopped(harness, req)
    harness.provider.terminate_node(harness.region, node.instance_id)
    with pytest.raises(NotFound) as info:
        harness.provider.start_node(harness.region, node.instance_id)
    assert info.value.retryable is False
    assert harness.instances_with_intent(req.intent_id) == 0


def test_a_start_that_finds_no_host_is_capacity_unavailable_in_the_zone(
    harness: Harness,
) -> None:
    req = _request(harness)
    stopped = _stopped(harness, req)
    harness.inject_start("capacity", count=1)
    with pytest.raises(CapacityUnavailable) as info:
        harness.provider.start_node(harness.region, stopped.instance_id)
    err = info.value
    # What the reconciler blocks (controlplane.lifecycle.blocking.block_for): this zone only.
    assert err.scope == Scope.ZONE
    assert err.zone == harness.zone
    assert err.region == harness.region
    assert err.instance_type == harness.instance_type
    assert err.retryable is False
    seen = harness.provider.describe_node(harness.region, stopped.instance_id)
    assert seen is not None and seen.status == InstanceStatus.STOPPED  # still parked
    _same_node(seen, stopped)
    # One fault, one raise: nothing under the provider retried the stockout (a retry would
    # have consumed the fault and succeeded). The next start goes through.
    harness.provider.start_node(harness.region, stopped.instance_id)
    _same_node(_await(harness, stopped.instance_id, InstanceStatus.RUNNING), stopped)
    assert harness.instances_with_intent(req.intent_id) == 1
