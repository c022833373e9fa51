"""Filtering and paging: the append-only logs (events, decisions) by id, and the List
RPCs' keyset pages (``page_size``, ``page_token`` -> ``next_page_token``, AIP-158)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, tuple_
from sqlalchemy.orm import InstrumentedAttribute, Session

from controlplane.api.errors import InvalidArgumentError, check_id

R = TypeVar("R")
T = TypeVar("T")
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


# ------------------------------------------------------------------ List RPCs (AIP-158)
#
# A List RPC takes ``page_size`` (0: DEFAULT_PAGE_SIZE; at most MAX_PAGE_SIZE) and
# ``page_token`` (empty: the first page) and returns ``next_page_token`` (empty: the last
# page). Pages are keyset pages: the token carries the sort key of the page's last row and a
# digest of the request's other fields, and the next page is the rows whose key is greater,
# in SQL (an index range, no OFFSET). A row that existed when the first page was read and
# whose key does not change appears on exactly one page, whatever is inserted meanwhile; a
# row inserted behind the reader's position is not seen (AIP-158 allows either).

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
_TOKEN_VERSION = 1


@dataclass(frozen=True)
class PageRequest:
    """A validated page request: at most ``size`` rows after the key ``after`` (None: from
    the first row), for the request whose other fields digest to ``query``."""

    size: int
    after: tuple[Any, ...] | None
    query: str

    def token(self, key: Sequence[Any]) -> str:
        """The token of the page after the row with sort key ``key``."""
        body = {"v": _TOKEN_VERSION, "q": self.query, "k": [_encode(v) for v in key]}
        raw = json.dumps(body, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_page_token: str = ""


def page_request(
    page_size: int,
    page_token: str,
    filters: Mapping[str, Any],
    *,
    default: int = DEFAULT_PAGE_SIZE,
    most: int = MAX_PAGE_SIZE,
) -> PageRequest:
    """``page_size`` and ``page_token`` checked (InvalidArgumentError naming the field): a
    negative size, or a token that is not one of ours, of another request's filters or of
    another list, is refused; a size over ``most`` is cut to it (AIP-158)."""
    if page_size < 0:
        raise InvalidArgumentError("page_size", f"must be >= 0 (got {page_size})")
    size = min(page_size or default, most)
    query = _digest(filters)
    if not page_token:
        return PageRequest(size, None, query)
    try:
        padded = page_token + "=" * (-len(page_token) % 4)
        body = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        ok = isinstance(body, dict) and body.get("v") == _TOKEN_VERSION
        key = tuple(_decode(v) for v in body["k"]) if ok else ()
    except (ValueError, TypeError, KeyError, UnicodeError):
        ok, key = False, ()
    if not ok or not key:
        raise InvalidArgumentError("page_token", "not a page token of this list")
    if body.get("q") != query:
        raise InvalidArgumentError(
            "page_token", "was given for a request with other filters: send the same ones"
        )
    return PageRequest(size, key, query)


def keyset(q: Q, req: PageRequest, *cols: InstrumentedAttribute[Any] | ColumnElement[Any]) -> Q:
    """``q`` ordered by ``cols`` (a unique key, ascending), after ``req``'s position, one row
    more than the page (to know whether another page follows)."""
    if req.after is not None:
        if len(req.after) != len(cols) or not all(map(_fits, cols, req.after)):
            raise InvalidArgumentError("page_token", "not a page token of this list")
        q = q.where(tuple_(*cols) > tuple_(*req.after))
    return q.order_by(*cols).limit(req.size + 1)


def take(rows: Sequence[T], req: PageRequest, key: Callable[[T], Sequence[Any]]) -> Page[T]:
    """The page of ``rows`` (a :func:`keyset` query's result) and its next token."""
    if len(rows) <= req.size:
        return Page(list(rows))
    items = list(rows[: req.size])
    return Page(items, req.token(key(items[-1])))


def log_page(
    s: Session,
    q: Select[R],
    id_col: InstrumentedAttribute[int],
    since_id: int,
    req: PageRequest,
) -> Page[R]:
    """A page of an append-only log (events, decisions) oldest first: rows with id above
    ``since_id`` and the token's, keyset on the id."""
    check_id("since_id", since_id)
    if since_id:
        q = q.where(id_col > since_id)
    rows = list(s.scalars(keyset(q, req, id_col)))
    return take(rows, req, lambda r: (getattr(r, id_col.key),))


def _digest(filters: Mapping[str, Any]) -> str:
    raw = json.dumps(filters, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _encode(v: Any) -> Any:
    if isinstance(v, datetime):
        return {"t": v.isoformat()}
    if v is None or isinstance(v, str | int | float | bool):
        return v
    raise TypeError(f"cannot put {type(v).__name__} in a page token")


def _decode(v: Any) -> Any:
    if isinstance(v, dict):
        return datetime.fromisoformat(v["t"])
    if v is None or isinstance(v, str | int | float | bool):
        return v
    raise TypeError("not a key value")


def _fits(col: InstrumentedAttribute[Any] | ColumnElement[Any], v: Any) -> bool:
    """A key value of the column's type (the token is the client's: never trusted)."""
    try:
        want = col.type.python_type
    except NotImplementedError:
        return True
    if want is float:
        return isinstance(v, int | float) and not isinstance(v, bool)
    return isinstance(v, want) and not (want is int and isinstance(v, bool))
