from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.jobticks import JobTick, JobTicks

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_ticks_count_runs_and_failures_per_job_and_keep_the_last() -> None:
    ticks = JobTicks()
    ticks.record("reconcile", T0, 0.25, error="ThrottledError: slow")
    ticks.record("reconcile", T0, 0.5)
    ticks.record("decide", T0, 0.01)
    decided, reconciled = ticks.snapshot()
    assert decided == JobTick(
        "decide", T0, 0.01, "", last_succeeded_at=T0 + timedelta(seconds=0.01), runs=1
    )
    assert reconciled == JobTick(
        "reconcile", T0, 0.5, "", last_succeeded_at=T0 + timedelta(seconds=0.5), runs=2, failures=1
    )


def test_a_snapshot_is_a_copy() -> None:
    ticks = JobTicks()
    ticks.record("place", T0, 0.1)
    [seen] = ticks.snapshot()
    ticks.record("place", T0, 0.2, error="boom")
    assert (seen.runs, seen.last_error) == (1, "")
    assert JobTicks().snapshot() == []
