"""Names, labels and request ids that gpucap puts on GCP resources, derived from the intent
(every cloud package has a ``tags`` module; each cloud carries the ownership tags in its own
form).

GCP label rules: keys and values are at most 63 characters of lowercase letters, digits,
``_`` and ``-``; a key starts with a lowercase letter; values may be empty. gpucap's ownership
tags (``providers.base.ownership_tags``) are free-form, so they are *mapped*:

- key: lowercased, any other character becomes ``_``, prefixed with ``k`` when it does not
  start with a letter, cut to 63;
- value: lowercased, any other character becomes ``_``; when that changed anything (an
  uppercase letter, a ``:`` ...) or the value is longer than 63, the value is cut and a hash
  of the *original* is appended, so two different tag values never share a label value.

The mapping is deterministic, so a list by tags filters on the mapped labels server side; the
exact tags ride along in the instance metadata item ``gpucap-tags`` (JSON, no such limits)
and are what describe/list return and compare. Metadata is readable by anyone who can read
the instance, so it holds the ownership tags only, never anything secret.

The VM name is GCP's idempotency anchor (names are unique per zone, clouds.md §A.1):
``gpucap-<slug>-<hash>``, deterministic in the intent id. The insert's ``requestId`` must be
a valid non-zero UUID (§A.4), so it is ``uuid5`` of the intent id (plus a salt when a token
was spent by an earlier, finished attempt; see ``instances.py``).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping

TAGS_METADATA_KEY = "gpucap-tags"
USER_DATA_METADATA_KEY = "user-data"  # cloud-init reads user-data from GCE metadata
_NAMESPACE = uuid.UUID("6f1d3c2e-8a4b-5c6d-9e0f-1a2b3c4d5e6f")  # gpucap GCP request ids
_BAD = re.compile(r"[^a-z0-9_-]")
_MAX = 63


def _digest(text: str, n: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def label_key(key: str) -> str:
    k = _BAD.sub("_", key.lower())
    if not k or not k[0].isalpha():
        k = "k" + k
    return k[:_MAX]


def label_value(value: str) -> str:
    v = _BAD.sub("_", value.lower())
    if v == value and len(v) <= _MAX:
        return v
    return f"{v[: _MAX - 11]}-{_digest(value)}"


def labels_for(tags: Mapping[str, str]) -> dict[str, str]:
    return {label_key(k): label_value(v) for k, v in tags.items()}


def label_filter(tags: Mapping[str, str]) -> str:
    """A Compute list filter matching every tag (as labels), e.g.
    ``(labels.gpucap-pool = "h100") AND (labels.gpucap-managed = "true")``."""
    return " AND ".join(f'(labels.{k} = "{v}")' for k, v in sorted(labels_for(tags).items()))


def vm_name(intent_id: str) -> str:
    """``[a-z]([-a-z0-9]{0,61}[a-z0-9])?``, unique per intent, readable where possible."""
    slug = re.sub(r"[^a-z0-9-]+", "-", intent_id.lower()).strip("-")[:40].strip("-")
    return f"gpucap-{slug}-{_digest(intent_id)}" if slug else f"gpucap-{_digest(intent_id)}"


def request_id(intent_id: str, after: str = "") -> str:
    """The insert ``requestId``: stable for one intent; ``after`` (the name of a finished
    operation that spent the previous id) derives the next one deterministically."""
    return str(uuid.uuid5(_NAMESPACE, f"{intent_id}\x00{after}"))


def delete_request_id(instance_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"delete\x00{instance_id}"))


def image_request_id(project: str, name: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"image\x00{project}\x00{name}"))
