"""AMIs: CreateImage / DescribeImages / DeregisterImage (clouds.md §B).

``create_image`` snapshots the instance's EBS volumes (instance-store NVMe is not captured)
and tags the AMI and its snapshots as gpucap's, so garbage collection can find them.
``delete_image`` deregisters the AMI *and* deletes its snapshots, which otherwise keep
costing money after the AMI is gone. Both deletion steps tolerate "already gone".
CreateImage takes no client token, but an AMI's name is unique per account and region:
create first looks its name up, so a retry after a lost answer returns the first AMI.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from providers.aws.errors import from_botocore
from providers.aws.session import AwsSession
from providers.aws.tags import tag_list
from providers.base import MANAGED_VALUE, TAG_MANAGED, Image
from providers.errors import NotFound

_STATE = {"pending": "pending", "available": "available"}  # anything else: failed/gone
_GONE = frozenset({"deregistered", "disabled"})

# The default base GPU AMI when an account names none for a region: AWS's Deep Learning
# Base AMI (NVIDIA driver, CUDA, EFA), newest first.
BASE_IMAGE_OWNER = "amazon"
BASE_IMAGE_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*"


def create_image(
    sess: AwsSession, region: str, source_instance_id: str, name: str, tags: Mapping[str, str]
) -> Image:
    all_tags = {**tags, TAG_MANAGED: MANAGED_VALUE}
    tagged = tag_list(all_tags)
    ec2 = sess.client("ec2", region)
    try:
        found = _own_images(ec2, [{"Name": "name", "Values": [name]}])
        if found:  # (a retry: the first call made it)
            return _to_image(found[0], region)
        resp = ec2.create_image(
            InstanceId=source_instance_id,
            Name=name,
            # A reboot gives a consistent filesystem; the source is a bake node, not a
            # serving one (clouds.md §B: NoReboot risks an inconsistent image).
            NoReboot=False,
            TagSpecifications=[{"ResourceType": "image", "Tags": tagged}],
        )
        # Snapshots are tagged in a second call rather than with a "snapshot"
        # TagSpecification, which moto (the emulator) does not implement; AWS accepts both.
        raw = _describe_raw(sess, region, resp["ImageId"])
        snapshots = _snapshot_ids(raw or {})
        if snapshots:
            ec2.create_tags(Resources=snapshots, Tags=tagged)
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc
    if raw is None:
        return Image(resp["ImageId"], name, region, "pending")
    return _to_image(raw, region)


def describe_image(sess: AwsSession, region: str, image_id: str) -> Image | None:
    raw = _describe_raw(sess, region, image_id)
    return None if raw is None else _to_image(raw, region)


def list_images(sess: AwsSession, region: str, tags: Mapping[str, str]) -> list[Image]:
    """This account's AMIs in ``region`` carrying every tag of ``tags``."""
    ec2 = sess.client("ec2", region)
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]
    try:
        raw = _own_images(ec2, filters)
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc
    return sorted((_to_image(i, region) for i in raw), key=lambda i: i.image_id)


def _own_images(ec2: Any, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    images = ec2.describe_images(Owners=["self"], Filters=filters)["Images"]
    return [dict(i) for i in images if i.get("State") not in _GONE]


def _to_image(raw: Mapping[str, Any], region: str) -> Image:
    created = raw.get("CreationDate")
    return Image(
        image_id=str(raw["ImageId"]),
        name=str(raw.get("Name", "")),
        region=region,
        state=_STATE.get(str(raw.get("State")), "failed"),
        tags={t["Key"]: t["Value"] for t in raw.get("Tags", []) or []},
        created_at=datetime.fromisoformat(str(created)).timestamp() if created else None,
    )


def _snapshot_ids(raw: Mapping[str, Any]) -> list[str]:
    return [
        m["Ebs"]["SnapshotId"]
        for m in raw.get("BlockDeviceMappings", []) or []
        if m.get("Ebs", {}).get("SnapshotId")
    ]


def delete_image(sess: AwsSession, region: str, image_id: str) -> None:
    raw = _describe_raw(sess, region, image_id)
    if raw is None:
        return
    snapshots = _snapshot_ids(raw)
    ec2 = sess.client("ec2", region)
    for call, kwargs in [(ec2.deregister_image, {"ImageId": image_id})] + [
        (ec2.delete_snapshot, {"SnapshotId": s}) for s in snapshots
    ]:
        try:
            call(**kwargs)
        except Exception as exc:
            err = from_botocore(exc, region=region)
            if not isinstance(err, NotFound):
                raise err from exc


def find_base_image(sess: AwsSession, region: str) -> str | None:
    """The newest default base GPU AMI in ``region``, or None when there is none."""
    ec2 = sess.client("ec2", region)
    try:
        images = ec2.describe_images(
            Owners=[BASE_IMAGE_OWNER],
            Filters=[
                {"Name": "name", "Values": [BASE_IMAGE_NAME]},
                {"Name": "state", "Values": ["available"]},
            ],
        )["Images"]
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc
    if not images:
        return None
    return str(max(images, key=lambda i: str(i.get("CreationDate", "")))["ImageId"])


def _describe_raw(sess: AwsSession, region: str, image_id: str) -> dict[str, Any] | None:
    ec2 = sess.client("ec2", region)
    try:
        images = ec2.describe_images(ImageIds=[image_id])["Images"]
    except Exception as exc:
        err = from_botocore(exc, region=region)
        if isinstance(err, NotFound):
            return None
        raise err from exc
    if not images or images[0].get("State") in _GONE:
        return None
    return dict(images[0])
