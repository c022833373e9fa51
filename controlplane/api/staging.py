"""What weights are staged where (``controlplane/loop/staging.py`` writes it): every copy
with its progress and storage cost, and every site (an account's staging bucket in one
region, from the customer's active policy) with its budget, what its copies hold and what
that costs a month. Read-only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from coldstart.staging import GB, storage_usd_per_month
from controlplane.active_policies import ActivePolicies
from controlplane.api.paging import keyset, page_request, take
from controlplane.store.db import Store
from controlplane.store.models import WeightCopy

# A copy in these states holds bytes at its site (what the planner counts in its budget).
HOLDING = ("pending", "copying", "ready")


@dataclass(frozen=True)
class SiteView:
    customer: str
    account: str
    cloud: str
    region: str
    prefix_uri: str
    budget_bytes: int
    used_bytes: int
    usd_per_gb_month: float

    @property
    def usd_per_month(self) -> float:
        return storage_usd_per_month(self.used_bytes, self.usd_per_gb_month)


@dataclass(frozen=True)
class CopyView:
    row: WeightCopy
    objects: int
    objects_done: int
    usd_per_month: float

    @property
    def progress(self) -> float:
        total = self.row.bytes_total or 0
        return min(1.0, (self.row.bytes_done or 0) / total) if total else 0.0


@dataclass(frozen=True)
class StagingView:
    copies: tuple[CopyView, ...]
    sites: tuple[SiteView, ...]


def _copies(customer: str | None, model: str | None) -> Select[WeightCopy]:
    q = select(WeightCopy).where(WeightCopy.state != "evicted")
    if customer:
        q = q.where(WeightCopy.customer == customer)
    if model:
        q = q.where(WeightCopy.model == model)
    return q


class Staging:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._policies = ActivePolicies()

    def list(self, customer: str | None = None, model: str | None = None) -> StagingView:
        with self._store.session() as s:
            q = _copies(customer, model)
            rows = list(s.scalars(q.order_by(WeightCopy.customer, WeightCopy.model, WeightCopy.id)))
            return self._view(s, customer, model, rows)

    def page(
        self,
        customer: str | None = None,
        model: str | None = None,
        *,
        page_size: int = 0,
        page_token: str = "",
    ) -> tuple[StagingView, str]:
        """A page of :meth:`list`'s copies, keyset on (customer, model, id), and the next
        page's token; the sites (a few per policy, not per copy) come with the first page."""
        req = page_request(
            page_size, page_token, {"list": "staging", "customer": customer or "", "model": model}
        )
        with self._store.session() as s:
            q = keyset(
                _copies(customer, model), req, WeightCopy.customer, WeightCopy.model, WeightCopy.id
            )
            page = take(list(s.scalars(q)), req, lambda r: (r.customer, r.model, r.id))
            view = self._view(s, customer, model, page.items)
        if req.after is not None:
            view = StagingView(view.copies, ())
        return view, page.next_page_token

    def _view(
        self, s: Session, customer: str | None, model: str | None, rows: Sequence[WeightCopy]
    ) -> StagingView:
        held = list(
            s.execute(
                select(
                    WeightCopy.customer,
                    WeightCopy.account,
                    WeightCopy.region,
                    WeightCopy.bytes_total,
                ).where(WeightCopy.state.in_(HOLDING))
            )
        )
        policies = self._policies.read(s, customer)
        sites = []
        for cust, policy in sorted(policies.items()):
            for acct in policy.accounts:
                if acct.staging is None:
                    continue
                for region in acct.regions:
                    used = sum(
                        int(b or 0) for c, a, r, b in held if (c, a, r) == (cust, acct.name, region)
                    )
                    sites.append(
                        SiteView(
                            cust,
                            acct.name,
                            acct.cloud.value,
                            region,
                            acct.staging_uri(region) or "",
                            int(acct.staging.budget_gb * GB),
                            used,
                            acct.staging.price(acct.cloud),
                        )
                    )
        if model:  # only the sites its copies are in
            mine = {(r.customer, r.account, r.region) for r in rows}
            sites = [x for x in sites if (x.customer, x.account, x.region) in mine]
        price = {(x.customer, x.account, x.region): x.usd_per_gb_month for x in sites}
        copies = []
        for r in rows:
            objects = (r.transfer or {}).get("objects", [])
            held_bytes = int(r.bytes_total or 0) if r.state in HOLDING else 0
            cost = storage_usd_per_month(
                held_bytes, price.get((r.customer, r.account, r.region), 0.0)
            )
            copies.append(CopyView(r, len(objects), sum(1 for o in objects if o.get("done")), cost))
        return StagingView(tuple(copies), tuple(sites))
