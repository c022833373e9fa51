"""Writing an event: one row in ``events`` (what ``gpucap events`` shows) and the same fact
as a structured log line, so the log and the API never tell different stories."""

from __future__ import annotations

from datetime import datetime

import structlog
from sqlalchemy.orm import Session

from controlplane.store.models import Event

log = structlog.get_logger("gpucap.events")


def record_event(
    s: Session,
    at: datetime,
    kind: str,
    message: str,
    *,
    customer: str | None = None,
    model: str | None = None,
    node: str | None = None,
    severity: str = "info",
) -> None:
    s.add(
        Event(
            at=at,
            kind=kind,
            severity=severity,
            customer=customer,
            model=model,
            node=node,
            message=message,
        )
    )
    emit = log.warning if severity in ("warning", "error") else log.info
    emit(kind, message=message, customer=customer, model=model, node=node)
