"""Baked machine images (``controlplane/loop/images.py`` writes them): every build but
deleted ones, with whether new nodes of its key boot from it (``image_for``'s choice, the
newest ready build of the key) or a newer ready build superseded it (the planner's own rule,
``coldstart.images.superseded``). Read-only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, tuple_

from coldstart.images import BuildState, current, superseded
from controlplane.api.paging import Page, keyset, matching, page_request, take
from controlplane.loop.images import build_of, wanted_builds
from controlplane.store.db import Store
from controlplane.store.models import MachineImage


@dataclass(frozen=True)
class ImageView:
    row: MachineImage
    in_use: bool
    superseded_by: str | None
    age_s: float  # since it became ready; not ready (yet): since its build started


class Images:
    def __init__(self, store: Store, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    def list(
        self, customer: str | None = None, cloud: str | None = None, region: str | None = None
    ) -> tuple[ImageView, ...]:
        with self._store.session() as s:
            q = select(MachineImage).where(MachineImage.state != BuildState.DELETED.value)
            rows = list(s.scalars(q))  # (all keys: supersession crosses the filters' rows)
            wanted = wanted_builds(s)
            for r in rows:
                s.expunge(r)
        builds = [build_of(r) for r in rows]
        replaced = superseded(builds, wanted)
        used = set(current(builds).values())
        now = _aware(self._clock())
        out = []
        for r in sorted(rows, key=lambda r: (r.customer, r.account, r.region, r.created_at)):
            if customer and r.customer != customer:
                continue
            if (cloud and r.cloud != cloud) or (region and r.region != region):
                continue
            since = r.ready_at or r.created_at
            age = max(0.0, (now - _aware(since)).total_seconds())
            out.append(ImageView(r, r.id in used, replaced.get(r.id), age))
        return tuple(out)

    def page(
        self,
        customer: str | None = None,
        cloud: str | None = None,
        region: str | None = None,
        *,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[ImageView]:
        """One page of :meth:`list`, keyset on (customer, account, region, created_at, id);
        supersession is judged over every build of the page's (customer, account, region)."""
        filters = {
            "list": "images",
            "customer": customer or "",
            "cloud": cloud or "",
            "region": region or "",
        }
        req = page_request(page_size, page_token, filters)
        live = select(MachineImage).where(MachineImage.state != BuildState.DELETED.value)
        q = matching(
            live,
            (MachineImage.customer, customer),
            (MachineImage.cloud, cloud),
            (MachineImage.region, region),
        )
        order = (
            MachineImage.customer,
            MachineImage.account,
            MachineImage.region,
            MachineImage.created_at,
            MachineImage.id,
        )
        with self._store.session() as s:
            page = take(
                list(s.scalars(keyset(q, req, *order))),
                req,
                lambda r: (r.customer, r.account, r.region, r.created_at, r.id),
            )
            sites = {(r.customer, r.account, r.region) for r in page.items}
            site = tuple_(MachineImage.customer, MachineImage.account, MachineImage.region)
            rows = list(s.scalars(live.where(site.in_(sites)))) if sites else []
            wanted = wanted_builds(s)
            for r in rows:
                s.expunge(r)
        builds = [build_of(r) for r in rows]
        replaced = superseded(builds, wanted)
        used = set(current(builds).values())
        now = _aware(self._clock())
        by_id = {r.id: r for r in rows}
        out = []
        for p in page.items:
            r = by_id[p.id]
            age = max(0.0, (now - _aware(r.ready_at or r.created_at)).total_seconds())
            out.append(ImageView(r, r.id in used, replaced.get(r.id), age))
        return Page(out, page.next_page_token)


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)
