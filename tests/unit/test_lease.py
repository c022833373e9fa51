"""The pure lease decision, the shard hash and readiness."""

from __future__ import annotations

from controlplane.health import readiness
from controlplane.leadership import LeaseView
from controlplane.lifecycle.lease import Decision, LeaseRow, decide, local_deadline, shard_of

ME, OTHER = "a:1:x", "b:2:y"


def test_no_row_is_acquired_with_token_1() -> None:
    assert decide(None, 100.0, ME) == Decision("acquire", 1, ME)


def test_our_live_lease_is_renewed_with_the_same_token() -> None:
    assert decide(LeaseRow(0, ME, 7, 110.0), 100.0, ME) == Decision("renew", 7, ME)


def test_another_holders_live_lease_is_followed() -> None:
    assert decide(LeaseRow(0, OTHER, 7, 110.0), 100.0, ME) == Decision("follow", 7, OTHER)


def test_a_lapsed_lease_is_taken_over_with_the_next_token_even_by_its_last_holder() -> None:
    # Expiry is exclusive: at the instant it expires the lease is free.
    assert decide(LeaseRow(0, OTHER, 7, 100.0), 100.0, ME) == Decision("take_over", 8, ME)
    assert decide(LeaseRow(0, ME, 7, 99.0), 100.0, ME) == Decision("take_over", 8, ME)


def test_tokens_only_grow_over_a_sequence_of_terms() -> None:
    row: LeaseRow | None = None
    tokens = []
    for i, (who, now) in enumerate([(ME, 0.0), (ME, 5.0), (OTHER, 30.0), (ME, 60.0), (ME, 61.0)]):
        d = decide(row, now, who)
        assert d.kind != "follow", i
        tokens.append(d.token)
        row = LeaseRow(0, who, d.token, now + 15.0)
    assert tokens == [1, 1, 2, 3, 3]


def test_shards_are_stable_and_spread() -> None:
    assert shard_of("acme", 1) == 0
    assert shard_of("acme", 4) == shard_of("acme", 4)  # (CRC-32: the same in every process)
    assert {shard_of(f"customer-{i}", 4) for i in range(100)} == {0, 1, 2, 3}


def test_the_local_deadline_counts_from_when_the_renewal_was_sent() -> None:
    assert local_deadline(50.0, 15.0) == 65.0


def _view(**kw: object) -> LeaseView:
    base: dict[str, object] = {
        "holder": ME,
        "shards": 1,
        "ttl_s": 15.0,
        "acting": False,
        "answered_s_ago": 1.0,
    }
    return LeaseView(**{**base, **kw})  # type: ignore[arg-type]


INTERVALS = {"place": 10.0, "reconcile": 5.0}


def test_a_leader_and_a_standby_with_ticking_jobs_and_a_store_are_ready() -> None:
    leader = readiness(
        _view(acting=True, held={0: 3}), {"place": 95, "reconcile": 99}, INTERVALS, 3, 0, 100, None
    )
    assert leader.ready and leader.role == "leader"
    assert "token 3" in leader.checks["lease"]["detail"]
    standby = readiness(
        _view(following={0: OTHER}), {"place": 95, "reconcile": 99}, INTERVALS, 3, 0, 100, None
    )
    assert standby.ready and standby.role == "standby"
    assert OTHER in standby.checks["lease"]["detail"]


def test_each_failed_check_is_named() -> None:
    beats = {"place": 95.0, "reconcile": 99.0}
    # The lease table has not answered for longer than the TTL.
    r = readiness(
        _view(answered_s_ago=16.0, error="OperationalError: x"), beats, INTERVALS, 3, 0, 100, None
    )
    assert not r.ready and r.body()["failed"] == ["lease"]
    # Nobody holds the lease (and it is not us).
    r = readiness(_view(), beats, INTERVALS, 3, 0, 100, None)
    assert r.body()["failed"] == ["lease"]
    # reconcile last fired 16 s ago, 3 x 5 s allowed.
    r = readiness(
        _view(acting=True, held={0: 1}), {"place": 95, "reconcile": 84}, INTERVALS, 3, 0, 100, None
    )
    assert r.body()["failed"] == ["jobs"] and "reconcile" in r.checks["jobs"]["detail"]
    # The store does not answer.
    r = readiness(_view(acting=True, held={0: 1}), beats, INTERVALS, 3, 0, 100, "OperationalError")
    assert r.body()["failed"] == ["store"]


def test_a_job_that_never_fired_counts_from_the_start() -> None:
    view = _view(acting=True, held={0: 1})
    assert readiness(view, {}, INTERVALS, 3, 90.0, 100.0, None).ready
    assert not readiness(view, {}, INTERVALS, 3, 80.0, 100.0, None).ready
