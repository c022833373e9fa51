"""Stop and start on GCP beyond the shared contract: a stop whose operation outlasts the
wait, and a start asked of a VM still STOPPING (GCE would answer 400 resourceNotReady).
The fake's operations are held RUNNING (best-effort waits that never finish) to get there."""

from __future__ import annotations

import pytest

from providers.base import InstanceStatus, NodeRequest, ownership_tags
from providers.errors import TransientError
from providers.gcp.provider import GcpProvider
from providers.gcp.session import GcpSession
from tests.contract.harness import CONTRACT_RETRY
from tests.contract.harness_gcp import INSTANCE_TYPE, REGION, ZONE
from tests.fakes.gcp_server import FakeGcp


def _start_requests(fake: FakeGcp) -> int:
    return sum(1 for r in fake.requests_seen if r.path.endswith("/start"))


def test_a_start_of_a_vm_still_stopping_is_retryable_and_sends_nothing(
    fake: FakeGcp, project: str
) -> None:
    session = GcpSession(project=project, account="gcp-t", endpoint_url=fake.endpoint)
    # A short operation deadline: the held stop must not keep the test waiting.
    provider = GcpProvider(session, retry=CONTRACT_RETRY, op_deadline_s=0.2)
    intent = "n-stopping"
    req = NodeRequest(
        intent_id=intent,
        instance_type=INSTANCE_TYPE,
        region=REGION,
        zone=ZONE,
        tags=ownership_tags(intent, "acme", "pool-1", "llama-70b"),
    )
    node = provider.create_node(req).node
    assert node.status == InstanceStatus.RUNNING

    was = fake.op_polls, fake.wait_is_best_effort  # (the fake is the session's)
    fake.op_polls, fake.wait_is_best_effort = 10**6, True  # operations from now on hang
    try:
        # The first attempt's operation outlasts the wait; the retry reads STOPPING: done.
        provider.stop_node(REGION, node.instance_id)
        seen = provider.describe_node(REGION, node.instance_id)
        assert seen is not None and seen.status == InstanceStatus.STOPPING
        assert [i["name"] for i in fake.live_instances(project)] == [node.instance_id.split("/")[1]]

        before = _start_requests(fake)
        with pytest.raises(TransientError) as info:
            provider.start_node(REGION, node.instance_id)
        assert info.value.retryable is True
        assert info.value.code == "resourceNotReady"
        assert _start_requests(fake) == before  # refused on the read, never sent
    finally:
        fake.op_polls, fake.wait_is_best_effort = was

    with fake.lock:  # the stop's operation finishes, as time would
        for op in fake.operations.values():
            op.finish()
    seen = provider.describe_node(REGION, node.instance_id)
    assert seen is not None and seen.status == InstanceStatus.STOPPED
    provider.start_node(REGION, node.instance_id)
    seen = provider.describe_node(REGION, node.instance_id)
    assert seen is not None and seen.status == InstanceStatus.RUNNING
