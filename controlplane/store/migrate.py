"""Schema migrations (Alembic). TODO(issue 2): Alembic environment; until then create_all."""

from __future__ import annotations

from controlplane.store.db import make_engine
from controlplane.store.models import Base


def upgrade(url: str) -> None:
    engine = make_engine(url)
    try:
        Base.metadata.create_all(engine)
    finally:
        engine.dispose()
