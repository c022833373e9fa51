"""The registry the simulator runs autoscalers from, and the knob sweep contract."""

from __future__ import annotations

import json

import pytest

from autoscaler.baselines import REGISTRY
from autoscaler.types import UTILIZATION_SWEEP

from .synthetic import SPEC, inp, window


def test_registry_names_every_autoscaler() -> None:
    peers = {"knative", "skyserve", "rayserve", "hpa"}
    # Issue 23 (a): each peer also in one tuned variant from its own documentation.
    assert set(REGISTRY) == {"ours", *peers, *(f"{p}-tuned" for p in peers)}
    for p in peers:
        assert REGISTRY[f"{p}-tuned"]().config != REGISTRY[p]().config  # type: ignore[attr-defined]
    for key, make in REGISTRY.items():
        assert make().name == key


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_each_autoscaler_declares_tick_lag_window_and_knob(key: str) -> None:
    auto = REGISTRY[key]()
    assert auto.tick_s > 0 and auto.metric_lag_s >= 0 and auto.window_s > 0
    assert auto.knob.fractions == UTILIZATION_SWEEP
    values = auto.knob.values(SPEC)
    assert values[0] == pytest.approx(0.05 * SPEC.max_concurrency_per_replica)
    assert values[-1] == pytest.approx(SPEC.max_concurrency_per_replica)
    assert auto.knob.apply(SPEC, 42.0).target_per_replica == 42.0


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_decisions_are_pure_and_state_is_json(key: str) -> None:
    auto = REGISTRY[key]()
    state: dict = {}
    for k in range(40):
        now = 10.0 * k
        i = inp(now, window(now, conc=150.0, rate=75.0, length=60), ready=2, starting=1)
        first = auto.decide(i, state)
        again = auto.decide(i, state)  # same inputs, same state -> same output
        assert first == again
        state = json.loads(json.dumps(first[1]))  # survives a round trip through the store
    assert first[0].reason
