"""Cloud-agnostic preflight of an account through the :class:`~providers.base.Provider`
interface alone, for ``gpucap account check`` on clouds whose adapter has no
``providers/<cloud>/check.py`` (and for images a cloud's own check does not cover).

What the interface can show: the credentials work and each region answers (listing
offerings is an authenticated call), the H100/H200 node types are available there, and a
named image exists. Quota is not part of the interface, so it is reported as not checked
rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from providers.base import Provider
from providers.errors import AuthFailed, ProviderError
from schema.catalog import INSTANCE_TYPES


@dataclass(frozen=True)
class Finding:
    check: str  # credentials | region | offerings | quota | image | setup
    target: str
    ok: bool
    detail: str


def generic_preflight(
    provider: Provider, regions: Sequence[str], *, images: Mapping[str, str] | None = None
) -> list[Finding]:
    node_types = {t.name: t for t in INSTANCE_TYPES if t.cloud == provider.cloud and t.gpus == 8}
    out: list[Finding] = []
    for region in regions:
        try:
            offerings = provider.list_offerings([region])
        except AuthFailed as err:
            out.append(Finding("credentials", provider.account, False, why(err)))
            return out  # nothing else can work
        except ProviderError as err:
            out.append(Finding("region", region, False, why(err)))
            continue
        out.append(Finding("region", region, True, f"{len(offerings)} offerings listed"))
        zones: dict[str, list[str]] = {}
        for o in offerings:
            if o.available and o.instance_type in node_types:
                zones.setdefault(o.instance_type, []).append(o.zone)
        detail = (
            "; ".join(
                f"{name} ({node_types[name].gpu}) in {', '.join(sorted(set(z)))}"
                for name, z in sorted(zones.items())
            )
            or f"none of {', '.join(sorted(node_types))} is available in {region}"
        )
        out.append(Finding("offerings", region, bool(zones), detail))
        out.append(Finding("quota", region, True, "not checked: this adapter exposes no quota"))
    out.extend(image_findings(provider, images or {}))
    return out


def image_findings(provider: Provider, images: Mapping[str, str]) -> list[Finding]:
    out: list[Finding] = []
    for region, image_id in sorted(images.items()):
        target = f"{region} {image_id}"
        try:
            img = provider.describe_image(region, image_id)
        except ProviderError as err:
            out.append(Finding("image", target, False, why(err)))
            continue
        if img is None:
            out.append(Finding("image", target, False, f"{image_id} does not exist"))
        else:
            ok = img.state == "available"
            out.append(Finding("image", target, ok, f"{img.name} ({img.state})"))
    return out


def why(err: ProviderError) -> str:
    return f"{err.kind}({err.code or '-'}): {err.message.splitlines()[0][:300]}"
