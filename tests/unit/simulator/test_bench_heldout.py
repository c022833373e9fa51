"""bench/heldout.py: its days are whole days the bench's target rows never replay."""

from __future__ import annotations

from types import ModuleType


def _pools(traces: tuple[str, ...]) -> set[str]:
    return {t.split("=", 1)[0] for t in traces}


def test_heldout_days_are_whole_days_outside_every_bench_window(
    bench: ModuleType, heldout: ModuleType
) -> None:
    assert heldout.HELDOUT
    for day in heldout.HELDOUT:
        assert day.start_s is not None and day.end_s is not None
        assert day.start_s % bench.DAY == 0 and day.end_s - day.start_s == bench.DAY
        for sc in bench.SCENARIOS:
            if not _pools(day.traces) & _pools(sc.traces):
                continue
            # The bench's windows, with the warm-up they replay before their start.
            start = (sc.start_s or 0.0) - 3600.0
            end = sc.end_s if sc.end_s is not None else float("inf")
            assert day.end_s <= start or day.start_s >= end, (day.name, sc.name)
