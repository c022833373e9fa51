"""Alembic migration environment and revisions for the gpucap store."""
