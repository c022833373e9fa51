"""Turn a fleet file and a trace into the engine's inputs: per model, the service time of
every request, the scaling spec an autoscaler sees, prices and the warm start."""

from __future__ import annotations

import math

import numpy as np

from autoscaler.types import ScalingSpec
from controlplane.simulator.capacity import ColdStartCapacity
from controlplane.simulator.engine import WARM_START_WINDOW_S, ModelRun
from controlplane.simulator.traces import ModelTrace, Trace
from schema.fleet import ColdStartPhases, Fleet, ModelSpec, fleet_problems


class SetupError(ValueError):
    """The fleet cannot serve the trace (e.g. no way to time a model's requests)."""


# The least time a request holds its slot: one with no tokens (or a service_s of 0) is
# still served by a replica, and a zero-length stay would count for no capacity at all
# (the oracle would plan none for it, and its request would wait out the trace).
MIN_SERVICE_S = 1e-3


def service_times(spec: ModelSpec, trace: ModelTrace) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-request service seconds (at least ``MIN_SERVICE_S``) and output tokens (None when
    unknown)."""
    svc_model = spec.service
    n = len(trace)
    out_tokens: np.ndarray | None = None
    in_tokens: np.ndarray | None = None
    if trace.output_tokens is not None and trace.input_tokens is not None:
        in_tokens, out_tokens = trace.input_tokens, trace.output_tokens
    elif svc_model.default_input_tokens is not None and svc_model.default_output_tokens is not None:
        in_tokens = np.full(n, float(svc_model.default_input_tokens))
        out_tokens = np.full(n, float(svc_model.default_output_tokens))
    from_tokens: np.ndarray | None = None
    if in_tokens is not None and out_tokens is not None and svc_model.has_token_model:
        assert svc_model.prefill_tokens_per_s is not None and svc_model.output_token_s is not None
        from_tokens = (
            in_tokens / svc_model.prefill_tokens_per_s + out_tokens * svc_model.output_token_s
        )
    fallback: np.ndarray | None = from_tokens
    if fallback is None and svc_model.per_request_s is not None:
        fallback = np.full(n, svc_model.per_request_s)
    if trace.service_s is not None:
        svc = trace.service_s.astype(np.float64).copy()
        missing = np.isnan(svc)
        if missing.any():
            if fallback is None:
                raise SetupError(
                    f"model {spec.name!r}: some requests have no service_s and "
                    "the fleet has no token model or per_request_s for them"
                )
            svc[missing] = fallback[missing]
        return np.maximum(svc, MIN_SERVICE_S), out_tokens
    if fallback is None:
        raise SetupError(
            f"model {spec.name!r}: the trace has no token counts or service times; give the "
            "fleet model service.default_input_tokens/default_output_tokens or per_request_s"
        )
    return np.maximum(fallback.astype(np.float64), MIN_SERVICE_S), out_tokens


def auto_warmup_s(fleet: Fleet, trace: Trace) -> float:
    """Long enough for a replica requested at the start to be ready, plus 5 minutes of
    windows (the longest peer window in autoscalers.md is HPA's 300 s stabilization)."""
    return _warmup_for(fleet, [fleet.model(name) for name in trace.models])


def warmup_bound_s(fleet: Fleet) -> float:
    """The longest warm-up any model of the fleet (or its template) can need: the history
    to read before a replay window, before it is known which models the trace holds."""
    specs: list[ModelSpec | None] = list(fleet.models)
    if fleet.template is not None:
        specs.append(fleet.template.clone("template"))  # what an unnamed model gets
    return _warmup_for(fleet, specs)


def _warmup_for(fleet: Fleet, specs: list[ModelSpec | None]) -> float:
    longest = max((fleet.coldstart_for(s).total_s for s in specs if s is not None), default=0.0)
    return longest + 300.0


def with_warmup(
    trace: ModelTrace, warmup_s: float, history_s: float, end_s: float
) -> tuple[ModelTrace, int]:
    """The trace on the engine's clock, measured from ``warmup_s``, with a warm-up before
    it so that the measured replay opens on a running system: requests in flight, queues
    and autoscaler windows as they would be, not empty. The warm-up is the trace's own
    history before the window (``history_s`` seconds, arrivals before 0) as far as it
    goes; what it lacks is the trace's end (the window's ``end_s``), as if the trace had
    run before itself (repeated as often as the lack needs). Not its opening: replayed
    just before the measured opening, a burst there would be seen twice, a warm-up apart,
    and a decider that holds capacity longer would be credited with a foresight it did
    not have. Returns the shifted trace and the index of its first measured request."""
    arrivals = trace.arrivals
    if warmup_s <= 0:  # the history is dropped
        return trace.select(slice(int(np.searchsorted(arrivals, 0.0, "left")), None)), 0
    held = min(history_s, warmup_s)
    begin = int(np.searchsorted(arrivals, -held, "left"))  # history older than the warm-up
    # What repeats before itself: the span read, [-held, end_s), and one mean gap between
    # requests (a request at each end would otherwise meet at the seam).
    span = end_s + held
    period = span + span / max(1, arrivals.size - begin)
    lack = warmup_s - held
    repeats = math.ceil(lack / period) if lack > 0 and period > 0 else 0
    parts: list[np.ndarray] = []
    shifts: list[float] = []
    for j in range(repeats, -1, -1):  # the oldest repetition first; j = 0: history, window
        first_kept = int(np.searchsorted(arrivals, j * period - warmup_s, "left"))
        parts.append(np.arange(max(begin, first_kept), arrivals.size))
        shifts.append(warmup_s - j * period)
    shifted = trace.select(np.concatenate(parts))  # a copy
    shifted.arrivals += np.repeat(shifts, [p.size for p in parts])
    first = shifted.arrivals.size - int(arrivals.size - np.searchsorted(arrivals, 0.0, "left"))
    return shifted, first


def build_runs(
    fleet: Fleet, trace: Trace, utilization: float | None = None, warmup_s: float = 0.0
) -> tuple[list[ModelRun], ColdStartCapacity]:
    """Engine inputs for every trace model. ``utilization`` overrides each model's target
    utilization (the knob most autoscalers sweep); None keeps the fleet's. With a warm-up,
    the engine's clock measures from ``warmup_s`` (see :func:`with_warmup`)."""
    # (A fleet file is checked as it is parsed, with lines; one built in code is checked here:
    # a model named twice would silently run as the first.)
    problems = fleet_problems(fleet)
    if problems:
        raise SetupError("fleet: " + "; ".join(str(p) for p in problems))
    runs: list[ModelRun] = []
    phases: dict[str, ColdStartPhases] = {}
    for name in sorted(trace.models):
        mt, first = with_warmup(trace.models[name], warmup_s, trace.history_s, trace.end_s)
        spec = fleet.model(name)
        if spec is None:
            known = ", ".join(m.name for m in fleet.models)
            raise SetupError(
                f"trace model {name!r} is not in the fleet and the fleet has no template "
                f"(fleet models: {known})"
            )
        svc, tokens = service_times(spec, mt)
        phases[name] = fleet.coldstart_for(spec)
        runs.append(
            ModelRun(
                name=name,
                arrivals=mt.arrivals.astype(np.float64),
                service_s=svc,
                output_tokens=tokens,
                slots=spec.slots,
                slo_s=spec.slo_s,
                gpus_per_replica=spec.gpu_shape.total_gpus,
                usd_per_replica_hour=spec.usd_per_replica_hour,
                spec=scaling_spec(spec, utilization, mean_service_s=float(svc.mean())),
                initial_replicas=warm_replicas(spec, mt.arrivals, svc),
                measured_from=first,
            )
        )
    return runs, ColdStartCapacity(phases)


def scaling_spec(
    spec: ModelSpec, utilization: float | None = None, mean_service_s: float | None = None
) -> ScalingSpec:
    """What an autoscaler is told about a model. ``mean_service_s`` is what profiling the
    model on the trace's requests would give (SkyServe needs it to turn a concurrency target
    into QPS)."""
    u = spec.target_utilization if utilization is None else utilization
    return ScalingSpec(
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        target_per_replica=u * spec.slots,
        metric="concurrency",
        max_concurrency_per_replica=float(spec.slots),
        latency_slo_s=spec.slo_s,
        scale_to_zero_grace_s=spec.scale_to_zero_grace_s,
        mean_service_s=mean_service_s,
        # An unset scale-down delay: the autoscaler's default, as the daemon's.
        **spec.scaling.limits(ScalingSpec.scale_down_delay_s),
    )


def warm_replicas(spec: ModelSpec, arrivals: np.ndarray, svc: np.ndarray) -> int:
    """Replicas for the first 10 minutes' load at the model's target utilization (Little's
    law: concurrency = rate x mean service time), within its bounds."""
    if arrivals.size == 0:
        return spec.min_replicas
    t0 = float(arrivals[0])
    k = int(np.searchsorted(arrivals, t0 + WARM_START_WINDOW_S))
    if k == 0 or float(arrivals[0]) > WARM_START_WINDOW_S:
        return spec.min_replicas
    concurrency = k / WARM_START_WINDOW_S * float(svc[:k].mean())
    need = math.ceil(concurrency / (spec.slots * spec.target_utilization))
    return max(spec.min_replicas, min(spec.max_replicas, need))
