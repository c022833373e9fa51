"""What a full-loop replay runs: the customer's policy (models, accounts, pools), the
simulated clouds' stock, quotas, stockouts and cold-start timings, and each model's
requests on the trace's clock.

One model schema serves both files: a fleet model is written as the policy model it stands
for (:func:`policy_model`: its shape and slots are the policy's one shape option, its SLO
the latency SLO), and a policy model is served with a fleet model's service time and
cold-start phases (the fleet's model of that name, else :func:`fleet_model`'s defaults).
Without a clouds file, every shape gets one pool with unlimited stock: its cheapest catalog
instance type, on that cloud's first region, at the fleet's price."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coldstart.model import Phases
from controlplane.simulator.fullloop.serving import ModelLoad
from controlplane.simulator.setup import build_runs
from controlplane.simulator.traces import Trace
from providers.sim import SimTimings
from schema.catalog import REGIONS, parse_gpu_shape
from schema.fleet import ColdStartOverride, ColdStartPhases, Fleet, ModelSpec, ServiceTime
from schema.policy import Model as PolicyModel
from schema.policy import Policy, ScalingTarget
from schema.types import Cloud

WARM_VM_S = Phases().warm_vm_s  # coldstart.md §5: T_vm from a stopped warm pool, 1-2 min

CUSTOMER = "sim"
# The stock of a pool without a limit: more nodes than any replay launches.
UNLIMITED = 1_000_000
# A policy model the fleet does not describe is served like examples/fleet-llm.yaml's
# llama-70b: autoscalers.md §5.1 Dynamo defaults (TTFT 0.5 s at ISL 3000 -> 6000 prefill
# tokens/s, ITL 0.05 s), traces/azure-llm-2023/README.md conv mean tokens where the trace
# has none.
DEFAULT_SERVICE = ServiceTime(
    prefill_tokens_per_s=6000,
    output_token_s=0.05,
    default_input_tokens=1155,
    default_output_tokens=211,
)


@dataclass(frozen=True)
class Stockout:
    """From ``start_s`` to ``end_s`` (seconds into the measured trace), the cloud has
    ``capacity`` nodes of the type in the region, or in ``zone`` (0: none at all)."""

    cloud: Cloud
    region: str
    instance_type: str
    start_s: float
    end_s: float
    capacity: int = 0
    zone: str | None = None  # only this zone of the region

    @property
    def pool(self) -> str:
        return f"{self.cloud.value}/{self.zone or self.region}/{self.instance_type}"


@dataclass(frozen=True)
class CloudSetup:
    """The simulated clouds: stock per (cloud, region, instance type) (``default`` for the
    rest), quotas per (sim account key, region, instance type), and per-pool cold-start
    changes over each model's phases."""

    default_capacity: int = UNLIMITED
    capacity: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    quota: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    pool_coldstart: Mapping[tuple[str, str, str], ColdStartOverride] = field(default_factory=dict)
    stockouts: tuple[Stockout, ...] = ()


@dataclass
class Scenario:
    policy: Policy
    policy_text: str
    loads: list[ModelLoad]
    slo_s: dict[str, float]
    measured_from: dict[str, int]  # index of each model's first measured request
    phases: dict[str, ColdStartPhases]  # each model's own, before a pool's changes
    clouds: CloudSetup
    warmup_s: float
    end_s: float  # on the replay's clock: warm-up + the trace's span
    label: str = ""
    # Replicas each model opens with, ready (``setup.warm_replicas``, as the engine opens).
    initial: dict[str, int] = field(default_factory=dict)

    @property
    def customer(self) -> str:
        return self.policy.customer

    def timings(self, model: str, cloud: str, region: str, instance_type: str) -> SimTimings:
        """A node's timings: up after capacity+VM, serving after bootstrap, image, weights
        and load (coldstart.md §0), the pool's changes over the model's phases."""
        p = self.phases.get(model, ColdStartPhases())
        override = self.clouds.pool_coldstart.get((cloud, region, instance_type))
        if override is not None:
            p = override.apply(p)
        return SimTimings(
            boot_s=p.node_s,
            serve_s=p.total_s - p.node_s,
            terminate_s=SimTimings().terminate_s,
            # A stopped warm node (coldstart.md §4-§5): 1-2 min back to running; it kept its
            # bootstrap and image, and fetches and loads its weights again (instance-store
            # NVMe does not survive a stop).
            start_s=WARM_VM_S,
            resume_serve_s=p.image_pull_s + p.weight_fetch_s + p.load_init_s,
        )

    def profiled_service_s(self) -> dict[str, float]:
        """Each model's mean service time over its requests (what the engine tells every
        decider, ``setup.scaling_spec``), for the models that have any."""
        return {ld.name: float(ld.service_s.mean()) for ld in self.loads if ld.service_s.size}

    def lead_s(self, model: str) -> float:
        """The model's longest cold start in any pool: its warm replicas are launched this
        long before the replay opens, so they are ready as it does."""
        p = self.phases.get(model, ColdStartPhases())
        totals = [p.total_s] + [o.apply(p).total_s for o in self.clouds.pool_coldstart.values()]
        return max(totals)


def policy_model(spec: ModelSpec) -> PolicyModel:
    """A fleet model as the policy model it stands for (the fleet's model section is a
    policy's, plus what only a simulation needs)."""
    return PolicyModel(
        name=spec.name,
        shapes=spec.shape_options,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        target=ScalingTarget(utilization=spec.target_utilization),
        latency_slo_ms=max(1, round(spec.slo_s * 1000)),
        clouds=spec.clouds,
        regions=spec.regions,
        priority=spec.priority,
        weights=spec.weights,
        scale_to_zero_grace_s=spec.scale_to_zero_grace_s,
        scaling=spec.scaling,
        health=spec.health,
        runtime=spec.runtime,
        image=spec.image,
    )


def fleet_model(model: PolicyModel, fleet: Fleet | None) -> ModelSpec:
    """A policy model as the fleet model that serves it: the fleet's own of that name (or
    its template) for the service time and cold start, else :data:`DEFAULT_SERVICE`; the
    policy's first shape, bounds, SLO and target."""
    base = fleet.model(model.name) if fleet is not None else None
    first = model.shapes[0]
    return ModelSpec(
        name=model.name,
        shape=first.shape,
        slots=first.max_concurrency,
        shapes=list(model.shapes),
        service=base.service if base is not None else DEFAULT_SERVICE,
        slo_s=model.latency_slo_ms / 1000.0,
        min_replicas=model.min_replicas,
        max_replicas=max(1, model.max_replicas),
        target_utilization=model.target.utilization,
        scale_to_zero_grace_s=model.scale_to_zero_grace_s,
        scaling=model.scaling,
        health=model.health,
        coldstart=base.coldstart if base is not None else None,
    )


def fleet_policy(fleet: Fleet, models: list[str]) -> dict[str, Any]:
    """The policy a fleet stands for: its ``models`` (the trace's), and one account per cloud
    holding each shape's cheapest instance type, priced at the fleet's price."""
    specs = [s for s in (fleet.model(n) for n in models) if s is not None]
    accounts: dict[Cloud, dict[str, Any]] = {}
    for spec in specs:
        for option in spec.shape_options:
            shape = parse_gpu_shape(option.shape)
            it = shape.instance_types()[0]
            acct = accounts.setdefault(it.cloud, sim_account(it.cloud, [REGIONS[it.cloud][0]]))
            # (two models of one shape at different prices: the first model's price)
            acct["prices"].setdefault(it.name, spec.usd_per_node_hour_of(shape))
    return {
        "customer": CUSTOMER,
        "accounts": list(accounts.values()),
        "models": [policy_model(s).model_dump(mode="json", exclude_defaults=True) for s in specs],
    }


def sim_account(cloud: Cloud, regions: list[str], name: str | None = None) -> dict[str, Any]:
    """A customer-owned account of the simulated world (its credential references are
    never used: ``providers.sim`` stands in for the cloud)."""
    creds: dict[Cloud, dict[str, str]] = {
        Cloud.AWS: {"role_arn": "arn:aws:iam::000000000000:role/gpucap-sim"},
        Cloud.GCP: {"project": "gpucap-sim", "service_account": "sim@gpucap-sim.iam"},
        Cloud.OCI: {"compartment_id": "ocid1.compartment.oc1..sim", "profile": "SIM"},
    }
    return {
        "name": name or f"sim-{cloud.value}",
        "cloud": cloud.value,
        "regions": regions,
        "credentials": creds[cloud],
        "prices": {},
    }


def policy_text(doc: Mapping[str, Any]) -> str:
    """A policy document as policy-file text (JSON is YAML)."""
    return json.dumps(doc, indent=1)


def build_scenario(
    policy: Policy,
    text: str,
    fleet: Fleet,
    trace: Trace,
    warmup_s: float,
    clouds: CloudSetup | None = None,
) -> Scenario:
    """The replay's inputs. ``fleet`` times the requests of the trace's models (which the
    policy must hold); the policy's models the trace lacks get no requests."""
    runs, _ = build_runs(fleet, trace, warmup_s=warmup_s)
    by_name = {r.name: r for r in runs}
    loads, slo, first, phases, initial = [], {}, {}, {}, {}
    for m in policy.models:
        run = by_name.get(m.name)
        spec = fleet.model(m.name)
        if spec is not None:
            phases[m.name] = fleet.coldstart_for(spec)
        if run is None:
            empty = np.zeros(0)
            loads.append(ModelLoad(m.name, empty, empty))
            first[m.name] = 0
        else:
            loads.append(ModelLoad(m.name, run.arrivals, run.service_s, run.output_tokens))
            first[m.name] = run.measured_from
            initial[m.name] = run.initial_replicas
        slo[m.name] = m.latency_slo_ms / 1000.0
    return Scenario(
        policy=policy,
        policy_text=text,
        loads=loads,
        slo_s=slo,
        measured_from=first,
        phases=phases,
        clouds=clouds or CloudSetup(),
        warmup_s=warmup_s,
        end_s=warmup_s + trace.end_s,
        label=trace.label,
        initial=initial,
    )
