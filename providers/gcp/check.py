"""Preflight of a GCP account, for ``gpucap account check``: do the credentials work
(impersonation included), are the regions reachable, are the H100/H200 machine types offered
there, how much GPU quota is free, and is the base (or baked) image present.

Each finding is a :class:`Finding`; the account passes when every finding is ``ok``.
Findings name references (project, service account, image family), never a token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from providers.errors import ProviderError
from providers.gcp import errors as gerr
from providers.gcp.offerings import list_offerings
from providers.gcp.provider import GcpProvider
from providers.gcp.quotas import quota_headroom
from providers.gcp.session import CALL_TIMEOUT_S


@dataclass(frozen=True)
class Finding:
    check: str  # credentials | project | region | offerings | quota | image
    target: str  # what was checked (project, region, image family)
    ok: bool
    detail: str


def preflight(
    provider: GcpProvider,
    regions: Sequence[str],
    *,
    images: Mapping[str, str] | None = None,
) -> list[Finding]:
    """``images``: region -> image reference to check (``projects/P/global/images/NAME``,
    ``projects/P/global/images/family/FAMILY``, a full URL, or a bare name in the
    account's project); without it, the adapter's base image family."""
    session = provider.session
    out: list[Finding] = []
    who = session.service_account or "application default credentials"
    if session.endpoint_url and not session.service_account:
        who = "anonymous (emulator)"

    try:
        creds = session.credentials()
        if session.service_account:
            from google.auth.transport.requests import Request

            creds.refresh(Request())  # generateAccessToken: fails here when not permitted
        out.append(Finding("credentials", who, True, "credentials obtained"))
    except Exception as exc:
        out.append(Finding("credentials", who, False, _why(exc)))
        return out  # nothing else can work

    try:
        session.client("ProjectsClient").get(
            project=session.project, retry=None, timeout=CALL_TIMEOUT_S
        )
        out.append(Finding("project", session.project, True, "reachable"))
    except Exception as exc:
        out.append(Finding("project", session.project, False, _why(exc)))
        return out

    for region in regions:
        try:
            info = session.client("RegionsClient").get(
                project=session.project, region=region, retry=None, timeout=CALL_TIMEOUT_S
            )
            up = info.status == "UP"
            out.append(Finding("region", region, up, f"{info.status}, {len(info.zones)} zones"))
        except Exception as exc:
            out.append(Finding("region", region, False, _why(exc)))
            continue
        try:
            offers = list_offerings(session, [region], provider.prices)
            available = sorted({o.instance_type for o in offers if o.available})
            offered = sorted({o.instance_type for o in offers})
            detail = (
                f"available: {', '.join(available)}"
                if available
                else f"none of {', '.join(offered)} is available"
            )
            out.append(Finding("offerings", region, bool(available), detail))
            free = quota_headroom(session, region)
            out.append(
                Finding(
                    "quota",
                    region,
                    any(v >= 8 for k, v in free.items() if k != "GPUS_ALL_REGIONS"),
                    ", ".join(f"{k}: {v:.0f} free" for k, v in sorted(free.items()))
                    or "no GPU quota reported",
                )
            )
        except Exception as exc:
            out.append(Finding("offerings", region, False, _why(exc)))

    # GCP images are global: the default base image is checked once; account files may name
    # an image (or family) per region.
    wanted = dict(images) if images else {"all regions": provider.base_image}
    for where, ref in sorted(wanted.items()):
        out.append(_image_finding(provider, where, ref))
    return out


_IMAGE_REF = re.compile(r"(?:^|/)projects/([^/]+)/global/images/(family/)?([^/]+)$")


def _image_finding(provider: GcpProvider, where: str, ref: str) -> Finding:
    session = provider.session
    m = _IMAGE_REF.search(ref)
    project, is_family, name = (m[1], bool(m[2]), m[3]) if m else (session.project, False, ref)
    client: Any = session.client("ImagesClient")
    try:
        if is_family:
            img = client.get_from_family(
                project=project, family=name, retry=None, timeout=CALL_TIMEOUT_S
            )
        else:
            img = client.get(project=project, image=name, retry=None, timeout=CALL_TIMEOUT_S)
    except Exception as exc:
        return Finding("image", f"{where}: {ref}", False, _why(exc))
    ready = img.status == "READY"
    return Finding("image", f"{where}: {ref}", ready, f"{img.name} ({img.status})")


def _why(exc: BaseException) -> str:
    try:
        err: ProviderError = gerr.from_exception(exc, gerr.Where())
    except Exception:
        return type(exc).__name__
    return f"{err.kind}: {err.message.splitlines()[0][:300]}"
