"""Each customer's active policy, parsed: read from the store, parsed again only when a
customer's active policy changes (by its sha256). For the parts that need more of a policy
than the store's rows keep (an account's staging bucket and budget)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from controlplane.store.models import Customer, PolicyVersion
from schema.policy import Policy
from schema.policy_file import parse_policy


class ActivePolicies:
    def __init__(self) -> None:
        self._parsed: dict[str, tuple[str, Policy]] = {}

    def read(self, s: Session, customer: str | None = None) -> dict[str, Policy]:
        """By customer name (of one customer only, when given)."""
        out: dict[str, Policy] = {}
        q = select(Customer)
        if customer:
            q = q.where(Customer.name == customer)
        for cust in s.scalars(q):
            pv = s.get(PolicyVersion, cust.active_policy_id) if cust.active_policy_id else None
            if pv is None:
                continue
            cached = self._parsed.get(cust.name)
            if cached is None or cached[0] != pv.sha256:
                cached = (pv.sha256, parse_policy(pv.raw_yaml, pv.source or cust.name).policy)
                self._parsed[cust.name] = cached
            out[cust.name] = cached[1]
        return out
