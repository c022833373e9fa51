"""Alembic revisions, applied in order by ``controlplane.store.migrate``."""
