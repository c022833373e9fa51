"""The sentences of ``gpucap describe``: sums that add up, plain-word reasons, exclusions."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.cli.why import (
    REASONS,
    exclusion_words,
    expected_ready,
    node_history,
    reason_words,
    replica_sum,
    span,
)
from schema.gen.gpucap.v1 import control_plane_pb2 as pb


def _model(desired: int, ready: int, starting: int, prov: int, draining: int = 0) -> pb.Model:
    return pb.Model(
        desired_replicas=desired,
        ready_replicas=ready,
        starting_replicas=starting,
        provisioning_replicas=prov,
        draining_replicas=draining,
        spec=pb.ModelSpec(shapes=[pb.ShapeOption(shape="8xH100")]),
    )


def _terms(sentence: str) -> int:
    """Evaluate ``desired N = a + b - c ...`` right of the ``=``, by its numbers and signs."""
    rhs = sentence.split("=", 1)[1].split(";")[0]
    total, sign = 0, 1
    for token in rhs.replace("+", " + ").replace(" - ", " - ").split():
        if token in "+-":
            sign = 1 if token == "+" else -1
        elif token.isdigit():
            total += sign * int(token)
    return total


@pytest.mark.parametrize(
    ("desired", "ready", "starting", "prov"),
    [(5, 2, 1, 1), (2, 3, 0, 1), (0, 0, 0, 0), (4, 4, 0, 0)],
)
def test_the_replica_sum_adds_up(desired: int, ready: int, starting: int, prov: int) -> None:
    sentence = replica_sum(_model(desired, ready, starting, prov, draining=2))
    assert sentence.startswith(f"desired {desired} = ")
    assert _terms(sentence) == desired
    assert "2 more draining" in sentence


def test_reason_codes_in_plain_words_and_unknown_ones_as_they_are() -> None:
    assert reason_words("hold_dip") == f"{REASONS['hold_dip']} (hold_dip)"
    assert reason_words("something_new") == "something_new"


def test_every_autoscaler_reason_code_has_words() -> None:
    source = (Path(__file__).parents[3] / "autoscaler" / "gpucap.py").read_text()
    codes = set(re.findall(r'"((?:scale|hold|cancel|wake|steady)[a-z_]*)"', source))
    assert codes and codes <= set(REASONS), codes - set(REASONS)


def test_exclusions_in_words_per_filter() -> None:
    spec = pb.ModelSpec(
        shapes=[pb.ShapeOption(shape="8xH100")], clouds=["aws"], regions=["us-east-1"]
    )
    pool = pb.Pool(id="p", cloud="gcp", region="us-east4", gpu_shape="1xH100", tier="shared")
    assert exclusion_words("cloud_not_allowed", spec, pool) == "gcp is not among its clouds (aws)"
    assert (
        exclusion_words("region_not_allowed", spec, pool)
        == "us-east4 is not among its regions (us-east-1)"
    )
    assert exclusion_words("shape_not_accepted", spec, pool) == (
        "1xH100 nodes are none of its shapes (8xH100)"
    )
    assert "overflow" in exclusion_words("overflow_not_allowed", spec, pool)
    # A filter this CLI does not know yet, or a pool it was not shown: the name as it is.
    assert exclusion_words("new_filter", spec, pool) == "new_filter"
    assert exclusion_words("cloud_not_allowed", spec, None) == "cloud_not_allowed"


def test_expected_ready_is_the_fastest_open_pool() -> None:
    blocked = pb.PoolEstimate(pool_id="a", expected_ready_s=60, source="phases")
    blocked.blocked_until.FromSeconds(2_000_000_000)
    explained = pb.ExplainModelResponse(
        pools=[
            blocked,
            pb.PoolEstimate(pool_id="b", expected_ready_s=90, cordoned=True),
            pb.PoolEstimate(pool_id="c", expected_ready_s=300, source="launches"),
        ]
    )
    assert expected_ready(explained) == "5m00s in c (from launches)"
    assert "no allowed pool takes a launch now" in expected_ready(
        pb.ExplainModelResponse(pools=explained.pools[:2])
    )


def test_node_history_in_the_order_reached_with_the_time_between() -> None:
    n = pb.Node(id="n")
    for state, seconds in (("pending", 0), ("provisioning", 2), ("running", 62), ("ready", 3662)):
        getattr(n, f"{state}_at").FromSeconds(1_800_000_000 + seconds)
    history = node_history(n)
    assert [h[0] for h in history] == ["pending", "provisioning", "running", "ready"]
    assert [h[2] for h in history] == ["-", "2.0s", "1m00s", "1h00m"]
    assert history[0][1] == datetime.fromtimestamp(1_800_000_000, UTC)


def test_span() -> None:
    assert [span(s) for s in (8.5, 42, 1308, 7500)] == ["8.5s", "42s", "21m48s", "2h05m"]
