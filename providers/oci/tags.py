"""gpucap's identity on OCI resources: ownership tags as freeform tags, and the
``opc-retry-token`` idempotency keys derived from the intent (every cloud package has a
``tags`` module; each cloud carries the same ownership tags in its own form)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

# OCI retry tokens: at most 64 characters (oci ComputeClient docstring).
_TOKEN_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def retry_token(intent_id: str, replaced: str | None = None) -> str:
    """The opc-retry-token for an intent: the intent id itself when OCI accepts it, else a
    digest; chained to a replaced (terminated) instance's OCID after a re-create."""
    if replaced is None and _TOKEN_OK.match(intent_id):
        return intent_id
    seed = intent_id if replaced is None else f"{intent_id}\x00{replaced}"
    return hashlib.sha256(seed.encode()).hexdigest()[:64]


def image_retry_token(source_instance_id: str, name: str) -> str:
    """Same (instance, name) -> same token: a retried image create returns the first image."""
    return hashlib.sha256(f"{source_instance_id}\x00{name}".encode()).hexdigest()[:64]


def tags_of(resource: Any) -> dict[str, str]:
    return dict(resource.freeform_tags or {})
