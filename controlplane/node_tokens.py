"""A node's boot token: a secret the daemon puts into one node's user data, so that node
(and only it) can report its boot phases. Stored as its sha256 only, with an expiry; spent
(expired) once the node reports the end of its boot (``ready`` or ``failed``). The daemon
derives it from its own key and the node's intent id (:class:`NodeTokens`), so a create
retried after a lost answer renders the same user data as the instance the first one made."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field

# A boot takes a cold start (coldstart.md §5: 10-15 minutes typical for 8xH100, up to ~30
# with large weights); the token outlives the daemon's provision timeout with margin.
TOKEN_TTL_S = 2 * 3600.0


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored: str | None) -> bool:
    return stored is not None and hmac.compare_digest(digest(secret), stored)


_DOMAIN = b"gpucap-node-token:"
NODE_TOKEN_KEY_FILE = "node-token.key"  # in the daemon's state directory


@dataclass(frozen=True)
class NodeTokens:
    key: bytes = field(repr=False)  # never in repr, logs or tracebacks

    def __post_init__(self) -> None:
        if len(self.key) < 16:
            raise ValueError("the node token key must be at least 16 bytes")

    def for_node(self, node_id: str) -> str:
        mac = hmac.new(self.key, _DOMAIN + node_id.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")
