"""Preflight of an OCI account, for ``gpucap account check``: can the signer be built from
the reference (profile or principal), is each region reachable with it (a signed call that
names the account's compartment), are the H100/H200 shapes offered and with free hosts, how
many GPUs the service limits leave free per AD, and is the base or baked image there.

Findings name references (profile, principal, OCIDs), never key material.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from providers.errors import ProviderError
from providers.oci.errors import Where
from providers.oci.offerings import availability_domains, list_offerings
from providers.oci.provider import OciProvider
from providers.oci.quotas import gpu_headroom
from schema.catalog import INSTANCE_TYPES
from schema.types import Cloud

NODE_GPUS = 8  # one BM.GPU.H100.8 / BM.GPU.H200.8 node
BASE_SHAPE = next(t.name for t in INSTANCE_TYPES if t.cloud == Cloud.OCI and t.gpu == "H100")


@dataclass(frozen=True)
class Finding:
    check: str  # credentials | region | offerings | quota | image
    target: str
    ok: bool
    detail: str


def preflight(
    provider: OciProvider,
    regions: Sequence[str],
    *,
    images: Mapping[str, str] | None = None,
) -> list[Finding]:
    """``images``: region -> image OCID to check; other regions are checked for the adapter's
    base image (the newest Oracle Linux GPU platform image)."""
    session = provider.session
    creds = session.account.credentials
    who = f"{creds.principal} principal" if creds.principal else f"profile {creds.profile}"
    out: list[Finding] = []
    try:
        session.load_identity()
        out.append(Finding("credentials", who, True, "signer ready"))
    except ProviderError as err:
        return [Finding("credentials", who, False, _why(err))]

    for region in regions:
        try:
            ads = availability_domains(session, region)
            out.append(Finding("region", region, True, f"{len(ads)} ADs: {', '.join(ads)}"))
        except ProviderError as err:
            out.append(Finding("region", region, False, _why(err)))
            continue
        out.append(_offerings(provider, region))
        out.append(_quota(provider, region))
        out.append(_image(provider, region, (images or {}).get(region)))
    return out


def _offerings(provider: OciProvider, region: str) -> Finding:
    try:
        offers = list_offerings(provider.session, [region], provider.prices)
    except ProviderError as err:
        return Finding("offerings", region, False, _why(err))
    available = sorted({f"{o.instance_type} in {o.zone}" for o in offers if o.available})
    if available:
        return Finding("offerings", region, True, "available: " + "; ".join(available))
    reasons = sorted({f"{o.instance_type} in {o.zone}: {o.reason}" for o in offers})
    return Finding("offerings", region, False, "nothing available: " + "; ".join(reasons))


def _quota(provider: OciProvider, region: str) -> Finding:
    try:
        free = gpu_headroom(provider.session, region)
    except ProviderError as err:
        # Reading limits needs its own permission; without it launches still report
        # LimitExceeded, typed, so this is information, not a failure.
        return Finding("quota", region, True, f"service limits not readable ({_why(err)})")
    if not free:
        return Finding("quota", region, True, "no GPU service limits reported")
    ok = any(v >= NODE_GPUS for v in free.values())
    detail = ", ".join(f"{k}: {v:.0f} GPUs free" for k, v in sorted(free.items()))
    return Finding(
        "quota", region, ok, detail if ok else f"no AD has {NODE_GPUS} GPUs free: {detail}"
    )


def _image(provider: OciProvider, region: str, image_id: str | None) -> Finding:
    try:
        if image_id is None:
            found = provider.instances.base_image(region, BASE_SHAPE, Where(region=region))
            return Finding("image", f"{region}: base GPU image", True, found)
        img = provider.describe_image(region, image_id)
    except ProviderError as err:
        return Finding("image", f"{region}: {image_id or 'base GPU image'}", False, _why(err))
    if img is None:
        return Finding("image", f"{region}: {image_id}", False, "not found")
    return Finding(
        "image", f"{region}: {image_id}", img.state == "available", f"{img.name} ({img.state})"
    )


def _why(err: ProviderError) -> str:
    return f"{err.kind}: {err.message.splitlines()[0][:300] if err.message else err.code}"
