"""``controlplane.loop.memo.TickMemo``: a value is kept while its inputs are the very same
objects, worked out again when any is another object (even an equal one), and kept for
the last tick's keys only."""

from __future__ import annotations

from controlplane.loop.memo import TickMemo


def test_kept_while_the_inputs_are_the_same_objects() -> None:
    memo = TickMemo()
    made: list[str] = []

    def make(tag: str) -> str:
        made.append(tag)
        return tag

    replicas, spec = [1, 2], {"a": 1}
    memo.new_tick()
    assert memo.get("m", (replicas, spec), lambda: make("first")) == "first"
    memo.new_tick()
    assert memo.get("m", (replicas, spec), lambda: make("again")) == "first"
    assert made == ["first"]
    memo.new_tick()
    # an equal but other object: worked out again (the snapshot read it anew)
    assert memo.get("m", (list(replicas), spec), lambda: make("equal")) == "equal"
    # (within a tick, a second ask with the same objects is kept too)
    same = memo.get("m", (replicas, spec), lambda: make("back"))
    assert same == "back" and made == ["first", "equal", "back"]


def test_kept_for_the_last_ticks_keys_only() -> None:
    memo = TickMemo()
    spec = object()
    memo.new_tick()
    memo.get("gone", (spec,), lambda: 1)
    memo.new_tick()  # "gone" not asked for in this tick
    memo.new_tick()
    assert memo.get("gone", (spec,), lambda: 2) == 2
