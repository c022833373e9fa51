"""EC2 quota headroom for H100/H200 (P-family) instances, where the API exposes it.

The P-family On-Demand limit is the Service Quotas code ``L-417A185B`` ("Running On-Demand P
instances"), counted in vCPUs, which is what ``VcpuLimitExceeded`` refers to (clouds.md
§A.6). Where Service Quotas is not reachable (not permitted for the role, or an emulator
without it), the legacy EC2 account attribute ``max-instances`` is the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

from providers.aws.errors import from_botocore
from providers.aws.instances import LIVE_STATES
from providers.aws.session import AwsSession
from providers.errors import ProviderError
from schema.catalog import INSTANCE_TYPES_BY_NAME

P_INSTANCES_QUOTA = "L-417A185B"  # Running On-Demand P instances, vCPUs


@dataclass(frozen=True)
class Headroom:
    name: str
    unit: str  # "vCPUs" | "instances"
    limit: float
    used: float

    @property
    def free(self) -> float:
        return self.limit - self.used


def quota_headroom(sess: AwsSession, region: str) -> Headroom:
    """The P-family quota and its use in ``region``; raises a typed error when neither the
    quota nor the fallback attribute can be read."""
    live = _live_instance_types(sess, region)
    try:
        sq = sess.client("service-quotas", region)
        quota = sq.get_service_quota(ServiceCode="ec2", QuotaCode=P_INSTANCES_QUOTA)["Quota"]
        used = sum(_vcpus(t) for t in live if t.startswith("p"))
        return Headroom(
            f"{P_INSTANCES_QUOTA} {quota.get('QuotaName', 'Running On-Demand P instances')}",
            "vCPUs",
            float(quota["Value"]),
            float(used),
        )
    except Exception as exc:  # fall back below; the reason is kept if that fails too
        first: ProviderError = from_botocore(exc, region=region)
    try:
        attrs = sess.client("ec2", region).describe_account_attributes(
            AttributeNames=["max-instances"]
        )["AccountAttributes"]
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc
    for attr in attrs:
        if attr.get("AttributeName") == "max-instances":
            limit = float(attr["AttributeValues"][0]["AttributeValue"])
            return Headroom("max-instances (EC2 account attribute)", "instances", limit, len(live))
    raise first


def _live_instance_types(sess: AwsSession, region: str) -> list[str]:
    ec2 = sess.client("ec2", region)
    out: list[str] = []
    try:
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": list(LIVE_STATES)}]
        )
        for page in pages:
            for r in page.get("Reservations", []):
                out.extend(str(i.get("InstanceType", "")) for i in r.get("Instances", []))
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc
    return out


def _vcpus(instance_type: str) -> int:
    known = INSTANCE_TYPES_BY_NAME.get(instance_type)
    return known.vcpus if known else 0
