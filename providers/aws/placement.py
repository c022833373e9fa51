"""EC2 cluster placement groups, one per gang: find-or-create and idempotent delete.

A cluster placement group packs its instances into one AZ, on one high-bisection-bandwidth
network segment (EC2 User Guide, "Placement groups"); a gang's nodes are launched into it with
``Placement.GroupName``. Its name is unique per account and region, and it is the idempotency
anchor: CreatePlacementGroup is sent first, and ``InvalidPlacementGroup.Duplicate`` means the
gang's group exists already (made by an earlier node of the gang, or by this same call before
its response was lost), so one call answers both "find" and "create". The codes are from the
EC2 API reference, "Error codes": ``.Duplicate``, ``.Unknown`` (gone) and ``.InUse`` (it
still has instances), mapped in ``errors.py``.
"""

from __future__ import annotations

from providers.aws.errors import from_botocore, is_duplicate_placement_group
from providers.aws.session import AwsSession
from providers.aws.tags import tag_list
from providers.base import NodeRequest, placement_name, placement_tags
from providers.errors import NotFound

STRATEGY = "cluster"


def ensure_placement_group(sess: AwsSession, request: NodeRequest) -> str:
    """The gang's group name, after making sure the group exists (one attempt;
    ``provider.py`` retries the whole create)."""
    key = request.placement_group
    if not key:
        raise ValueError("not a gang's request: placement_group is not set")
    name = placement_name(key)
    ec2 = sess.client("ec2", request.region)
    try:
        ec2.create_placement_group(
            GroupName=name,
            Strategy=STRATEGY,
            # Tagged atomically with the create, like instances: no untagged window to leak.
            TagSpecifications=[
                {"ResourceType": "placement-group", "Tags": tag_list(placement_tags(request))}
            ],
        )
    except Exception as exc:
        err = from_botocore(exc, region=request.region, zone=request.zone)
        if not is_duplicate_placement_group(err):
            raise err from exc
    return name


def delete_placement_group(sess: AwsSession, region: str, key: str) -> None:
    """Idempotent: a group that is gone is success; one with instances raises ``InUse``."""
    ec2 = sess.client("ec2", region)
    try:
        ec2.delete_placement_group(GroupName=placement_name(key))
    except Exception as exc:
        err = from_botocore(exc, region=region)
        if isinstance(err, NotFound):
            return
        raise err from exc
