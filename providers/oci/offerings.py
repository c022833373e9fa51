"""OCI offerings: the catalog's OCI GPU shapes in every availability domain of a region, with
list price and what the API says about availability.

- Which shapes an AD has: Core ``ListShapes`` per AD (``GET /20160918/shapes``).
- Whether there are hosts now: Core ``CreateComputeCapacityReport``
  (``AVAILABLE`` / ``OUT_OF_HOST_CAPACITY`` / ``HARDWARE_NOT_SUPPORTED``).
- Price: ``schema.catalog`` list price (clouds.md §A.2, a dated default), unless the account
  overrides it.

Every catalog shape is returned for every AD; a shape the AD lacks, or has no hosts for, is
``available=False`` with the reason (availability is a field, never an omission).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from providers.base import Offering
from providers.errors import ProviderError
from providers.oci.errors import Where
from providers.oci.session import OciSession
from schema.catalog import INSTANCE_TYPES
from schema.types import Cloud

CATALOG_SHAPES = tuple(t for t in INSTANCE_TYPES if t.cloud == Cloud.OCI)


def availability_domains(session: OciSession, region: str) -> list[str]:
    ads = session.call(
        "list_availability_domains",
        session.identity(region).list_availability_domains,
        session.compartment_id,
        where=Where(region=region),
    ).data
    return sorted(ad.name for ad in ads)


def offered_shapes(session: OciSession, region: str, ad: str) -> set[str]:
    shapes = session.list_all(
        "list_shapes",
        session.compute(region).list_shapes,
        session.compartment_id,
        availability_domain=ad,
        where=Where(region=region, zone=ad),
    )
    return {s.shape for s in shapes}


def host_availability(
    session: OciSession, region: str, ad: str, shapes: Sequence[str]
) -> dict[str, tuple[bool, str]]:
    """shape -> (available, reason) from a compute capacity report."""
    import oci

    m = oci.core.models
    report = session.call(
        "create_compute_capacity_report",
        session.compute(region).create_compute_capacity_report,
        m.CreateComputeCapacityReportDetails(
            compartment_id=session.compartment_id,
            availability_domain=ad,
            shape_availabilities=[
                m.CreateCapacityReportShapeAvailabilityDetails(instance_shape=s) for s in shapes
            ],
        ),
        where=Where(region=region, zone=ad),
    ).data
    out: dict[str, tuple[bool, str]] = {}
    for item in report.shape_availabilities or []:
        status = item.availability_status or "UNKNOWN"
        available = status == "AVAILABLE" and (item.available_count or 0) > 0
        out[item.instance_shape] = (available, "" if available else status.lower())
    return out


def list_offerings(
    session: OciSession, regions: Sequence[str], prices: Mapping[str, float]
) -> list[Offering]:
    offerings: list[Offering] = []
    for region in regions:
        for ad in availability_domains(session, region):
            offered = offered_shapes(session, region, ad)
            ours = [t.name for t in CATALOG_SHAPES if t.name in offered]
            hosts: dict[str, tuple[bool, str]] = {}
            if ours:
                try:
                    hosts = host_availability(session, region, ad, ours)
                except ProviderError as err:
                    # No report (the policy may not grant capacity reports, which ListShapes
                    # just proved the compartment is reachable; or the call keeps failing):
                    # the shape is offered, host availability unknown; launches will tell.
                    hosts = {s: (True, f"host availability unknown: {err.kind}") for s in ours}
            for t in CATALOG_SHAPES:
                if t.name not in offered:
                    available, reason = False, f"{t.name} not offered in {ad}"
                else:
                    available, reason = hosts.get(t.name, (True, "host availability unknown"))
                offerings.append(
                    Offering(
                        instance_type=t.name,
                        region=region,
                        zone=ad,
                        price_usd_per_hour=prices.get(t.name, t.list_price_usd_per_hour),
                        available=available,
                        reason=reason,
                    )
                )
    return offerings
