"""Small scripted autoscalers and model builders for hand-checked engine cases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from autoscaler.types import (
    Autoscaler,
    AutoscalerInput,
    Decision,
    MetricsWindow,
    ScalingSpec,
    State,
)
from controlplane.simulator.capacity import ColdStartCapacity
from controlplane.simulator.engine import Engine, ModelRun
from schema.fleet import ColdStartPhases

PHASES_100 = ColdStartPhases(
    capacity_vm_s=40, bootstrap_s=20, image_pull_s=10, weight_fetch_s=10, load_init_s=20
)


@dataclass
class Scripted:
    """Desires ``plan(inp)``; records every input it was given."""

    plan: Callable[[AutoscalerInput], int]
    name: str = "scripted"
    seen: list[AutoscalerInput] = field(default_factory=list)

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        self.seen.append(inp)
        return Decision(self.plan(inp), "scripted"), state


def busy_in_last_sample(inp: AutoscalerInput) -> int:
    """1 while the newest sample shows work (served or waiting) or a replica is on its way,
    else 0."""
    if not isinstance(inp.metrics, MetricsWindow) or not inp.metrics.samples:
        return inp.replicas.live
    s = inp.metrics.samples[-1]
    on_the_way = inp.replicas.starting + inp.replicas.provisioning
    return 1 if s.in_flight + s.queue_depth > 0 or on_the_way else 0


def model(
    arrivals: list[float],
    service: list[float] | float,
    *,
    slots: int = 1,
    slo_s: float = 1.0,
    initial: int = 0,
    gpus: int = 1,
    usd_per_hour: float = 10.0,
    name: str = "m",
    max_replicas: int = 100,
) -> ModelRun:
    arr = np.array(arrivals, dtype=float)
    svc = (
        np.full(arr.size, float(service))
        if isinstance(service, float | int)
        else np.array(service, dtype=float)
    )
    return ModelRun(
        name=name,
        arrivals=arr,
        service_s=svc,
        output_tokens=None,
        slots=slots,
        slo_s=slo_s,
        gpus_per_replica=gpus,
        usd_per_replica_hour=usd_per_hour,
        spec=ScalingSpec(
            min_replicas=0,
            max_replicas=max_replicas,
            target_per_replica=0.7 * slots,
            max_concurrency_per_replica=float(slots),
        ),
        initial_replicas=initial,
    )


def engine(
    runs: list[ModelRun],
    auto: Autoscaler,
    end_s: float,
    *,
    tick_s: float = 1.0,
    lag_s: float = 0.0,
    push_s: float = 0.0,
    push_phase_s: float = 0.0,
    phases: ColdStartPhases = PHASES_100,
    wakes: bool = True,
    wake_lead_s: float = 0.0,
    metered: bool = True,
) -> Engine:
    capacity = ColdStartCapacity({r.name: phases for r in runs})
    return Engine(
        runs,
        end_s,
        auto,
        capacity,
        tick_s=tick_s,
        metric_lag_s=lag_s,
        metric_push_s=push_s,
        metric_push_phase_s=push_phase_s,
        scrape_interval_s=1.0,
        history_s=10.0,
        wakes_on_arrival=wakes,
        wake_lead_s=wake_lead_s,
        metered=metered,
    )


def bench_load(module: ModuleType, arrivals: list[float], service: float, **kw: Any) -> Any:
    """A ``Load`` of bench/floor.py (or bench/bound.py, which shares it): one model's
    requests of ``service`` seconds each; ``kw`` overrides the defaults below."""
    a = np.array(arrivals, dtype=float)
    return module.Load(
        str(kw.get("name", "m")),
        a,
        np.full(a.size, service),
        int(kw.get("slots", 1)),
        kw.get("slo_s", 0.5),
        int(kw.get("gpus", 1)),
        kw.get("cold_start_s", 100.0),
        kw.get("span_s", 1000.0),
    )
