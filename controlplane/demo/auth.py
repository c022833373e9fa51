"""``gpucap daemon --demo --auth``: an admin token and one token per demo customer, each
written to a file of its own (owner-only) in the demo's state directory, so a user can try
every role (``GPUCAP_TOKEN_FILE=<file> gpucap models``)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from sqlalchemy import select

from controlplane import api_tokens
from controlplane.authz import ADMIN, Role
from controlplane.store.db import Store
from controlplane.store.models import Customer

TOKENS_SUBDIR = "tokens"
DESCRIPTION = "gpucap daemon --demo --auth"


def write_demo_tokens(store: Store, directory: Path, now: datetime) -> dict[str, Path]:
    """A new token per role (admin, then each customer in the store), each in
    ``<directory>/tokens/<role>.token`` (``customer:acme`` -> ``customer-acme.token``),
    revoking those an earlier start wrote; the role -> file written."""
    with store.session() as s:
        customers = list(s.scalars(select(Customer.name).order_by(Customer.name)))
    # A demo on a kept database (--database-url): the last start's tokens stop working.
    for old in api_tokens.list_tokens(store):
        if old.description == DESCRIPTION and old.revoked_at is None:
            api_tokens.revoke(store, old.id, now=now)
    folder = directory / TOKENS_SUBDIR
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for role in (ADMIN, *(Role(c) for c in customers)):
        made = api_tokens.create(store, role, now=now, description=DESCRIPTION)
        path = folder / f"{str(role).replace(':', '-')}.token"
        # Owner-only from the start: the secret never sits in a readable file.
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(made.token + "\n")
        written[str(role)] = path
    return written
