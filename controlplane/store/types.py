"""Column types that behave the same on SQLite and PostgreSQL.

``DateTime(timezone=True)`` alone does not: PostgreSQL returns aware datetimes, while
SQLite has no timestamp type, drops the offset on write and returns naive values, so a
``+02:00`` time would silently come back two hours off and comparisons with aware
``now`` values would raise. :class:`UTCDateTime` stores every instant as UTC and always
returns an aware UTC datetime.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """An instant in time: aware datetimes in, aware UTC datetimes out, on every backend.

    Naive datetimes are refused: their meaning depends on the writer's local zone, which
    is exactly the ambiguity this type exists to remove."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"naive datetime {value.isoformat()} refused: store aware times, "
                "e.g. datetime.now(UTC)"
            )
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":  # SQLite keeps the text without offset: always UTC
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:  # written by process_bind_param above, so it is UTC
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
