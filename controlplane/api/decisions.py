"""Recorded decisions: list them, and replay an autoscale decision on its recorded inputs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from autoscaler import Autoscaler, Decision
from controlplane.api.errors import (
    STORED_ID_MAX,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    check_id,
)
from controlplane.api.paging import Page, log_page, matching, page, page_limit, page_request
from controlplane.api.views import ReplayView
from controlplane.decider_code import decider_code
from controlplane.replay import ReplayError, replay
from controlplane.store.db import Store
from controlplane.store.models import DecisionRecord
from schema.policy import echo

MAX_DECISIONS_PER_PAGE = 1000
DECISION_KINDS = ("autoscale", "placement")
# Decisions the loop's decide job records without running the autoscaler: on-call
# overrides, so there is nothing to replay.
OVERRIDE_REASONS = {
    "pinned": "replicas pinned by on-call",
    "paused": "autoscaler paused by on-call",
}


class Decisions:
    def __init__(self, store: Store, autoscaler: Autoscaler) -> None:
        self._store = store
        # Replays must run the decider the daemon's loop runs; the daemon passes its own.
        self._autoscaler = autoscaler

    def list(
        self,
        customer: str | None = None,
        model: str | None = None,
        kind: str | None = None,
        *,
        since_id: int = 0,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[DecisionRecord]:
        """Recorded decisions, oldest first. With ``since_id`` or ``since``: the oldest
        ``limit`` after them (paging forward); otherwise the newest ``limit``."""
        if kind and kind not in DECISION_KINDS:
            raise InvalidArgumentError(
                "kind", f"unknown decision kind {echo(kind)} (one of: {', '.join(DECISION_KINDS)})"
            )
        limit = page_limit(since_id, limit, MAX_DECISIONS_PER_PAGE)
        if since_id > STORED_ID_MAX:
            return []  # (no decision has a larger id)
        q = matching(
            select(DecisionRecord),
            (DecisionRecord.customer, customer),
            (DecisionRecord.model, model),
            (DecisionRecord.kind, kind),
        )
        if since is not None:
            q = q.where(DecisionRecord.at >= since)
        with self._store.session() as s:
            return page(s, q, DecisionRecord.id, since_id, limit, forward=since is not None)

    def page(
        self,
        customer: str | None = None,
        model: str | None = None,
        kind: str | None = None,
        *,
        since_id: int = 0,
        since: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[DecisionRecord]:
        """A page of recorded decisions, oldest first, after ``since_id`` and ``since``
        (keyset on the id: AIP-158 paging through the whole log)."""
        if kind and kind not in DECISION_KINDS:
            raise InvalidArgumentError(
                "kind", f"unknown decision kind {kind!r} (one of: {', '.join(DECISION_KINDS)})"
            )
        filters = {
            "list": "decisions",
            "customer": customer or "",
            "model": model or "",
            "kind": kind or "",
            "since_id": since_id,
            "since": since.isoformat() if since else "",
        }
        req = page_request(page_size, page_token, filters, most=MAX_DECISIONS_PER_PAGE)
        q = matching(
            select(DecisionRecord),
            (DecisionRecord.customer, customer),
            (DecisionRecord.model, model),
            (DecisionRecord.kind, kind),
        )
        if since is not None:
            q = q.where(DecisionRecord.at >= since)
        with self._store.session() as s:
            return log_page(s, q, DecisionRecord.id, since_id, req)

    def replay(self, decision_id: int) -> ReplayView:
        """Re-run the autoscaler on a recorded autoscale decision's inputs and prior state.
        Placement records and on-call overrides are not autoscaler outputs, and records
        without inputs cannot be rebuilt: both are FailedPreconditionError."""
        if decision_id <= 0:
            raise InvalidArgumentError("id", f"required: a decision id (got {decision_id})")
        check_id("id", decision_id)
        with self._store.session() as s:
            record = s.get(DecisionRecord, decision_id) if decision_id <= STORED_ID_MAX else None
            if record is None:
                raise NotFoundError("decision", str(decision_id))
        why_not = _not_replayable(record)
        if why_not:
            raise FailedPreconditionError(f"decision {decision_id} cannot be replayed: {why_not}")
        assert record.desired is not None  # _not_replayable checked
        recorded = Decision(record.desired, record.reason, record.detail)
        try:
            result = replay(self._autoscaler, recorded, dict(record.inputs))
        except ReplayError as exc:
            cause = exc.__cause__
            why = (
                f"its recorded inputs lack {cause.args[0]!r}"
                if isinstance(cause, KeyError)
                else f"its recorded inputs are malformed ({cause or exc})"
            )
            raise FailedPreconditionError(
                f"decision {decision_id} cannot be replayed: {why}"
            ) from exc
        made_by = record.inputs.get("decider")
        name = code = None
        if isinstance(made_by, dict):
            name = str(made_by["name"]) if made_by.get("name") else None
            code = str(made_by["code"]) if made_by.get("code") else None
        return ReplayView(record, self._autoscaler.name, result, decider_code(), name, code)


def _not_replayable(record: DecisionRecord) -> str:
    """Why a decision record cannot be replayed ("" when it can)."""
    if record.kind != "autoscale":
        return (
            f"it is a {record.kind} decision, not an autoscaler output "
            "(its detail lists the plan and its rejections)"
        )
    if record.reason in OVERRIDE_REASONS:
        return (
            f"it is an on-call override ({OVERRIDE_REASONS[record.reason]}), "
            "not an autoscaler output"
        )
    if record.desired is None:
        return "it records no desired replica count"
    if not record.inputs:
        return "it has no recorded inputs (decisions before inputs were recorded cannot be rebuilt)"
    return ""


def is_replayable(record: DecisionRecord) -> bool:
    return not _not_replayable(record)
