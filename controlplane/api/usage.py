"""Usage metering for callers (``GetUsage``, ``gpucap usage``): the request checked, the
range closed at the clock's now (a node still running bills up to now, never into the
future), the rows read at the store's edge and summed by ``controlplane.usage``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from controlplane.api.errors import InvalidArgumentError, NotFoundError
from controlplane.store.db import Store
from controlplane.store.models import Customer
from controlplane.store.usage import node_uses
from controlplane.usage import EPOCH, GROUP_KEYS, UsageRow, micros, usage
from schema.policy import echo


@dataclass(frozen=True)
class UsageView:
    since: datetime
    until: datetime
    rows: tuple[UsageRow, ...]

    @property
    def gpu_hours(self) -> float:
        return math.fsum(r.gpu_hours for r in self.rows)

    @property
    def node_hours(self) -> float:
        return math.fsum(r.node_hours for r in self.rows)

    @property
    def cost_usd(self) -> float:
        return math.fsum(r.cost_usd for r in self.rows)


class Usage:
    def __init__(self, store: Store, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    def get(
        self,
        customer: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        group_by: Sequence[str] = (),
    ) -> UsageView:
        """Usage within [since, until) (unset: from the first node; until now), per
        customer and the ``group_by`` keys; ``customer`` None: every customer."""
        keys = _group_keys(group_by)
        now = self._clock()
        start = since or EPOCH
        end = min(until, now) if until is not None else now
        if until is not None and since is not None and until <= since:
            raise InvalidArgumentError(
                "until", f"must be after since ({until.isoformat()} <= {since.isoformat()})"
            )
        with self._store.session() as s:
            if customer is not None and s.get(Customer, customer) is None:
                raise NotFoundError("customer", customer)
            uses = node_uses(s, start, end, customer) if start < end else []
        rows = usage(uses, micros(start), micros(end), keys) if start < end else []
        return UsageView(start, max(start, end), tuple(rows))


def _group_keys(group_by: Sequence[str]) -> tuple[str, ...]:
    """The group keys in the order given, once each; INVALID_ARGUMENT naming the first
    unknown one (``customer`` is every row's key already: accepted, changes nothing)."""
    keys: list[str] = []
    for i, key in enumerate(group_by):
        if key == "customer":
            continue
        if key not in GROUP_KEYS:
            raise InvalidArgumentError(
                f"group_by[{i}]",
                f"unknown group key {echo(key)}: one of customer, {', '.join(GROUP_KEYS)}",
            )
        if key not in keys:
            keys.append(key)
    return tuple(keys)
