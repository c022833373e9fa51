"""Issue 23, "a fair race": each point of the setup that tilted the bench, pinned through
whole replays (the runner and the engine), not only through a decider's own arithmetic."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autoscaler.baselines import RayServeAutoscaler, RayServeConfig
from autoscaler.types import AutoscalerInput, Decision, MetricsWindow, State
from controlplane.simulator.runner import Simulation
from controlplane.simulator.traces import TraceSpec, read_trace
from schema.fleet import parse_fleet

FLEET = """
name: t
coldstart: {capacity_vm_s: 30, bootstrap_s: 10, image_pull_s: 5, weight_fetch_s: 5, load_init_s: 10}
template:
  shape: 1xH100
  slots: 2
  slo_s: 0.5
  service: {per_request_s: 2.0}
  usd_per_gpu_hour: 3.0
"""


def _steady(tmp_path: Path, gap_s: float = 2.0, end_s: float = 1200.0) -> Simulation:
    path = tmp_path / "steady.csv"
    times = np.arange(0.0, end_s, gap_s)
    path.write_text("timestamp,model,service_s\n" + "".join(f"{t},x,1\n" for t in times))
    return Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(path))]))


@dataclass(frozen=True)
class RecordingRay(RayServeAutoscaler):
    seen: list[AutoscalerInput] = field(default_factory=list)

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        self.seen.append(inp)
        return super().decide(inp, state)


def test_f_ray_serve_look_back_longer_than_the_default_window_is_honoured(
    tmp_path: Path,
) -> None:
    sim = _steady(tmp_path)
    ray = RecordingRay(config=RayServeConfig(look_back_period_s=240.0))
    assert ray.window_s == 240.0
    sim.run_autoscaler(ray)
    late = [i.metrics for i in ray.seen if i.now > sim.warmup_s + 300]
    assert late
    for m in late[:: max(1, len(late) // 50)]:
        assert isinstance(m, MetricsWindow)
        ts = [s.t for s in m.samples]
        # 240 s of 1 s samples up to the last push: the whole look-back, not 30 s of it
        assert ts[-1] - ts[0] >= 239.0
