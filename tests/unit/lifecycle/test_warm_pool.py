"""The warm pool's decisions (``controlplane.lifecycle.warm``) with plain values, and its
policy key's parsing (file, line, field on bad input)."""

from __future__ import annotations

import pytest

from autoscaler import forecast
from controlplane.lifecycle.warm import (
    WarmReplica,
    decide,
    growth,
    home_pool,
    usd_per_hour,
    wanted,
)
from schema.policy import WarmMode, WarmPool
from schema.policy_file import PolicyError, parse_policy
from tests.policy_texts import STAGING_POLICY


def _w(rid: str, pool: str = "p1", parked: bool = True, since: float = 0.0) -> WarmReplica:
    return WarmReplica(rid, pool, "8xH100", 1, parked, since)


def test_no_forecast_means_no_growth_and_one_warm_replica() -> None:
    assert growth({}, 600.0) == 1.0
    assert wanted(WarmPool(max_nodes=4), desired=3, grow=1.0, nodes_per_replica=1) == 1


def test_a_rising_forecast_keeps_what_the_horizon_adds_within_max_nodes() -> None:
    # The decider's recorded load model: a level of 10 req/s, rising 0.02 req/s per s.
    state = {"level": 10.0, "trend": 0.02, "resid2": 0.0}
    assert forecast.view(state).trend == 0.02
    grow = growth(state, 600.0)  # the trend is extrapolated at most 300 s: 10 + 6
    assert grow == pytest.approx(1.6)
    policy = WarmPool(max_nodes=3)
    assert wanted(policy, desired=4, grow=grow, nodes_per_replica=1) == 3  # ceil(6.4)-4
    assert wanted(WarmPool(max_nodes=2), desired=4, grow=grow, nodes_per_replica=1) == 2
    # A gang of two nodes: max_nodes 3 holds one replica.
    assert wanted(policy, desired=4, grow=grow, nodes_per_replica=2) == 1


def test_a_launch_resumes_the_oldest_parked_warm_replica_of_its_pool_and_shape() -> None:
    warm = [_w("new", since=5.0), _w("old", since=1.0), _w("filling", parked=False)]
    d = decide([("p1", "8xH100"), ("p1", "8xH100"), ("p2", "8xH100")], warm, "p1", keep=1)
    assert d.resume == ("old", "new", None)
    # The one left is still filling: it is the warm pool now, nothing more to create.
    assert (d.fill, d.release) == (0, ())


def test_the_pool_refills_and_lets_go_what_is_over_the_bound_or_elsewhere() -> None:
    d = decide([], [], "p1", keep=2)
    assert (d.fill_pool, d.fill) == ("p1", 2)
    warm = [_w("a", since=1), _w("b", since=2), _w("c", parked=False, since=3), _w("x", "p2")]
    d = decide([], warm, "p1", keep=1)
    assert set(d.release) == {"x", "b", "c"} and d.fill == 0
    assert decide([], warm, None, keep=0).release == ("a", "b", "c", "x")


def test_home_is_where_the_model_runs_most_else_the_first_allowed_pool() -> None:
    assert home_pool(["p2", "p1", "p2"], ["p1", "p2"]) == "p2"
    assert home_pool(["p1", "p2"], ["p1", "p2"]) == "p2"  # a tie: the newest
    assert home_pool(["gone"], ["p1"]) == "p1"
    assert home_pool([], []) is None


def test_a_stopped_node_bills_its_disk_a_ready_one_its_price() -> None:
    stopped = WarmPool(max_nodes=2, disk_gb=730)
    assert usd_per_hour(stopped, 2, 98.32, 0.08) == pytest.approx(0.16)
    ready = WarmPool(max_nodes=2, mode=WarmMode.READY)
    assert usd_per_hour(ready, 2, 98.32, 0.08) == pytest.approx(196.64)


GOOD = STAGING_POLICY.replace(
    "    staging:\n      regions_ahead: 1\n",
    "    warm_pool:\n      max_nodes: 2\n      mode: stopped\n",
)


def test_warm_pool_parses() -> None:
    model = parse_policy(GOOD, "p.yaml").policy.models[0]
    assert model.warm_pool == WarmPool(max_nodes=2, mode=WarmMode.STOPPED)


@pytest.mark.parametrize(
    ("old", "new", "field", "reason"),
    [
        ("max_nodes: 2", "max_nodes: 0", "models[0].warm_pool.max_nodes", "greater than"),
        ("mode: stopped", "mode: hibernated", "models[0].warm_pool.mode", "stopped"),
        ("- shape: 8xH100", "- shape: 3x8xH100", "models[0].warm_pool.max_nodes", "no replica"),
    ],
)
def test_bad_warm_pool_names_file_line_and_field(
    old: str, new: str, field: str, reason: str
) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(GOOD.replace(old, new), "a.yaml")
    [problem] = err.value.problems
    assert (problem.file, problem.field) == ("a.yaml", field)
    assert problem.line is not None and reason in problem.reason


def test_warm_replicas_cover_a_short_look_ahead_only_for_as_many_as_wait() -> None:
    from controlplane.lifecycle.warm import covers

    # A create's look-ahead wants 6 where a resume's wants 4: two launched early.
    assert covers(2, 6, 4) and covers(3, 6, 4)
    # One warm node cannot stand in for two early launches: keep the create's horizon.
    assert not covers(1, 6, 4)
    assert covers(0, 5, 5)  # (the same plan either way)
