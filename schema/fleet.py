"""The fleet file of ``gpucap simulate``: which models run on which GPU shape, what one replica
of each sustains (concurrency slots and a service-time model), their SLO and bounds, what a
GPU costs and how long a cold start takes, phase by phase.

Defaults come from ``../shared/reference/coldstart.md`` §5 (cold-start phases) and
``../shared/reference/autoscalers.md`` §1 (scrape interval). Prices default to the catalog
(``schema.catalog``, clouds.md §A.2). Nothing here does I/O except :func:`load_fleet_file`,
which reads one file and reports every problem with its line (``schema.policy_file`` does the
same for policies, through the shared ``parse_yaml_model``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schema.catalog import GpuShape, parse_gpu_shape
from schema.policy import (
    MAX_REPLICAS,
    MAX_SHAPES,
    Health,
    Problem,
    ScalingBehavior,
    ScalingTarget,
    ShapeOption,
    TargetMetric,
    Weights,
    with_header,
)
from schema.policy_file import PolicyError, locate, parse_yaml_model
from schema.runtime import Runtime
from schema.types import Cloud

Seconds = Annotated[float, Field(ge=0)]
ModelName = Annotated[str, Field(min_length=1, max_length=200)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ColdStartPhases(_Strict):
    """Time-to-ready of a new replica, phase by phase (coldstart.md §0 phase model).

    The defaults are coldstart.md §5 "typical" values for an on-demand 8xH100/H200 node with a
    baked image and weights in a region-local object store."""

    capacity_vm_s: Seconds = 600.0  # §5 T_capacity+T_vm, 8xH100/H200 on-demand: typical 10 min
    bootstrap_s: Seconds = 60.0  # §5 T_bootstrap, baked image: typical 1 min
    image_pull_s: Seconds = 15.0  # §5 T_image, lazy/streamed or pre-pulled: 10-20 s
    # §3.3 70B BF16 (140 GB) over a 400 Gbps object store: 2.8 s floor, x1.3-1.8 for loader
    # efficiency (§3.3 reading note) ≈ 5 s; rounded up to 10 s for origin variance (§1.4).
    weight_fetch_s: Seconds = 10.0
    load_init_s: Seconds = 210.0  # §5 T_init, vLLM 70B TP=8 without caches: typical 3.5 min
    # The spread of T_capacity+T_vm from launch to launch: the standard deviation of its
    # natural log, ``capacity_vm_s`` being the median. coldstart.md §1/§5: 8xH100 launches
    # take ~10 min P50 and ~30 min P90 (Databricks), so ln(3) / 1.2816 (the normal's P90)
    # = 0.857. The simulator draws each launch from it (seeded); 0: every launch the same.
    capacity_vm_spread: Annotated[float, Field(ge=0, le=3)] = 0.857

    @property
    def node_s(self) -> float:
        """Until the node runs (the replica counts as ``provisioning`` before this)."""
        return self.capacity_vm_s

    @property
    def total_s(self) -> float:
        return (
            self.capacity_vm_s
            + self.bootstrap_s
            + self.image_pull_s
            + self.weight_fetch_s
            + self.load_init_s
        )


class ColdStartOverride(_Strict):
    """Per-model changes to the fleet's phases; a field left out keeps the fleet's value."""

    capacity_vm_s: Seconds | None = None
    bootstrap_s: Seconds | None = None
    image_pull_s: Seconds | None = None
    weight_fetch_s: Seconds | None = None
    load_init_s: Seconds | None = None
    capacity_vm_spread: Annotated[float, Field(ge=0, le=3)] | None = None

    def apply(self, base: ColdStartPhases) -> ColdStartPhases:
        changes = {k: v for k, v in self.model_dump().items() if v is not None}
        return base.model_copy(update=changes)


class ServiceTime(_Strict):
    """How long one request occupies one slot of a replica, once it starts.

    Per request, the first that applies: the trace's own ``service_s``; else
    ``input_tokens / prefill_tokens_per_s + output_tokens * output_token_s`` with the trace's
    token counts (or ``default_*_tokens`` when the trace has none, e.g. ServeGen rate files);
    else ``per_request_s``."""

    prefill_tokens_per_s: Annotated[float, Field(gt=0)] | None = None
    output_token_s: Annotated[float, Field(gt=0)] | None = None
    per_request_s: Annotated[float, Field(gt=0)] | None = None
    default_input_tokens: Annotated[int, Field(ge=0)] | None = None
    default_output_tokens: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _usable(self) -> ServiceTime:
        tokens = self.prefill_tokens_per_s is not None and self.output_token_s is not None
        if (self.prefill_tokens_per_s is None) != (self.output_token_s is None):
            raise ValueError("prefill_tokens_per_s and output_token_s go together")
        if not tokens and self.per_request_s is None:
            raise ValueError(
                "needs prefill_tokens_per_s + output_token_s (token model) or per_request_s"
            )
        return self

    @property
    def has_token_model(self) -> bool:
        return self.prefill_tokens_per_s is not None and self.output_token_s is not None


class _ModelFields(_Strict):
    """A fleet model's section: a policy file's model section (``schema.policy.Model``:
    ``shapes``, ``latency_slo_ms``, ``target``, bounds, ``scaling``, ``health``, and ``clouds``,
    ``regions``, ``priority``, ``runtime``, ``image``, ``weights``, which only
    ``--full-loop``'s policy carries) plus what only a simulation needs: ``service``, the
    price and ``coldstart``.
    The fleet's own older keys still read: ``shape`` + ``slots`` for one shape option,
    ``slo_s`` for ``latency_slo_ms`` (in seconds), ``target_utilization`` for
    ``target.utilization``. The engine replays one shape per model: the first option."""

    # The one shape the engine replays (the first of ``shapes``) and its slots.
    shape: str
    slots: Annotated[int, Field(ge=1)]  # requests one replica serves at once
    # the policy's form; empty: the one above
    shapes: Annotated[list[ShapeOption], Field(max_length=MAX_SHAPES)] = []
    service: ServiceTime
    slo_s: Annotated[float, Field(gt=0)]  # max wait before service starts
    # (bounded as a policy's are, schema.policy.MAX_REPLICAS)
    min_replicas: Annotated[int, Field(ge=0, le=MAX_REPLICAS)] = 0
    max_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 1000
    # autoscalers.md §1.2: Knative's container-concurrency-target-percentage is 70.
    target_utilization: Annotated[float, Field(gt=0, le=1)] = 0.7
    scale_to_zero_grace_s: Seconds = 600.0
    scaling: ScalingBehavior = ScalingBehavior()  # as in a policy file (schema/policy.py)
    health: Health = Health()
    clouds: list[Cloud] = []
    regions: list[str] = []
    priority: Annotated[int, Field(ge=0, le=1000)] = 100
    runtime: Runtime = Runtime()
    image: str | None = None
    weights: Weights | None = None
    usd_per_gpu_hour: Annotated[float, Field(gt=0)] | None = None
    usd_per_node_hour: Annotated[float, Field(gt=0)] | None = None
    coldstart: ColdStartOverride | None = None

    @model_validator(mode="before")
    @classmethod
    def _policy_keys(cls, data: Any) -> Any:
        return policy_keys(data)

    @field_validator("shape")
    @classmethod
    def _known_shape(cls, v: str) -> str:
        parse_gpu_shape(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) is greater than max_replicas "
                f"({self.max_replicas})"
            )
        if self.usd_per_gpu_hour is not None and self.usd_per_node_hour is not None:
            raise ValueError("give usd_per_gpu_hour or usd_per_node_hour, not both")
        return self

    @property
    def shape_options(self) -> list[ShapeOption]:
        """The policy's shape options: ``shapes``, else the one of ``shape`` and ``slots``."""
        return list(self.shapes) or [ShapeOption(shape=self.shape, max_concurrency=self.slots)]


# A fleet model's policy keys and the older fleet keys they stand for.
_SAME = {"latency_slo_ms": ("slo_s",), "target": ("target_utilization",)}


def policy_keys(data: Any) -> Any:
    """A model section written with a policy's keys, as the fleet's own: ``shapes`` fills
    ``shape`` and ``slots`` from its first option (and stays, for the policy), a
    ``latency_slo_ms`` becomes ``slo_s``, a ``target`` its ``target_utilization``. A key
    given in both forms is refused; values are left for the fields' own checks."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for new, olds in _SAME.items():
        if new in out and any(k in out for k in olds):
            raise ValueError(f"give {new} (a policy's key) or {olds[0]}, not both")
    shapes = out.get("shapes")
    if isinstance(shapes, list) and shapes and isinstance(shapes[0], dict):
        first = {"shape": shapes[0].get("shape"), "slots": shapes[0].get("max_concurrency")}
        # (a model's own dump carries both, alike: a template's clone)
        if any(k in out and out[k] != v for k, v in first.items()):
            raise ValueError("give shapes (a policy's key) or shape and slots, not both")
        out.update(first)
    slo_ms = out.pop("latency_slo_ms", None)
    if slo_ms is not None:
        if isinstance(slo_ms, bool) or not isinstance(slo_ms, int | float) or slo_ms < 1:
            raise ValueError(f"latency_slo_ms must be a number of milliseconds >= 1: {slo_ms!r}")
        out["slo_s"] = slo_ms / 1000.0
    target = out.pop("target", None)
    if target is not None:
        parsed = ScalingTarget.model_validate(target)
        if parsed.metric != TargetMetric.CONCURRENCY:
            raise ValueError(
                f"target.metric {parsed.metric.value!r}: the simulator replays concurrency "
                "targets only"
            )
        out["target_utilization"] = parsed.utilization
    return out


class ModelSpec(_ModelFields):
    """One deployment in the fleet (``name`` is the trace's model name)."""

    name: ModelName

    @property
    def gpu_shape(self) -> GpuShape:
        return parse_gpu_shape(self.shape)

    @property
    def usd_per_replica_hour(self) -> float:
        """Price of one replica-hour of the replayed shape."""
        shape = self.gpu_shape
        return self.usd_per_node_hour_of(shape) * shape.nodes

    def usd_per_node_hour_of(self, shape: GpuShape) -> float:
        """Price of one node-hour of ``shape``: explicit, else the cheapest catalog node
        (clouds.md §A.2)."""
        if self.usd_per_gpu_hour is not None:
            return self.usd_per_gpu_hour * shape.gpus
        if self.usd_per_node_hour is not None:
            return self.usd_per_node_hour
        return shape.instance_types()[0].list_price_usd_per_hour


class ModelTemplate(_ModelFields):
    """What a trace model that the fleet does not name is cloned from."""

    def clone(self, name: str) -> ModelSpec:
        return ModelSpec(name=name, **self.model_dump(exclude_none=True, exclude_defaults=True))


class Fleet(_Strict):
    name: str = "fleet"
    # autoscalers.md §1.1: Knative scrapes every 1 s into 1 s buckets.
    scrape_interval_s: Annotated[float, Field(gt=0, le=300)] = 1.0
    coldstart: ColdStartPhases = ColdStartPhases()
    models: list[ModelSpec] = []
    template: ModelTemplate | None = None

    @model_validator(mode="after")
    def _has_a_model(self) -> Fleet:
        # (Unique model names: fleet_problems, so a duplicate is named at its own line.)
        if not self.models and self.template is None:
            raise ValueError("a fleet needs at least one model or a template")
        return self

    def model(self, name: str) -> ModelSpec | None:
        """The named model, else a clone of the template, else None."""
        found = next((m for m in self.models if m.name == name), None)
        if found is None and self.template is not None:
            return self.template.clone(name)
        return found

    def coldstart_for(self, model: ModelSpec) -> ColdStartPhases:
        return model.coldstart.apply(self.coldstart) if model.coldstart else self.coldstart


class FleetError(Exception):
    """A fleet file that cannot be used; ``problems`` lists every reason with its line."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def fleet_problems(fleet: Fleet) -> list[Problem]:
    """Problems that pydantic's per-field checks cannot see: a model named twice (the second
    would never be used). Pure; order is document order."""
    seen: set[str] = set()
    problems: list[Problem] = []
    for i, m in enumerate(fleet.models):
        if m.name in seen:
            problems.append(Problem(("models", i, "name"), f"duplicate model name {m.name!r}"))
        seen.add(m.name)
    return problems


def parse_fleet(text: str, source: str = "<fleet>") -> Fleet:
    """Parse and validate; raise :class:`FleetError` listing every problem with its line."""
    try:
        fleet, doc = parse_yaml_model(text, Fleet, source, kind="Fleet")
    except PolicyError as exc:
        raise FleetError(exc.problems) from exc
    problems = [locate(doc, p, source) for p in fleet_problems(fleet)]
    if problems:
        raise FleetError(problems)
    return fleet


def load_fleet_file(path: str | Path) -> Fleet:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetError([Problem((), f"cannot read file: {exc}", file=str(p))]) from exc
    return parse_fleet(text, source=str(p))


def json_schema() -> dict[str, Any]:
    schema = with_header(Fleet.model_json_schema(), "Fleet")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpucap simulator fleet"
    return schema
