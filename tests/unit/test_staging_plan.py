"""The staging planner (coldstart/staging.py): what is staged where, LRU eviction within a
site's budget, the storage cost, and the bandwidth limit. Pure, with explicit ``now``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coldstart.staging import (
    GB,
    Active,
    CopyKey,
    Held,
    Need,
    Site,
    SiteKey,
    admit,
    dest_uri,
    plan,
)

EAST = SiteKey("acme", "acme-aws", "us-east-1")
WEST = SiteKey("acme", "acme-aws", "us-west-2")
GCP = SiteKey("acme", "acme-gcp", "us-central1")
NOW = 1_000_000.0


def site(key: SiteKey, budget_gb: float = 500, cloud: str = "aws") -> Site:
    scheme = "s3" if cloud == "aws" else "gs"
    return Site(
        key, cloud, f"{scheme}://w-{key.region}/gpucap-weights/", int(budget_gb * GB), 0.023
    )


def need(
    model: str = "llama-70b",
    *,
    size_gb: float = 140,
    running: tuple[SiteKey, ...] = (),
    ahead: tuple[SiteKey, ...] = (),
    regions_ahead: int = 1,
    priority: int = 100,
    origins: dict[str, str] | None = None,
) -> Need:
    return Need(
        "acme",
        model,
        priority,
        int(size_gb * GB),
        origins or {"aws": f"s3://origin/{model}/"},
        running,
        ahead,
        regions_ahead,
    )


def key(model: str, s: SiteKey) -> CopyKey:
    return CopyKey(s.customer, model, s.account, s.region)


def test_running_sites_and_the_next_one_ahead_are_staged_with_their_cost() -> None:
    p = plan([need(running=(EAST,), ahead=(EAST, WEST, GCP))], [], [site(EAST), site(WEST)], NOW)
    assert [(s.key, s.reason) for s in p.start] == [
        (key("llama-70b", EAST), "replicas run here"),
        (key("llama-70b", WEST), "placement's choice #1 ahead"),
    ]
    assert p.start[0].dest_uri == "s3://w-us-east-1/gpucap-weights/acme/llama-70b/"
    assert p.usd_per_month[EAST] == 140 * 0.023
    assert p.bytes_used[WEST] == 140 * GB


def test_ahead_skips_sites_of_a_cloud_without_an_origin_and_accounts_without_staging() -> None:
    other = SiteKey("acme", "acme-oci", "us-ashburn-1")  # no staging configured: no Site
    p = plan([need(ahead=(GCP, other, WEST))], [], [site(GCP, cloud="gcp"), site(WEST)], NOW)
    assert [s.key for s in p.start] == [key("llama-70b", WEST)]


def test_a_running_site_in_another_cloud_is_staged_from_that_clouds_mirror() -> None:
    origins = {"aws": "s3://origin/m/", "gcp": "gs://origin/m/"}
    p = plan([need(running=(GCP,), origins=origins)], [], [site(GCP, cloud="gcp")], NOW)
    assert [(s.source_uri, s.dest_uri) for s in p.start] == [
        ("gs://origin/m/", "gs://w-us-central1/gpucap-weights/acme/llama-70b/")
    ]
    p = plan([need(running=(GCP,))], [], [site(GCP, cloud="gcp")], NOW)
    assert p.start == () and p.skipped[0][1].startswith("no gcp origin")


def test_an_object_origin_is_copied_to_an_object() -> None:
    s = site(EAST)
    assert dest_uri(s, "acme", "m", "s3://o/m/model.gguf") == (
        "s3://w-us-east-1/gpucap-weights/acme/m/model.gguf"
    )


def test_least_recently_used_cached_copy_is_evicted_to_make_room() -> None:
    held = [
        Held(key("old", EAST), "ready", 140 * GB, last_used=NOW - 9000),
        Held(key("recent", EAST), "ready", 140 * GB, last_used=NOW - 10),
    ]
    needs = [
        need("old", ahead=(WEST, EAST), regions_ahead=0),  # allowed in EAST, not wanted
        need("recent", ahead=(WEST, EAST), regions_ahead=0),
        need("new", running=(EAST,)),
    ]
    p = plan(needs, held, [site(EAST, budget_gb=300)], NOW)
    assert [s.key for s in p.start] == [key("new", EAST)]
    assert p.evict[0].key == key("old", EAST) and "least recently used" in p.evict[0].reason
    assert key("recent", EAST) in p.keep
    assert p.bytes_used[EAST] == 280 * GB


def test_a_copy_nobody_may_use_is_evicted_at_once() -> None:
    held = [Held(key("gone", EAST), "ready", GB, last_used=NOW)]
    p = plan([], held, [site(EAST)], NOW)
    assert [e.key for e in p.evict] == [key("gone", EAST)]


def test_ahead_copies_never_push_out_where_replicas_run() -> None:
    held = [Held(key("b", EAST), "ready", 140 * GB, last_used=NOW)]
    needs = [need("a", ahead=(EAST,), priority=900), need("b", running=(EAST,), priority=1)]
    p = plan(needs, held, [site(EAST, budget_gb=200)], NOW)
    assert p.start == ()
    assert key("b", EAST) in p.keep
    assert p.skipped[0][0] == key("a", EAST) and "over the site's budget" in p.skipped[0][1]


def test_failed_copies_are_started_again_only_after_their_retry_time() -> None:
    held = [Held(key("m", EAST), "failed", 0, last_used=0, retry_at=NOW + 60)]
    assert plan([need("m", running=(EAST,))], held, [site(EAST)], NOW).start == ()
    again = plan([need("m", running=(EAST,))], held, [site(EAST)], NOW + 60).start
    assert [s.reason for s in again] == ["retry: replicas run here"]


def test_a_copy_being_evicted_is_not_started_again_until_it_is_gone() -> None:
    held = [Held(key("m", EAST), "evicting", GB, last_used=0)]
    p = plan([need("m", running=(EAST,))], held, [site(EAST)], NOW)
    assert p.start == () and p.skipped[0][1] == "its old copy is being evicted"


def test_bandwidth_limit_admits_the_oldest_copies_per_site_sharing_its_bytes() -> None:
    active = [
        Active(key("a", EAST), 3.0),
        Active(key("b", EAST), 1.0),
        Active(key("c", EAST), 2.0),
        Active(key("d", WEST), 5.0),
    ]
    got = admit(active, max_concurrent=2, bytes_per_tick=10 * GB)
    assert got == {key("b", EAST): 5 * GB, key("c", EAST): 5 * GB, key("d", WEST): 10 * GB}


sites_st = st.sampled_from([EAST, WEST])


@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=6),
    running=st.lists(st.sets(sites_st), min_size=6, max_size=6),
    held_sizes=st.lists(st.tuples(st.integers(0, 5), sites_st, st.integers(0, 100)), max_size=6),
    budget=st.integers(50, 900),
)
def test_no_site_is_ever_planned_past_its_budget(
    sizes: list[int],
    running: list[set[SiteKey]],
    held_sizes: list[tuple[int, SiteKey, int]],
    budget: int,
) -> None:
    needs = [
        need(f"m{i}", size_gb=s, running=tuple(sorted(running[i])), ahead=(EAST, WEST))
        for i, s in enumerate(sizes)
    ]
    held = {
        key(f"m{i}", s): Held(key(f"m{i}", s), "ready", sizes[i % len(sizes)] * GB, float(t))
        for i, s, t in held_sizes
    }
    p = plan(needs, list(held.values()), [site(EAST, budget), site(WEST, budget)], NOW)
    evicted = {e.key for e in p.evict}
    for s in (EAST, WEST):
        kept = sum(held[k].size_bytes for k in p.keep if k.site == s)
        started = sum(x.size_bytes for x in p.start if x.key.site == s)
        assert kept + started == p.bytes_used[s] <= budget * GB
    assert not evicted & set(p.keep)
    assert {x.key for x in p.start}.isdisjoint(p.keep)
