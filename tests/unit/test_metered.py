"""providers.metered: every verb through the seam is counted per (cloud, account, region,
verb) and budgeted; the wrapped provider keeps its interface (staging's ObjectStore too)."""

from __future__ import annotations

import pytest

from controlplane.resolvers import SimResolver
from controlplane.store.models import Account as AccountRow
from controlplane.telemetry import Metrics
from providers.base import NodeRequest, ObjectStore, Provider, ownership_tags
from providers.metered import CallCounts, MeteredProvider
from providers.ratelimit import BucketSize, CallKind, RateLimited, RateLimiter
from providers.retry import RetryPolicy
from providers.sim import SimCloud, SimProvider
from schema.types import Cloud

REGION = "us-east-1"


def request(intent: str) -> NodeRequest:
    return NodeRequest(
        intent_id=intent,
        instance_type="p5.4xlarge",
        region=REGION,
        tags=ownership_tags(intent, "acme", "pool-1", "chat"),
    )


def test_each_verb_is_counted_per_account_region_and_verb() -> None:
    counts = CallCounts()
    p = MeteredProvider(SimProvider(Cloud.AWS, "acct", SimCloud()), limiter=None, counts=counts)
    node = p.create_node(request("n-1")).node
    p.describe_node(REGION, node.instance_id)
    p.list_nodes(REGION, {})
    p.list_nodes(REGION, {})
    p.list_offerings([REGION, "us-west-2"])
    p.terminate_node(REGION, node.instance_id)
    assert counts.snapshot() == {
        ("aws", "acct", REGION, "create"): 1,
        ("aws", "acct", REGION, "describe"): 1,
        ("aws", "acct", REGION, "list"): 2,
        ("aws", "acct", REGION, "offerings"): 1,
        ("aws", "acct", "us-west-2", "offerings"): 1,
        ("aws", "acct", REGION, "terminate"): 1,
    }
    assert counts.total(verb="list") == 2 and counts.total(region="us-west-2") == 1


def test_a_refused_call_reaches_neither_the_cloud_nor_the_count() -> None:
    counts, world = CallCounts(), SimCloud()
    limiter = RateLimiter({Cloud.AWS: {CallKind.WRITE: BucketSize(1, 0.001)}}, max_wait_s=0.0)
    p = MeteredProvider(SimProvider(Cloud.AWS, "acct", world), limiter=limiter, counts=counts)
    p.create_node(request("n-1"))
    with pytest.raises(RateLimited):
        p.create_node(request("n-2"))
    assert [i.intent_id for i in world.instances.values()] == ["n-1"]
    assert counts.total(verb="create") == 1
    p.list_nodes(REGION, {})  # reads have their own budget (none given here: unlimited)


def test_the_interface_is_kept_object_store_included_and_only_when_the_inner_has_it() -> None:
    p = MeteredProvider(SimProvider(Cloud.AWS, "acct", SimCloud()), limiter=None)
    assert isinstance(p, Provider) and isinstance(p, ObjectStore)

    class NoObjects:
        cloud, account = Cloud.AWS, "acct"

    bare = MeteredProvider(NoObjects(), limiter=None)  # type: ignore[arg-type]
    assert not isinstance(bare, ObjectStore)


def test_the_resolvers_hand_out_metered_providers_exported_as_a_counter() -> None:
    metrics = Metrics()
    resolver = SimResolver(SimCloud())
    row = AccountRow(customer="acme", name="acme-aws", cloud="aws", owner="customer")
    p = resolver.provider("acme", row)
    assert isinstance(p, MeteredProvider)
    labels = {"cloud": "aws", "account": "acme/acme-aws", "region": REGION, "verb": "list"}
    before = metrics.registry.get_sample_value("gpucap_cloud_calls_total", labels) or 0.0
    p.list_nodes(REGION, {})
    p.list_nodes(REGION, {})
    after = metrics.registry.get_sample_value("gpucap_cloud_calls_total", labels)
    assert after == before + 2


FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.0, max_delay_s=0.0, max_total_s=5.0)


def test_each_retry_of_the_adapter_is_counted_and_budgeted_as_a_request() -> None:
    world, counts = SimCloud(), CallCounts()
    inner = SimProvider(Cloud.AWS, "acct", world, retry=FAST_RETRY)
    p = MeteredProvider(inner, limiter=None, counts=counts)
    world.inject(Cloud.AWS, "acct", "throttle", count=1)
    p.create_node(request("n-1"))  # throttled once, then made: two requests
    assert counts.total(verb="create") == 2

    # A budget of one write: the retry after the cloud's throttle finds no token, is
    # refused before reaching the cloud, and the verb ends throttled.
    limiter = RateLimiter({Cloud.AWS: {CallKind.WRITE: BucketSize(1, 1e-6)}}, max_wait_s=0.0)
    tight = MeteredProvider(
        SimProvider(Cloud.AWS, "acct2", world, retry=FAST_RETRY), limiter=limiter, counts=counts
    )
    world.inject(Cloud.AWS, "acct2", "throttle", count=1)
    with pytest.raises(RateLimited):
        tight.create_node(request("n-2"))
    assert counts.total(account="acct2", verb="create") == 1
    assert "n-2" not in {i.intent_id for i in world.instances.values()}
