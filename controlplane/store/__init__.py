"""Persistent state: SQLAlchemy 2 ORM tables, the engine/session factory and Alembic
migrations. SQLite (WAL) is the embedded default; PostgreSQL is selected by URL."""
