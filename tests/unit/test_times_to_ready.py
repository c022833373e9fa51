"""Observed times-to-ready: a failed launch counts until its replacement is ready."""

from __future__ import annotations

import pytest

from coldstart.observed import REPLACED_WITHIN_S, Launch, times_to_ready


def test_ready_replicas_count_their_own_time_in_the_order_they_were_ready() -> None:
    launches = [
        Launch(1, "aws", created=0.0, ready=700.0),
        Launch(1, "gcp", created=10.0, ready=400.0),
        Launch(2, "oci", created=5.0, ready=905.0),
    ]
    assert times_to_ready(launches) == {1: [("gcp", 390.0), ("aws", 700.0)], 2: [("oci", 900.0)]}


def test_a_failed_launch_counts_until_its_replacement_is_ready() -> None:
    # A stockout at aws fails the launch at 120 s; placement asks gcp at 130 s, ready at 730.
    launches = [
        Launch(1, "aws", created=0.0, ready=None, failed=120.0),
        Launch(1, "gcp", created=130.0, ready=730.0),
    ]
    assert times_to_ready(launches) == {1: [("aws", 730.0), ("gcp", 600.0)]}


def test_a_chain_of_failures_counts_from_each_attempt() -> None:
    launches = [
        Launch(1, "aws", created=0.0, ready=None, failed=60.0),
        Launch(1, "oci", created=70.0, ready=None, failed=200.0),
        Launch(1, "gcp", created=210.0, ready=800.0),
    ]
    assert times_to_ready(launches) == {1: [("aws", 800.0), ("oci", 730.0), ("gcp", 590.0)]}


def test_a_gang_of_failures_is_replaced_by_the_first_ready_replica_after_them() -> None:
    failed = [Launch(1, "aws", created=0.0, ready=None, failed=100.0) for _ in range(3)]
    ready = [Launch(1, "gcp", created=110.0, ready=700.0 + k) for k in range(3)]
    seen = times_to_ready(failed + ready)[1]
    assert seen[:4] == [("aws", 700.0)] * 3 + [("gcp", 590.0)]
    assert seen[4:] == [("gcp", 591.0), ("gcp", 592.0)]


@pytest.mark.parametrize(
    ("created", "counted"),
    [
        (50.0, False),  # asked for before the failure: not its replacement
        (100.0 + REPLACED_WITHIN_S + 1.0, False),  # long after: the load came back later
        (100.0 + REPLACED_WITHIN_S, True),
    ],
)
def test_only_a_replica_asked_for_soon_after_the_failure_replaces_it(
    created: float, counted: bool
) -> None:
    launches = [
        Launch(1, "aws", created=0.0, ready=None, failed=100.0),
        Launch(1, "gcp", created=created, ready=created + 500.0),
    ]
    pools = [p for p, _ in times_to_ready(launches)[1]]
    assert ("aws" in pools) is counted


def test_a_stale_failure_is_not_taken_by_a_later_replica() -> None:
    launches = [
        Launch(1, "aws", created=0.0, ready=None, failed=100.0),
        Launch(1, "gcp", created=5000.0, ready=5500.0),  # too late: drops the failure
        Launch(1, "gcp", created=5000.0, ready=5600.0),
    ]
    assert times_to_ready(launches) == {1: [("gcp", 500.0), ("gcp", 600.0)]}


def test_launches_neither_ready_nor_failed_count_nothing() -> None:
    # Released while starting (the load fell away), and a failure never replaced.
    launches = [
        Launch(1, "aws", created=0.0, ready=None),
        Launch(2, "aws", created=0.0, ready=None, failed=50.0),
    ]
    assert times_to_ready(launches) == {}
