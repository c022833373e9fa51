"""The daemon's collector thresholds (``controlplane.gc_tuning``): set for the process, the
young threshold well above CPython's 700 (the loop allocates far more per tick)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controlplane import gc_tuning


@pytest.fixture
def thresholds_restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_tune_sets_the_process_thresholds(thresholds_restored: None) -> None:
    gc.set_threshold(700, 10, 10)
    gc_tuning.tune()
    assert gc.get_threshold() == gc_tuning.THRESHOLDS
    young, _, _ = gc_tuning.THRESHOLDS
    assert young >= 10_000 and gc.isenabled()  # raised, never switched off
