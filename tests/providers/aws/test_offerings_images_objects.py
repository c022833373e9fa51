"""AWS offerings, AMIs and S3 copies against moto."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from providers.base import TAG_MANAGED
from providers.errors import InvalidRequest, NotFound
from schema.catalog import INSTANCE_TYPES_BY_NAME
from tests.fakes.moto_server import MotoEmulator
from tests.providers.aws.conftest import REGION, ProviderFactory, node_request


def test_offerings_mark_unoffered_zones_unavailable_with_a_reason(
    make_provider: ProviderFactory,
) -> None:
    offerings = make_provider().list_offerings([REGION])
    by_key = {(o.instance_type, o.zone): o for o in offerings}
    # moto's bundled offerings data: p5en only in us-east-1a and 1c (clouds.md §E.1).
    assert by_key[("p5en.48xlarge", "us-east-1a")].available is True
    assert by_key[("p5en.48xlarge", "us-east-1b")].available is False
    assert "not offered" in by_key[("p5en.48xlarge", "us-east-1b")].reason
    assert by_key[("p5.48xlarge", "us-east-1b")].available is True


def test_offering_prices_come_from_the_catalog_unless_the_account_overrides(
    make_provider: ProviderFactory,
) -> None:
    provider = make_provider(prices={"p5.48xlarge": 41.5})
    offerings = provider.list_offerings([REGION, "us-west-2"])
    assert {o.region for o in offerings} == {REGION, "us-west-2"}
    for o in offerings:
        expected = (
            41.5
            if o.instance_type == "p5.48xlarge"
            else INSTANCE_TYPES_BY_NAME[o.instance_type].list_price_usd_per_hour
        )
        assert o.price_usd_per_hour == expected


def test_image_and_its_snapshots_are_tagged_and_deleted_together(
    make_provider: ProviderFactory, direct_ec2: Any
) -> None:
    provider = make_provider()
    node = provider.create_node(node_request()).node
    image = provider.create_image(REGION, node.instance_id, "gpucap-bake-1")
    raw = direct_ec2.describe_images(ImageIds=[image.image_id])["Images"][0]
    assert {t["Key"]: t["Value"] for t in raw["Tags"]}[TAG_MANAGED] == "true"
    snapshots = [m["Ebs"]["SnapshotId"] for m in raw["BlockDeviceMappings"] if "Ebs" in m]
    assert snapshots, "the AMI is backed by EBS snapshots"
    snaps = direct_ec2.describe_snapshots(SnapshotIds=snapshots)["Snapshots"]
    assert all(
        {t["Key"]: t["Value"] for t in s.get("Tags", [])}.get(TAG_MANAGED) == "true" for s in snaps
    )
    provider.delete_image(REGION, image.image_id)
    assert provider.describe_image(REGION, image.image_id) is None
    left = direct_ec2.describe_snapshots(Filters=[{"Name": "snapshot-id", "Values": snapshots}])[
        "Snapshots"
    ]
    assert left == []


def test_image_of_an_unknown_instance_is_not_found(make_provider: ProviderFactory) -> None:
    with pytest.raises(NotFound):
        make_provider().create_image(REGION, "i-0badc0ffee0000000", "nope")


def test_base_image_without_one_configured_names_the_fix(
    moto: MotoEmulator, make_provider: ProviderFactory
) -> None:
    provider = make_provider()
    provider.images = {}
    with pytest.raises(InvalidRequest, match="images"):
        provider.create_node(node_request())


def test_copy_of_a_missing_object_is_not_found(
    moto: MotoEmulator, make_provider: ProviderFactory
) -> None:
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto.direct_url)
    s3.create_bucket(Bucket="gpucap-weights")
    with pytest.raises(NotFound):
        make_provider().copy_object("s3://gpucap-weights/nope", "s3://gpucap-weights/dst")


@pytest.mark.parametrize("uri", ["gs://bucket/key", "s3://bucket", "s3:///key", "weights"])
def test_copy_rejects_non_s3_uris(make_provider: ProviderFactory, uri: str) -> None:
    with pytest.raises(InvalidRequest, match="s3://"):
        make_provider().copy_object(uri, "s3://gpucap-weights/dst")
