"""The baked-image planner (coldstart/images.py): what to build, use and delete, with
explicit time."""

from __future__ import annotations

from coldstart.images import Build, BuildState, ImageKey, ImageTimings, Wanted, plan

T = ImageTimings(build_s=100.0, retry_s=50.0, grace_s=30.0, max_age_s=1000.0)
KEY = ImageKey("acme", "acme-aws", "us-east-1", "vllm/vllm-openai:v1")
NEW = ImageKey("acme", "acme-aws", "us-east-1", "vllm/vllm-openai:v2")
WANT = Wanted(KEY, "aws", "p5.48xlarge", 8)


def build(
    bid: str,
    state: BuildState,
    *,
    key: ImageKey = KEY,
    created: float = 0.0,
    since: float = 0.0,
    ready: float | None = None,
    has_image: bool = False,
) -> Build:
    return Build(bid, key, state, created, since, ready, has_image)


def test_a_wanted_key_without_an_image_starts_one_build() -> None:
    assert plan([WANT], [], 10.0, T).start == (WANT,)
    in_flight = [build("b1", BuildState.BUILDING, created=5.0)]
    assert plan([WANT], in_flight, 10.0, T).start == ()


def test_nodes_use_the_newest_ready_image_of_their_key() -> None:
    builds = [
        build("old", BuildState.READY, ready=10.0),
        build("new", BuildState.READY, ready=20.0),
        build("busy", BuildState.IMAGING, created=21.0),
    ]
    p = plan([WANT], builds, 25.0, T)
    assert p.use == {KEY: "new"}
    assert p.start == ()
    assert p.delete == ()  # the older one is kept for the grace period...
    assert plan([WANT], builds, 50.0, T).delete == ("old",)  # ...then deleted


def test_a_build_that_never_reports_times_out_and_is_not_retried_hot() -> None:
    stuck = [build("b1", BuildState.BUILDING, created=0.0)]
    p = plan([WANT], stuck, 100.0, T)
    assert p.timed_out == ("b1",)
    assert p.start == ()  # (this pass fails it; nothing is started in its place yet)
    failed = [build("b1", BuildState.FAILED, created=0.0, since=100.0)]
    assert plan([WANT], failed, 120.0, T).start == ()  # within retry_s
    assert plan([WANT], failed, 150.0, T).start == (WANT,)


def test_a_changed_runtime_image_builds_anew_and_supersedes_the_old_after_grace() -> None:
    want_new = Wanted(NEW, "aws", "p5.48xlarge", 8)
    old = build("old", BuildState.READY, ready=10.0)
    assert plan([want_new], [old], 20.0, T).start == (want_new,)
    assert plan([want_new], [old], 20.0, T).delete == ()  # no replacement yet
    both = [old, build("new", BuildState.READY, key=NEW, ready=40.0)]
    assert plan([want_new], both, 50.0, T).delete == ()
    assert plan([want_new], both, 70.0, T).delete == ("old",)


def test_stale_images_are_rebuilt_and_unwanted_stale_ones_deleted() -> None:
    ready = [build("b1", BuildState.READY, ready=0.0)]
    assert plan([WANT], ready, 999.0, T).start == ()
    assert plan([WANT], ready, 1000.0, T).start == (WANT,)
    assert plan([WANT], ready, 5000.0, T).delete == ()  # still the newest of a wanted key
    assert plan([], ready, 1000.0, T).delete == ("b1",)


def test_deleting_and_failed_images_are_deleted_until_gone() -> None:
    builds = [
        build("gone", BuildState.DELETING, since=5.0),
        build("half", BuildState.FAILED, since=5.0, has_image=True),
        build("none", BuildState.FAILED, since=5.0),
        build("done", BuildState.DELETED, since=5.0),
    ]
    assert plan([WANT], builds, 10.0, T).delete == ("gone", "half")
