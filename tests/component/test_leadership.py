"""Leases and fencing on the real databases (SQLite and PostgreSQL): who acts, takeovers,
and a deposed leader's late writes rolled back; two control loops on one database place a
model's replicas once (the 8-for-5 bug, reproduced first without the fence)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.leadership import Leadership
from controlplane.loop import ControlLoop, LoopContext
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Fence, Store, make_engine
from controlplane.store.leases import Fenced
from controlplane.store.migrate import upgrade
from controlplane.store.models import Event, Lease, Model, Replica
from controlplane.telemetry import Metrics
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimTimings
from tests.component.test_control_loop import POLICY, TUNING, Clock, ScriptedLoad
from tests.conftest import PG_URL

TTL = 0.6


def leadership(url: str, holder: str, *, shards: int = 1, ttl_s: float = TTL) -> Leadership:
    return Leadership.from_url(url, holder=holder, shards=shards, ttl_s=ttl_s)


@pytest.fixture
def pair(db_url: str, store: Store) -> Iterator[tuple[Leadership, Leadership]]:
    a, b = leadership(db_url, "A"), leadership(db_url, "B")
    yield a, b
    a.close()
    b.close()


def rows(store: Store) -> dict[int, tuple[str, int]]:
    with store.session() as s:
        return {r.shard: (r.holder, r.token) for r in s.scalars(select(Lease))}


def test_one_holds_the_other_follows_and_a_renewal_keeps_the_token(pair, store):
    a, b = pair
    assert a.step().held == {0: 1}
    assert a.acting()
    vb = b.step()
    assert not b.acting() and vb.role == "standby" and vb.following == {0: "A"}
    assert a.step().held == {0: 1}  # renewed: the same token
    assert rows(store) == {0: ("A", 1)}


def test_a_lapsed_lease_is_taken_over_with_a_new_token_and_its_holder_stops_at_once(pair, store):
    a, b = pair
    a.step()
    time.sleep(TTL + 0.1)  # A's renewals stop (as if it hung or died)
    assert not a.acting()  # on its own clock, without asking the database
    with pytest.raises(Fenced):
        a.claims()
    assert b.step().held == {0: 2}
    assert b.acting()
    va = a.step()
    assert not a.acting() and va.following == {0: "B"}
    assert rows(store) == {0: ("B", 2)}


def test_a_clean_stop_releases_so_the_standby_takes_over_at_its_next_look(pair, store):
    a, b = pair
    a.step()
    b.step()
    a.stop(release=True)
    assert b.step().held == {0: 2}  # no TTL to wait out


def test_two_takeovers_from_the_same_observation_cannot_both_win(db_url, store):
    from controlplane.lifecycle.lease import decide
    from controlplane.store import leases

    a, b, c = (leadership(db_url, h) for h in "ABC")
    try:
        a.step()
        time.sleep(TTL + 0.1)
        with b.engine.begin() as conn:
            now, seen = leases.observe(conn, range(1))
        row = seen[0]
        db, dc = decide(row, now, "B"), decide(row, now, "C")
        assert db.kind == dc.kind == "take_over" and db.token == dc.token == 2
        with b.engine.begin() as conn:
            assert leases.apply(conn, 0, row, db, TTL)
        with c.engine.begin() as conn:
            assert not leases.apply(conn, 0, row, dc, TTL)  # compare-and-set: token moved
        assert rows(store) == {0: ("B", 2)}
    finally:
        for x in (a, b, c):
            x.close()


def test_two_shards_go_to_one_daemon_and_a_split_is_mended(db_url, store):
    a = leadership(db_url, "A", shards=2, ttl_s=10.0)
    b = leadership(db_url, "B", shards=2, ttl_s=10.0)
    try:
        assert a.step().held == {0: 1, 1: 1} and a.acting()
        assert b.step().following == {0: "A", 1: "A"} and not b.acting()
        # A split (B holds shard 1 while A holds shard 0; e.g. B was shard 1's last holder):
        # B lets shard 1 go since a lower shard is another's, and A takes it.
        with store.session() as s:
            lease = s.get(Lease, 1)
            assert lease is not None
            lease.holder, lease.token = "B", 5
        b.step()
        assert not b.acting()
        assert a.step().held == {0: 1, 1: 6}
        assert a.acting()
        a.stop(release=True)
        assert b.step().held == {0: 2, 1: 7} and b.acting()
    finally:
        a.close()
        b.close()


# ---------------------------------------------------------------------- the fence


@dataclass
class FrozenClaim:
    """A leader whose own clock still says it leads (a paused process whose monotonic clock
    did not see the pause): only the database's check stands between it and a late write."""

    holder: str
    tokens: Mapping[int, int]

    def claims(self) -> Mapping[int, int]:
        return self.tokens


def _event(s: Session, text_: str) -> None:
    s.add(Event(at=datetime.now(UTC), kind="test.write", message=text_, severity="info"))


def _events(store: Store) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(Event.message)))


def test_the_leaders_writes_commit_and_reads_need_no_lease(pair, store):
    a, b = pair
    a.step()
    b.step()
    with store.fenced(a).session() as s:
        _event(s, "by the leader")
    with store.fenced(b).session() as s:  # a standby reads freely
        assert s.scalar(select(Event.message)) == "by the leader"
    with pytest.raises(Fenced), store.fenced(b).session() as s:
        _event(s, "by the standby")
    assert _events(store) == ["by the leader"]


@pytest.mark.parametrize("view", ["own clock", "database"])
def test_a_deposed_leaders_in_flight_write_is_rejected(pair, store, db_url, view):
    a, b = pair
    a.step()
    fence: Fence = a if view == "own clock" else FrozenClaim("A", {0: 1})
    with pytest.raises(Fenced) as caught, store.fenced(fence).session() as s:
        _event(s, "late write of A")
        if db_url.startswith("postgresql"):
            s.flush()  # A's rows are in the database, uncommitted, while B takes over
        time.sleep(TTL + 0.1)  # A's lease lapses
        assert b.step().held == {0: 2}  # B takes over with a new token
    # ... and A's transaction commits now: Fenced, nothing of it kept.
    if view == "database":
        assert "superseded by 2" in str(caught.value)
    assert _events(store) == []
    assert rows(store) == {0: ("B", 2)}


def test_a_bulk_update_is_fenced_too(pair, store):
    a, b = pair
    b.step()  # B leads; A never did
    ControlPlaneService(store).apply_policy(POLICY, source="demo", applied_by="test")
    with pytest.raises(Fenced), store.fenced(FrozenClaim("A", {0: 1})).session() as s:
        s.execute(text("UPDATE models SET paused = TRUE"))
    with store.session() as s:
        assert not any(s.scalars(select(Model.paused)))


# ---------------------------------------------------------------------- 8 for 5


@pytest.fixture
def pg_url(pg_available: bool) -> Iterator[str]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


class Interleaved(Store):
    """The real store, but each session waits with its writes flushed and not yet committed
    until the other loop's session has got as far: the interleaving of two daemons placing
    in the same second, every time (READ COMMITTED: neither sees the other's launches)."""

    def __init__(self, engine: Engine, barrier: threading.Barrier, fence: Fence | None) -> None:
        super().__init__(engine, fence)
        self._owns_engine = False
        self.barrier = barrier

    @contextmanager
    def session(self) -> Iterator[Session]:
        with super().session() as s:
            yield s
            s.flush()
            self.barrier.wait(timeout=30)


def _loops(url: str, fences: list[Fence | None]) -> tuple[Store, list[ControlLoop]]:
    upgrade(url)
    base = Store.from_url(url)
    service = ControlPlaneService(base)
    service.apply_policy(POLICY, source="demo", applied_by="test")
    service.pin_model("demo", "chat-8b", 5)
    barrier = threading.Barrier(len(fences))
    loops = []
    for fence in fences:
        clock = Clock()
        sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
        ctx = LoopContext(
            store=Interleaved(base.engine, barrier, fence),
            providers=SimResolver(sim, retry=NO_RETRY),
            metrics_source=ScriptedLoad(),
            health=SimHealth(sim),
            autoscaler=GpucapAutoscaler(),
            telemetry=Metrics(),
            tuning=TUNING,
            clock=clock,
        )
        loops.append(ControlLoop(ctx))
    ControlLoop(replace_store(loops[0].ctx, base)).decide()  # desired: 5 (pinned)
    return base, loops


def replace_store(ctx: LoopContext, store: Store) -> LoopContext:
    from dataclasses import replace

    return replace(ctx, store=store)


def _place_together(loops: list[ControlLoop]) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(loop: ControlLoop) -> None:
        try:
            loop.place()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(lp,)) for lp in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


def _replicas(store: Store, model: str) -> int:
    with store.session() as s:
        m = s.scalars(select(Model).where(Model.name == model)).one()
        assert m.desired_replicas == 5
        return len(list(s.scalars(select(Replica).where(Replica.model_id == m.id))))


def test_two_loops_without_leases_place_a_model_twice(pg_url):
    """The bug, reproduced: both read no replicas, both launch 5."""
    store, loops = _loops(pg_url, [None, None])
    try:
        assert _place_together(loops) == []
        assert _replicas(store, "chat-8b") == 10
    finally:
        store.close()


def test_two_loops_with_leases_place_exactly_the_desired_replicas(pg_url):
    a, b = leadership(pg_url, "A", ttl_s=15.0), leadership(pg_url, "B", ttl_s=15.0)
    try:
        store, loops = _loops(pg_url, [a, b])
        a.step()
        b.step()
        assert a.acting() and not b.acting()
        # Both run place (the daemon would not even start B's tick): B's launches are
        # fenced at its commit, A's commit.
        errors = _place_together(loops)
        assert [type(e) for e in errors] == [Fenced]
        assert _replicas(store, "chat-8b") == 5
        store.close()
    finally:
        a.close()
        b.close()
