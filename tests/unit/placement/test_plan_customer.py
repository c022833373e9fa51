"""A whole customer planned at once: the overflow budget and the pools' node counts hold
across its models, highest priority first."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from controlplane.placement import (
    CustomerInput,
    ModelDemand,
    ModelView,
    PoolView,
    plan,
)
from schema.policy import Model, Overflow, ShapeOption
from schema.types import CapacityTier


def model(name: str, priority: int = 100) -> Model:
    shapes = [ShapeOption(shape="8xH100", max_concurrency=64)]
    return Model(name=name, shapes=shapes, max_replicas=50, priority=priority)


OWN = PoolView(
    id="own",
    cloud="aws",
    account="acme-aws",
    region="us-east-1",
    instance_type="p5.48xlarge",
    gpu_shape="8xH100",
    tier=CapacityTier.COMMITTED,
    price_usd_per_hour=40.0,
    committed=2,
)
SHARED = replace(OWN, id="shared", account="gpucap-aws", tier=CapacityTier.SHARED, committed=0)


def demand(name: str, desired: float, priority: int = 100) -> ModelDemand:
    return ModelDemand(ModelView("acme", name, model(name, priority)), desired, ())


def customer(*demands: ModelDemand, pools=(OWN, SHARED), **kw: object) -> CustomerInput:
    base = CustomerInput(
        customer="acme",
        models=demands,
        pools=tuple(pools),
        overflow=Overflow(enabled=True, max_replicas=3),
        now=0.0,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_higher_priority_models_are_planned_first_and_take_the_commitment() -> None:
    result = plan(customer(demand("batch", 2, priority=10), demand("chat", 2, priority=500)))
    assert list(result.plans) == ["chat", "batch"]
    assert [x.pool_id for x in result.plans["chat"].launches] == ["own", "own"]
    # The commitment is used up by chat: batch's replicas are on-demand on the same pool's
    # price, or overflow, whichever is cheaper per unit; both are counted against the caps.
    assert len(result.plans["batch"].launches) == 2


def test_the_overflow_budget_is_shared_by_every_model_of_the_customer() -> None:
    own_full = replace(OWN, capacity_hint=0)  # no more nodes of the customer's own
    result = plan(customer(demand("a", 2), demand("b", 2), pools=(own_full, SHARED)))
    shared = [x for p in result.plans.values() for x in p.launches if x.pool_id == "shared"]
    assert len(shared) == 3  # max_replicas 3 for the customer, not for each model
    assert result.plans["b"].unplaced == 1


def test_replicas_already_on_shared_capacity_count_against_the_budget() -> None:
    own_full = replace(OWN, capacity_hint=0)
    result = plan(customer(demand("a", 2), pools=(own_full, SHARED), shared_replicas_in_use=2))
    assert len(result.plans["a"].launches) == 1 and result.plans["a"].unplaced == 1


def test_a_pool_with_a_blocked_zone_launches_into_its_open_zone() -> None:
    zoned = replace(OWN, zone="us-east-1b")
    (launch,) = plan(customer(demand("a", 1), pools=(zoned,))).plans["a"].launches
    assert launch.zone == "us-east-1b"


@given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.integers(0, 5))
def test_caps_hold_for_any_mix_of_demands(desired: list[int], budget: int) -> None:
    own_full = replace(OWN, capacity_hint=1)
    demands = [demand(f"m{i}", d, priority=i) for i, d in enumerate(desired)]
    inp = customer(
        *demands, pools=(own_full, SHARED), overflow=Overflow(enabled=True, max_replicas=budget)
    )
    result = plan(inp)
    launches = [x for p in result.plans.values() for x in p.launches]
    assert sum(1 for x in launches if x.pool_id == "shared") <= budget
    assert sum(x.nodes for x in launches if x.pool_id == "own") <= 1
    for d in demands:  # each model gets what it asked for, or says what it could not place
        p = result.plans[d.model.name]
        assert len(p.launches) + p.unplaced == d.desired
