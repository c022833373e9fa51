"""A leader frozen between its fence check and its COMMIT (a SIGSTOP, a VM pause) does not
block the takeover: its transaction holds the lease row FOR SHARE, and PostgreSQL ends the
session once it has sat idle in that transaction for ``leases.FENCE_COMMIT_WITHIN_S``, so the
standby takes over and the frozen transaction's writes are lost with it. Found by
bench/chaos.py: a leader SIGSTOPped there kept its standbys out for as long as it was
stopped (20 s, the harness's cap)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from controlplane.store.db import Store
from controlplane.store.events import record_event
from controlplane.store.leases import check_fence
from controlplane.store.migrate import upgrade
from controlplane.store.models import Event
from tests.component.test_leadership import TTL, leadership, pg_url  # noqa: F401  (fixture)

TAKEOVER_WITHIN_S = 10.0  # bounds a wait on a loaded machine; frozen forever without the fix


def test_a_standby_takes_over_from_a_leader_frozen_before_its_commit(pg_url):  # noqa: F811
    upgrade(pg_url)
    store = Store.from_url(pg_url)
    a, b = leadership(pg_url, "A"), leadership(pg_url, "B")
    frozen = store.engine.connect()
    try:
        assert a.step().held == {0: 1}
        # A's acting transaction, as the store's before_commit runs it: its write flushed,
        # the fence checked (the lease row locked FOR SHARE)... and no COMMIT (frozen).
        s = Session(bind=frozen)
        record_event(s, datetime.now(UTC), "test.frozen", "written by A")
        s.flush()
        check_fence(s, "A", a.claims())

        time.sleep(TTL + 0.1)  # A's lease lapses on the database's clock
        took: list[float] = []

        def take_over() -> None:
            t0 = time.monotonic()
            while not b.step().held:
                time.sleep(0.05)
            took.append(time.monotonic() - t0)

        t = threading.Thread(target=take_over, daemon=True)
        t.start()
        t.join(TAKEOVER_WITHIN_S)
        if t.is_alive():
            s.rollback()  # (let B's blocked UPDATE go: the test has failed)
            t.join(30)
            pytest.fail(f"no takeover within {TAKEOVER_WITHIN_S} s of a frozen leader")
        assert took and took[0] < TAKEOVER_WITHIN_S
        assert b.acting() and b.claims() == {0: 2}
        # A thaws and commits: its session was ended by the server; nothing of it is kept.
        with pytest.raises(DBAPIError):
            s.commit()
        with store.session() as check:
            assert check.scalars(select(Event).where(Event.kind == "test.frozen")).all() == []
    finally:
        frozen.invalidate()
        frozen.close()
        a.close()
        b.close()
        store.close()
