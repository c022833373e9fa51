"""gpucap's identity on AWS resources: ownership tags as EC2 tag lists, and the RunInstances
``ClientToken`` derived from the intent (every cloud package has a ``tags`` module; each
cloud carries the same ownership tags in its own form)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any


def client_token(intent_id: str) -> str:
    """Stable ClientToken (<= 64 ASCII) for an intent: the same across process restarts,
    unlike the UUID botocore would generate per call (clouds.md §A.3)."""
    return hashlib.sha256(intent_id.encode()).hexdigest()[:64]


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """Tags in EC2's ``[{"Key": ..., "Value": ...}]`` form, in a stable order."""
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def tags_of(resource: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", []) or []}
