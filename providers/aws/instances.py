"""EC2 instances: find-or-create, describe, list by tags, terminate (clouds.md §A.3), and
stop / start for warm pools.

Create is find-or-create on the intent id: DescribeInstances by the ``gpucap-intent`` tag
first, and only if nothing live carries it, RunInstances with ``ClientToken`` derived from
the intent and the ownership tags written atomically by ``TagSpecifications``. The lookup
matters even though EC2 honours ClientToken: a token is only remembered for a while, and
moto (our emulator) ignores it altogether (clouds.md §E.1). A gang's node is launched into
its cluster placement group (``placement.py``), which the create makes first if missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.aws.errors import from_botocore
from providers.aws.placement import ensure_placement_group
from providers.aws.session import AwsSession
from providers.aws.tags import client_token, tag_list, tags_of
from providers.base import (
    MANAGED_VALUE,
    TAG_INTENT,
    TAG_MANAGED,
    TAG_PLACEMENT,
    CloudNode,
    CreateResult,
    InstanceStatus,
    NodeRequest,
)
from providers.errors import NotFound, TransientError

# Instance states that still hold (or will hold) capacity; terminated ones are history.
LIVE_STATES = ("pending", "running", "stopping", "stopped")

_STATUS = {
    "pending": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "stopping": InstanceStatus.STOPPING,
    "stopped": InstanceStatus.STOPPED,
    # shutting-down cannot be undone and no longer counts as capacity we hold.
    "shutting-down": InstanceStatus.TERMINATED,
    "terminated": InstanceStatus.TERMINATED,
}


def create_node(
    sess: AwsSession, request: NodeRequest, image_id: str, instance_profile: str | None = None
) -> CreateResult:
    """One find-or-create attempt; ``provider.py`` retries it as a whole. ``instance_profile``:
    the nodes' identity (its ARN), attached at launch."""
    found = find_by_intent(sess, request.region, request.intent_id)
    if found is not None:
        return CreateResult(found, created=False)
    tags = {**request.tags, TAG_INTENT: request.intent_id, TAG_MANAGED: MANAGED_VALUE}
    group = None
    if request.placement_group:
        group = ensure_placement_group(sess, request)
        tags[TAG_PLACEMENT] = request.placement_group
    return CreateResult(_run(sess, request, image_id, tags, group, instance_profile), created=True)


def _run(
    sess: AwsSession,
    request: NodeRequest,
    image_id: str,
    tags: Mapping[str, str],
    group: str | None,
    instance_profile: str | None,
) -> CloudNode:
    tagged = tag_list(tags)
    params: dict[str, Any] = {
        "ImageId": image_id,
        "InstanceType": request.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "ClientToken": client_token(request.intent_id),
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tagged},
            {"ResourceType": "volume", "Tags": tagged},
        ],
    }
    placement: dict[str, str] = {}
    if request.zone:
        placement["AvailabilityZone"] = request.zone
    if group:  # without a zone, the group's first instance picks the AZ for the rest
        placement["GroupName"] = group
    if placement:
        params["Placement"] = placement
    if request.user_data:
        params["UserData"] = request.user_data  # boto3 base64-encodes it
    if instance_profile:
        params["IamInstanceProfile"] = {"Arn": instance_profile}
    if request.reservation:
        params["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationId": request.reservation}
        }
    ec2 = sess.client("ec2", request.region)
    try:
        resp = ec2.run_instances(**params)
    except Exception as exc:
        raise from_botocore(
            exc, region=request.region, zone=request.zone, instance_type=request.instance_type
        ) from exc
    return to_node(resp["Instances"][0], request.region)


def find_by_intent(sess: AwsSession, region: str, intent_id: str) -> CloudNode | None:
    found = list_nodes(sess, region, {TAG_INTENT: intent_id})
    # Several live instances for one intent would be a bug elsewhere; always report the same
    # one (lowest id) so callers converge on it, and garbage collection reaps the rest by tag.
    return min(found, key=lambda n: n.instance_id) if found else None


def describe_node(sess: AwsSession, region: str, instance_id: str) -> CloudNode | None:
    ec2 = sess.client("ec2", region)
    try:
        resp = ec2.describe_instances(InstanceIds=[instance_id])
    except Exception as exc:
        err = from_botocore(exc, region=region)
        if isinstance(err, NotFound):
            return None
        raise err from exc
    for reservation in resp.get("Reservations", []):
        for inst in reservation.get("Instances", []):
            return to_node(inst, region)
    return None


def list_nodes(sess: AwsSession, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]
    filters.append({"Name": "instance-state-name", "Values": list(LIVE_STATES)})
    ec2 = sess.client("ec2", region)
    out: list[CloudNode] = []
    try:
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations", []):
                out.extend(to_node(i, region) for i in reservation.get("Instances", []))
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc
    return sorted(out, key=lambda n: n.instance_id)


def terminate_node(sess: AwsSession, region: str, instance_id: str) -> None:
    """Idempotent: terminating a terminated or unknown instance is success (§A.3)."""
    ec2 = sess.client("ec2", region)
    try:
        ec2.terminate_instances(InstanceIds=[instance_id])
    except Exception as exc:
        err = from_botocore(exc, region=region)
        if isinstance(err, NotFound):
            return
        raise err from exc


def stop_node(sess: AwsSession, region: str, instance_id: str) -> None:
    """StopInstances, after reading the state: stopping, stopped or gone already (unknown,
    shutting-down, terminated) is success; EC2 would answer IncorrectInstanceState for a
    terminated one (and moto would bring it back as stopped). Its EBS root volume stays and
    bills; instance-store NVMe is wiped."""
    node = describe_node(sess, region, instance_id)
    if node is None or node.status in _STOP_DONE:
        return
    _power(sess, region, node, "stop")


def start_node(sess: AwsSession, region: str, instance_id: str) -> None:
    """StartInstances, after reading the state: pending or running already is success; gone
    is NotFound (moto would start a terminated instance again); still stopping is a
    retryable TransientError (EC2: IncorrectInstanceState); no host for it in its AZ is
    InsufficientInstanceCapacity, raised as CapacityUnavailable for that AZ and type."""
    node = describe_node(sess, region, instance_id)
    if node is None or node.status == InstanceStatus.TERMINATED:
        raise NotFound(
            f"instance {instance_id} is gone", code="InvalidInstanceID.NotFound", region=region
        )
    if node.status in (InstanceStatus.PENDING, InstanceStatus.RUNNING):
        return
    if node.status == InstanceStatus.STOPPING:
        raise TransientError(
            f"instance {instance_id} is still stopping",
            code="IncorrectInstanceState",
            retryable=True,
            region=region,
            zone=node.zone or None,
            instance_type=node.instance_type or None,
        )
    _power(sess, region, node, "start")


_STOP_DONE = (InstanceStatus.STOPPING, InstanceStatus.STOPPED, InstanceStatus.TERMINATED)


def _power(sess: AwsSession, region: str, node: CloudNode, verb: str) -> None:
    ec2 = sess.client("ec2", region)
    call = ec2.stop_instances if verb == "stop" else ec2.start_instances
    try:
        call(InstanceIds=[node.instance_id])
    except Exception as exc:
        # The instance's AZ scopes a stockout to the zone, as a create's would be.
        err = from_botocore(
            exc, region=region, zone=node.zone or None, instance_type=node.instance_type or None
        )
        if verb == "stop" and isinstance(err, NotFound):
            return  # gone since the read
        if err.code == "IncorrectInstanceState":
            # It moved since the read (EC2 says so with a 400): the verb's retry reads again.
            raise TransientError(
                err.message,
                code=err.code,
                retryable=True,
                region=region,
                zone=err.zone,
                instance_type=err.instance_type,
            ) from exc
        raise err from exc


def to_node(inst: Mapping[str, Any], region: str) -> CloudNode:
    tags = tags_of(inst)
    state = str((inst.get("State") or {}).get("Name", "pending"))
    return CloudNode(
        instance_id=str(inst["InstanceId"]),
        intent_id=tags.get(TAG_INTENT, ""),
        instance_type=str(inst.get("InstanceType", "")),
        region=region,
        zone=str((inst.get("Placement") or {}).get("AvailabilityZone", "")),
        status=_STATUS.get(state, InstanceStatus.PENDING),
        tags=tags,
        private_ip=inst.get("PrivateIpAddress"),
    )
