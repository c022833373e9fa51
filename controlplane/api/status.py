"""What ``gpucap status`` and ``gpucap events`` read: counts over the store, the daemon's
job ticks (given: the daemon owns them, :mod:`controlplane.jobticks`) and the event log."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from importlib import metadata

from sqlalchemy import func, select

from controlplane.api.errors import STORED_ID_MAX
from controlplane.api.paging import Page, log_page, matching, page, page_limit, page_request
from controlplane.api.views import StatusView
from controlplane.jobticks import JobTicks
from controlplane.leadership import LeaseView
from controlplane.store.db import Store
from controlplane.store.models import Customer, Event, Node, Pool
from controlplane.store.models import Model as ModelRow

MAX_EVENTS_PER_PAGE = 1000


class Status:
    def __init__(
        self,
        store: Store,
        clock: Callable[[], datetime],
        job_ticks: JobTicks | None = None,
        lease: Callable[[], LeaseView | None] | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._job_ticks = job_ticks  # None: no daemon runs jobs in this process
        self._lease = lease  # None: no leases in this process
        self.started_at = clock()

    def status(self) -> StatusView:
        now = self._clock()
        with self._store.session() as s:
            customers = s.scalar(select(func.count()).select_from(Customer)) or 0
            models = (
                s.scalar(
                    select(func.count()).select_from(ModelRow).where(ModelRow.deleted_at.is_(None))
                )
                or 0
            )
            pools = (
                s.scalar(select(func.count()).select_from(Pool).where(Pool.active.is_(True))) or 0
            )
            nodes = {
                st: n for st, n in s.execute(select(Node.state, func.count()).group_by(Node.state))
            }
            last_event = s.scalar(select(func.max(Event.id))) or 0
        return StatusView(
            version=_version(),
            started_at=self.started_at,
            uptime_s=max(0.0, (now - self.started_at).total_seconds()),
            customers=customers,
            models=models,
            pools=pools,
            nodes_by_state=nodes,
            jobs=self._job_ticks.snapshot() if self._job_ticks is not None else [],
            last_event_id=last_event,
            lease=self._lease() if self._lease is not None else None,
        )

    def last_event_id(self) -> int:
        with self._store.session() as s:
            return s.scalar(select(func.max(Event.id))) or 0

    def events(
        self,
        since_id: int = 0,
        limit: int = 100,
        *,
        customer: str | None = None,
        model: str | None = None,
    ) -> list[Event]:
        """Events with id > ``since_id``, oldest first, at most ``limit``. With
        ``since_id == 0`` the *newest* ``limit`` events (what ``tail`` shows)."""
        limit = page_limit(since_id, limit, MAX_EVENTS_PER_PAGE)
        if since_id > STORED_ID_MAX:
            return []  # (no event has a larger id)
        q = matching(select(Event), (Event.customer, customer), (Event.model, model))
        with self._store.session() as s:
            return page(s, q, Event.id, since_id, limit)

    def events_page(
        self,
        since_id: int = 0,
        *,
        customer: str | None = None,
        model: str | None = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[Event]:
        """A page of events with id > ``since_id``, oldest first (keyset on the id: AIP-158
        paging through the whole log)."""
        filters = {
            "list": "events",
            "since_id": since_id,
            "customer": customer or "",
            "model": model or "",
        }
        req = page_request(page_size, page_token, filters, most=MAX_EVENTS_PER_PAGE)
        q = matching(select(Event), (Event.customer, customer), (Event.model, model))
        with self._store.session() as s:
            return log_page(s, q, Event.id, since_id, req)


def _version() -> str:
    try:
        return metadata.version("gpucap")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"
