"""GCP offerings: every catalog H100/H200 machine type in every zone of the asked regions,
with price and availability as fields (never by omission, Karpenter's GetInstanceTypes
contract, HOUSE-STYLE study 2).

What the API says about availability, per (machine type, zone):
- the zone offers the machine type (``machineTypes.aggregatedList``);
- the zone is ``UP`` (``zones.list``);
- the region's GPU quota for that type has room for one node (``regions.get`` quotas), and
  so does the project-wide ``GPUS_ALL_REGIONS`` (``projects.get``).
Stockouts are not visible before an insert; they come back as typed errors from create.

Prices are the catalog's list prices (``schema.catalog``, clouds.md §A.2), overridden per
account by ``Account.prices``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from providers.base import Offering
from providers.gcp.quotas import GLOBAL_GPU_METRIC, QUOTA_METRIC, free_by_metric, global_gpu_free
from providers.gcp.session import CALL_TIMEOUT_S, GcpSession
from schema.catalog import INSTANCE_TYPES, InstanceType
from schema.types import Cloud


def catalog_types() -> list[InstanceType]:
    return [t for t in INSTANCE_TYPES if t.cloud == Cloud.GCP]


def list_offerings(
    session: GcpSession, regions: Sequence[str], prices: Mapping[str, float]
) -> list[Offering]:
    from google.cloud import compute_v1

    project = session.project
    types = catalog_types()
    offered: dict[str, set[str]] = {}  # zone -> machine type names
    pager = session.client("MachineTypesClient").aggregated_list(
        request=compute_v1.AggregatedListMachineTypesRequest(project=project),
        retry=None,
        timeout=CALL_TIMEOUT_S,
    )
    wanted = {t.name for t in types}
    for scope, scoped in pager:
        if scope.startswith("zones/"):
            offered[scope[len("zones/") :]] = {
                m.name for m in scoped.machine_types if m.name in wanted
            }
    zone_status = {
        z.name: z.status
        for z in session.client("ZonesClient").list(
            project=project, retry=None, timeout=CALL_TIMEOUT_S
        )
    }
    global_free = global_gpu_free(session)

    out: list[Offering] = []
    for region in regions:
        info = session.client("RegionsClient").get(
            project=project, region=region, retry=None, timeout=CALL_TIMEOUT_S
        )
        free = free_by_metric(info.quotas)
        zones = sorted(z.rsplit("/", 1)[-1] for z in info.zones)
        for zone in zones:
            for t in types:
                reason = _unavailable_reason(
                    t, zone, offered.get(zone, set()), zone_status.get(zone, ""), free, global_free
                )
                out.append(
                    Offering(
                        instance_type=t.name,
                        region=region,
                        zone=zone,
                        price_usd_per_hour=float(prices.get(t.name, t.list_price_usd_per_hour)),
                        available=not reason,
                        reason=reason,
                    )
                )
    return out


def _unavailable_reason(
    t: InstanceType,
    zone: str,
    offered: set[str],
    status: str,
    free: Mapping[str, float],
    global_free: float | None,
) -> str:
    if t.name not in offered:
        return f"{t.name} is not offered in {zone}"
    if status and status != "UP":
        return f"zone {zone} is {status}"
    metric = QUOTA_METRIC.get(t.name)
    if metric and metric in free and free[metric] < t.gpus:
        return f"quota {metric}: {free[metric]:g} GPUs free, a node needs {t.gpus}"
    if global_free is not None and global_free < t.gpus:
        return f"quota {GLOBAL_GPU_METRIC}: {global_free:g} GPUs free, a node needs {t.gpus}"
    return ""
