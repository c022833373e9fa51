"""Filtering and paging of the append-only logs (events, decisions) by id."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import InstrumentedAttribute, Session

from controlplane.api.errors import InvalidArgumentError, check_id

R = TypeVar("R")
Q = TypeVar("Q", bound="Select[*tuple[Any, ...]]")  # any select, narrowed by matching


def page_limit(since_id: int, limit: int, most: int) -> int:
    check_id("since_id", since_id)
    if limit < 0:
        raise InvalidArgumentError("limit", f"must be >= 0 (got {limit})")
    return min(limit or 100, most)


def matching(q: Q, *filters: tuple[InstrumentedAttribute[Any], str | None]) -> Q:
    """``q`` narrowed to rows whose column equals each filter's value; an unset (None or
    empty) filter matches everything."""
    for column, value in filters:
        if value:
            q = q.where(column == value)
    return q


def page(
    s: Session,
    q: Select[R],
    id_col: InstrumentedAttribute[int],
    since_id: int,
    limit: int,
    *,
    forward: bool = False,
) -> list[R]:
    """Rows oldest first: after ``since_id`` (or when ``forward``), the oldest ``limit``
    (paging forward); otherwise the newest ``limit`` (what ``tail`` shows)."""
    if since_id:
        q = q.where(id_col > since_id)
    if since_id or forward:
        return list(s.scalars(q.order_by(id_col).limit(limit)))
    return list(s.scalars(q.order_by(id_col.desc()).limit(limit)))[::-1]
