"""First come, first served over a model's slots: the one request-serving rule of the engine
and of the full-loop data plane."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")  # a replica's id


def advance(
    slots: list[tuple[float, R]],
    arrivals: list[float],
    service_s: list[float],
    i: int,
    starts: list[float],
    until: float,
    inclusive: bool,
    takes: Callable[[R], bool],
) -> int:
    """Start every request from index ``i`` whose start is before ``until`` (at it too, when
    ``inclusive``) on the earliest free slot (a heap of (free at, replica id)); a slot whose
    replica no longer ``takes`` requests is retired. Appends each start to ``starts`` and
    returns the index of the next request not started."""
    n = len(arrivals)
    append = starts.append
    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    while i < n and slots:
        free, rid = slots[0]
        if not takes(rid):
            heappop(slots)
            continue
        a = arrivals[i]
        s = a if a > free else free
        if s > until or (s == until and not inclusive):
            break
        heapreplace(slots, (s + service_s[i], rid))
        append(s)
        i += 1
    return i
