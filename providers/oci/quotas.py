"""GPU service-limit headroom per availability domain, from the OCI Limits API.

Compute limits are counted per AD. Rather than hard-coding limit names (the reference does
not record the real names of the H100/H200 limits), the GPU limits are found by listing the
tenancy's compute limit values and keeping those whose name mentions a catalog GPU; then
``GetResourceAvailability`` says how much of each is free.
"""

from __future__ import annotations

from providers.oci.errors import Where
from providers.oci.session import OciSession
from schema.catalog import GPU_KINDS


def gpu_headroom(session: OciSession, region: str) -> dict[str, float]:
    """``"<limit name>@<AD>"`` -> units free (GPUs), for every GPU limit of the tenancy."""
    tenancy = session.tenancy_id()
    if not tenancy:
        return {}
    where = Where(region=region)
    client = session.limits(region)
    values = session.list_all(
        "list_limit_values", client.list_limit_values, tenancy, "compute", where=where
    )
    free: dict[str, float] = {}
    for v in values:
        name = str(v.name or "")
        if not any(kind.lower() in name.lower() for kind in GPU_KINDS):
            continue
        ad = v.availability_domain
        extra = {"availability_domain": ad} if ad else {}
        got = session.call(
            "get_resource_availability",
            client.get_resource_availability,
            "compute",
            name,
            tenancy,
            where=Where(region=region, zone=ad),
            **extra,
        ).data
        free[f"{name}@{ad}" if ad else name] = float(got.available or 0)
    return free
