"""Placement: which pools get a model's new replicas, and which replicas leave on a scale-down.

Pure (no clock reads, no I/O; ``now`` is an input), so every plan can be replayed from its
recorded inputs. A readable pipeline, filter -> score -> select (HOUSE-STYLE principle 10):
each filter is a named function and every rejection is counted in the plan's explanation.
Imports only ``schema``."""

from controlplane.placement.plan import (
    CustomerInput,
    CustomerPlan,
    Drain,
    Launch,
    ModelDemand,
    ModelView,
    PlacementInput,
    Plan,
    PoolView,
    ReplicaView,
    capacity_units,
    live_units,
    place,
    plan,
)

__all__ = [
    "CustomerInput",
    "CustomerPlan",
    "Drain",
    "Launch",
    "ModelDemand",
    "ModelView",
    "PlacementInput",
    "Plan",
    "PoolView",
    "ReplicaView",
    "capacity_units",
    "live_units",
    "place",
    "plan",
]
