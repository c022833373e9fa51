"""Every page of a List RPC as one response (AIP-158): the request sent again with each
``next_page_token`` until the server gives none, the pages' repeated fields concatenated
(``MergeFrom``), so a list command shows everything however the server pages it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf.message import Message

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

# The most pages one listing follows: at the server's largest page (1,000) ten million rows;
# only a server handing back tokens forever reaches it.
MAX_PAGES = 10_000


class PagingError(RuntimeError):
    """The server's tokens never ended (or repeated one): the listing would not finish."""


def all_pages(call: Callable[..., Resp], request: Req, *, timeout: float) -> Resp:
    """``call(request)`` for every page, merged into one response whose
    ``next_page_token`` is empty. Totals (scalar fields) are the last page's: a caller
    that shows one over the whole list adds them up itself (see ``pages``)."""
    return merge(pages(call, request, timeout=timeout))


def pages(call: Callable[..., Resp], request: Req, *, timeout: float) -> list[Resp]:
    out: list[Resp] = []
    seen: set[str] = set()
    req: Any = type(request)()
    req.CopyFrom(request)
    while True:
        resp = call(req, timeout=timeout)
        out.append(resp)
        token: str = resp.next_page_token
        if not token:
            return out
        if token in seen or len(out) >= MAX_PAGES:
            raise PagingError(f"the server's page tokens do not end (after {len(out)} pages)")
        seen.add(token)
        req.page_token = token


def merge(responses: list[Resp]) -> Resp:
    merged = type(responses[0])()
    for r in responses:
        merged.MergeFrom(r)
    merged.ClearField("next_page_token")
    return merged
