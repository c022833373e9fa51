"""EC2 offerings: which catalog GPU types each AZ offers (DescribeInstanceTypeOfferings,
clouds.md §A.3), priced from ``schema.catalog`` unless the account overrides the price.

Every catalog type is returned for every AZ of the region, with availability as a field
(HOUSE-STYLE principle 5): a type the AZ does not offer is ``available=False`` with the
reason, never silently missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from providers.aws.errors import from_botocore
from providers.aws.session import AwsSession
from providers.base import Offering
from schema.catalog import INSTANCE_TYPES
from schema.types import Cloud

AWS_TYPES = tuple(t for t in INSTANCE_TYPES if t.cloud == Cloud.AWS)


def list_offerings(
    sess: AwsSession, regions: Sequence[str], prices: Mapping[str, float]
) -> list[Offering]:
    out: list[Offering] = []
    for region in regions:
        zones, offered = zones_and_offered(sess, region)
        for it in AWS_TYPES:
            price = prices.get(it.name, it.list_price_usd_per_hour)
            for zone in zones:
                ok = (it.name, zone) in offered
                out.append(
                    Offering(
                        instance_type=it.name,
                        region=region,
                        zone=zone,
                        price_usd_per_hour=price,
                        available=ok,
                        reason="" if ok else f"{it.name} is not offered in {zone}",
                    )
                )
    return out


def zones_and_offered(sess: AwsSession, region: str) -> tuple[list[str], set[tuple[str, str]]]:
    """The region's available AZs, and the (type, AZ) pairs EC2 says it offers."""
    ec2 = sess.client("ec2", region)
    try:
        azs = ec2.describe_availability_zones(Filters=[{"Name": "state", "Values": ["available"]}])[
            "AvailabilityZones"
        ]
        zones = sorted(
            z["ZoneName"]
            for z in azs
            if z.get("ZoneType", "availability-zone") == "availability-zone"
        )
        offered: set[tuple[str, str]] = set()
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [t.name for t in AWS_TYPES]}],
        )
        for page in pages:
            for o in page.get("InstanceTypeOfferings", []):
                offered.add((o["InstanceType"], o["Location"]))
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc
    return zones, offered
