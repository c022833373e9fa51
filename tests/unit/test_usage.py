"""controlplane.usage: what a node bills within a range, and the sums per group."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controlplane.usage import (
    NodeUse,
    billed_intervals,
    billed_micros,
    closed_stop,
    row_stops,
    usage,
)

H = 3_600_000_000  # an hour in microseconds


def node(
    requested: int = 0,
    released: int | None = None,
    stops: tuple[tuple[int, int | None], ...] = (),
    **kw: object,
) -> NodeUse:
    fields: dict[str, object] = dict(
        node_id="n-1",
        customer="acme",
        model="llama-70b",
        tier="committed",
        cloud="aws",
        gpus=8,
        usd_per_hour=98.32,
    )
    fields.update(kw)
    return NodeUse(requested=requested, released=released, stops=stops, **fields)  # type: ignore[arg-type]


def test_a_node_bills_from_request_to_release_clipped_to_the_range() -> None:
    n = node(requested=2 * H, released=5 * H)
    assert billed_micros(n, 0, 10 * H) == 3 * H
    assert billed_micros(n, 3 * H, 4 * H) == H  # a range inside its life
    assert billed_micros(n, 0, 3 * H) == H  # cuts its start
    assert billed_micros(n, 4 * H, 10 * H) == H  # cuts its end
    assert billed_micros(n, 5 * H, 6 * H) == 0  # released at the range's start: [since, until)
    assert billed_micros(n, 0, 2 * H) == 0


def test_a_node_still_held_bills_up_to_the_end_of_the_range() -> None:
    assert billed_micros(node(requested=H), 0, 3 * H) == 2 * H


def test_stopped_intervals_are_not_billed() -> None:
    n = node(requested=0, released=10 * H, stops=((6 * H, 8 * H), (2 * H, 3 * H)))
    assert billed_intervals(n) == [(0, 2 * H), (3 * H, 6 * H), (8 * H, 10 * H)]
    assert billed_micros(n, 0, 10 * H) == 7 * H
    assert billed_micros(n, 2 * H + 1, 7 * H) == 3 * H  # starts inside a stop


def test_a_node_stopped_until_its_release_bills_to_its_stop() -> None:
    n = node(requested=0, released=10 * H, stops=((4 * H, None),))
    assert billed_intervals(n) == [(0, 4 * H)]
    assert billed_micros(node(requested=0, stops=((4 * H, None),)), 0, 20 * H) == 4 * H


def test_the_row_shows_a_stop_closed_only_by_a_later_resume() -> None:
    assert closed_stop(5, 9) == (5, 9)
    assert closed_stop(5, None) is None
    assert closed_stop(9, 5) is None  # resumed before its last stop: stopped since
    assert row_stops(None, None) == ()
    assert row_stops(9, 5) == ((9, None),)
    assert row_stops(5, 9) == ((5, 9),)


def test_usage_groups_by_customer_and_the_keys_asked_for() -> None:
    uses = [
        node(node_id="a", released=H),
        node(node_id="b", released=2 * H, tier="shared", cloud="gcp", usd_per_hour=10.0),
        node(node_id="c", released=H, model="llama-8b", gpus=1, usd_per_hour=4.0),
        node(node_id="d", released=H, customer="zeta", gpus=1, usd_per_hour=2.0),
        node(node_id="e", requested=5 * H, released=6 * H),  # outside the range
    ]
    [acme, zeta] = usage(uses, 0, 4 * H)
    assert (acme.customer, acme.model, acme.tier, acme.cloud) == ("acme", "", "", "")
    assert (acme.nodes, acme.node_hours, acme.gpu_hours) == (3, 4.0, 8 + 16 + 1)
    assert acme.cost_usd == 98.32 + 20.0 + 4.0
    assert (zeta.nodes, zeta.gpu_hours, zeta.cost_usd) == (1, 1.0, 2.0)
    by_tier = {(r.customer, r.tier): r.gpu_hours for r in usage(uses, 0, 4 * H, ["tier"])}
    assert by_tier == {
        ("acme", "committed"): 9.0,
        ("acme", "shared"): 16.0,
        ("zeta", "committed"): 1.0,
    }
    by_model = {
        (r.customer, r.model, r.cloud): r.nodes for r in usage(uses, 0, 4 * H, ["model", "cloud"])
    }
    assert by_model == {
        ("acme", "llama-70b", "aws"): 1,
        ("acme", "llama-70b", "gcp"): 1,
        ("acme", "llama-8b", "aws"): 1,
        ("zeta", "llama-70b", "aws"): 1,
    }


# Times on a small grid, so that ranges often cut lives and stops at their very edges.
_T = st.integers(min_value=0, max_value=40).map(lambda t: t * 900_000_000)


@st.composite
def _nodes(draw: st.DrawFn) -> NodeUse:
    start = draw(_T)
    released = draw(st.one_of(st.none(), _T.map(lambda t: start + t)))
    stops = []
    for a in draw(st.lists(_T, max_size=3)):
        b = draw(st.one_of(st.none(), _T.map(lambda t, a=a: start + a + t)))  # type: ignore[misc]
        stops.append((start + a, b))
    return node(
        requested=start, released=released, stops=tuple(stops), gpus=draw(st.sampled_from([1, 8]))
    )


@given(st.lists(_nodes(), max_size=6), _T, _T, _T)
def test_usage_over_adjacent_ranges_adds_up_exactly(
    uses: list[NodeUse], a: int, b: int, c: int
) -> None:
    a, b, c = sorted((a, b, c))

    def gpu_us(lo: int, hi: int) -> int:
        return sum(r.gpu_micros for r in usage(uses, lo, hi, ["model", "tier", "cloud"]))

    assert gpu_us(a, b) + gpu_us(b, c) == gpu_us(a, c)


@given(_nodes(), _T, _T)
def test_a_node_never_bills_more_than_the_range_nor_outside_its_life(
    n: NodeUse, a: int, b: int
) -> None:
    lo, hi = min(a, b), max(a, b)
    billed = billed_micros(n, lo, hi)
    life_end = hi if n.released is None else min(n.released, hi)
    assert 0 <= billed <= max(0, life_end - max(lo, n.requested))
    if not n.stops:
        assert billed == max(0, life_end - max(lo, n.requested))
