"""Preflight of an AWS account, for ``gpucap account check``: do the credentials work (the
assumed role included, and in the right account), are the regions reachable, which H100/H200
types the AZs offer, how much P-family quota is free, and is the base or baked AMI present.

Findings have the same shape for every cloud (``check``, ``target``, ``ok``, ``detail``)
and name references (role ARN, region, AMI id), never a key or a token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from providers.aws.errors import from_botocore
from providers.aws.offerings import AWS_TYPES, zones_and_offered
from providers.aws.provider import AwsProvider
from providers.aws.quotas import quota_headroom
from providers.errors import ProviderError
from providers.preflight import Finding

GPU_NODE_TYPES = tuple(t for t in AWS_TYPES if t.gpus == 8)  # the 8-GPU H100/H200 nodes
ONE_NODE_VCPUS = max(t.vcpus for t in GPU_NODE_TYPES)
_ROLE_ACCOUNT = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}):role/")


def preflight(
    provider: AwsProvider, regions: Sequence[str], *, images: Mapping[str, str] | None = None
) -> list[Finding]:
    sess = provider.session
    role = sess.credentials.role_arn
    who = role or (f"profile {sess.credentials.profile}" if sess.credentials.profile else "")
    who = who or "default credential chain"
    out: list[Finding] = []
    try:
        ident = sess.client("sts", sess.home_region).get_caller_identity()
    except Exception as exc:
        out.append(Finding("credentials", who, False, _why(from_botocore(exc))))
        return out  # nothing else can work
    match = _ROLE_ACCOUNT.match(role or "")
    wanted = match.group(1) if match else None
    if wanted and ident.get("Account") != wanted:
        detail = f"acting in account {ident.get('Account')}, but the role is in {wanted}"
        out.append(Finding("credentials", who, False, detail))
        return out
    out.append(
        Finding("credentials", who, True, f"acting as {ident.get('Arn')} ({ident.get('Account')})")
    )

    for region in regions:
        try:
            zones, offered = zones_and_offered(sess, region)
        except ProviderError as err:
            out.append(Finding("region", region, False, _why(err)))
            continue
        out.append(Finding("region", region, bool(zones), f"{len(zones)} availability zones"))
        parts = []
        for t in GPU_NODE_TYPES:
            where = sorted(z for (name, z) in offered if name == t.name)
            if where:
                parts.append(f"{t.name} ({t.gpu}) in {', '.join(where)}")
        detail = "; ".join(parts) or (
            f"none of {', '.join(t.name for t in GPU_NODE_TYPES)} is offered in {region}"
        )
        out.append(Finding("offerings", region, bool(parts), detail))
        out.append(_quota(provider, region))
        out.append(_image(provider, region, (images or {}).get(region)))
    return out


def _quota(provider: AwsProvider, region: str) -> Finding:
    try:
        h = quota_headroom(provider.session, region)
    except ProviderError as err:
        return Finding("quota", region, False, f"cannot read the quota: {_why(err)}")
    need = ONE_NODE_VCPUS if h.unit == "vCPUs" else 1
    detail = f"{h.name}: {h.free:g} of {h.limit:g} {h.unit} free"
    if h.free < need:
        detail += f" (one 8-GPU node needs {need} {h.unit})"
    return Finding("quota", region, h.free >= need, detail)


def _image(provider: AwsProvider, region: str, image_id: str | None) -> Finding:
    try:
        image_id = image_id or provider.base_image(region)
        img = provider.describe_image(region, image_id)
    except ProviderError as err:
        return Finding("image", region, False, _why(err))
    if img is None:
        return Finding("image", f"{region} {image_id}", False, f"{image_id} does not exist")
    ok = img.state == "available"
    return Finding("image", f"{region} {image_id}", ok, f"{img.name} ({img.state})")


def _why(err: ProviderError) -> str:
    return f"{err.kind}({err.code or '-'}): {err.message.splitlines()[0][:300]}"
