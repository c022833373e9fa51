"""The listing the reconcile job observes nodes from (``controlplane.loop.reconcile``: one
``list_nodes`` per (account, region) by gpucap's ownership tags, in place of a describe per
node) reports each instance as ``describe_node`` does: what the lifecycle steps read
(status, zone, private address, tags, type), for a running and a stopped node, on every
adapter through its emulator."""

from __future__ import annotations

from providers.base import CloudNode, InstanceStatus, ownership_filter
from tests.contract.harness import Harness
from tests.contract.test_contract import CUSTOMER, _request
from tests.contract.test_contract_stop_start import _await, _running


def _as_listed(h: Harness, instance_id: str) -> CloudNode:
    listed = {n.instance_id: n for n in h.provider.list_nodes(h.region, ownership_filter(CUSTOMER))}
    assert instance_id in listed, f"{instance_id} is not in the ownership listing"
    return listed[instance_id]


def _same_report(listed: CloudNode, described: CloudNode) -> None:
    assert listed.status == described.status
    assert listed.zone == described.zone
    assert listed.private_ip == described.private_ip
    assert dict(listed.tags) == dict(described.tags)
    assert (listed.intent_id, listed.instance_type, listed.region) == (
        described.intent_id,
        described.instance_type,
        described.region,
    )


def test_the_ownership_listing_reports_a_running_node_as_describe_does(harness: Harness) -> None:
    h = harness
    node = _running(h, _request(h))
    described = h.provider.describe_node(h.region, node.instance_id)
    assert described is not None
    _same_report(_as_listed(h, node.instance_id), described)
    assert described.status == InstanceStatus.RUNNING


def test_the_ownership_listing_reports_a_stopped_node_as_describe_does(harness: Harness) -> None:
    h = harness
    node = _running(h, _request(h))
    h.provider.stop_node(h.region, node.instance_id)
    described = _await(h, node.instance_id, InstanceStatus.STOPPED)
    _same_report(_as_listed(h, node.instance_id), described)


def test_the_ownership_listing_leaves_out_another_customers_nodes(harness: Harness) -> None:
    h = harness
    mine = h.provider.create_node(_request(h)).node
    listed = h.provider.list_nodes(h.region, ownership_filter("another-co"))
    assert mine.instance_id not in {n.instance_id for n in listed}
    assert mine.instance_id in {
        n.instance_id for n in h.provider.list_nodes(h.region, ownership_filter())
    }
