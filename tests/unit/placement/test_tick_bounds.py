"""One plan's work is bounded per model and per customer (issue 26): a model that asks for
2^32-1 replicas once kept the place job inside one tick for good, and every customer's
placement with it. The rest of what a model wants is next tick's."""

from __future__ import annotations

import time

from controlplane.placement import CustomerInput, ModelDemand, ModelView, PoolView, plan
from controlplane.placement.plan import MAX_LAUNCHES_PER_CUSTOMER, MAX_LAUNCHES_PER_MODEL
from schema.policy import Model, Overflow, ShapeOption
from schema.types import CapacityTier

HUGE = 2**32 - 1

POOL = PoolView(
    id="own",
    cloud="aws",
    account="acme-aws",
    region="us-east-1",
    instance_type="p5.48xlarge",
    gpu_shape="8xH100",
    tier=CapacityTier.ON_DEMAND,
    price_usd_per_hour=40.0,
)  # no capacity hint: the pool never says "full", as a cloud's on-demand pool does not


def model(name: str, max_replicas: int, priority: int = 100) -> Model:
    # (unvalidated: a row stored before the API bounded replica counts (the bound is
    # schema.policy.MAX_REPLICAS now); the planner must stay bounded on it all the same.
    shapes = [ShapeOption(shape="8xH100", max_concurrency=64)]
    valid = Model(name=name, shapes=shapes, priority=priority)
    return valid.model_copy(update={"min_replicas": max_replicas, "max_replicas": max_replicas})


def demand(name: str, desired: float, priority: int = 100) -> ModelDemand:
    return ModelDemand(
        ModelView("acme", name, model(name, max(HUGE, int(desired)), priority)), desired, ()
    )


def customer(*demands: ModelDemand) -> CustomerInput:
    return CustomerInput("acme", demands, (POOL,), Overflow(), now=0.0)


def test_a_model_wanting_2_pow_32_replicas_launches_a_bounded_batch_and_defers_the_rest() -> None:
    started = time.process_time()
    result = plan(customer(demand("huge", HUGE, priority=1000), demand("chat", 3)))
    took = time.process_time() - started

    huge = result.plans["huge"]
    assert len(huge.launches) == MAX_LAUNCHES_PER_MODEL
    assert huge.deferred == HUGE - MAX_LAUNCHES_PER_MODEL and huge.unplaced == 0
    assert "more next tick" in huge.detail
    # The other model, planned after the huge one (lower priority), still gets its replicas.
    assert len(result.plans["chat"].launches) == 3 and result.plans["chat"].deferred == 0
    assert took < 1.0  # was: never returned (one loop per missing replica)


def test_the_customer_bound_defers_later_models_to_the_next_tick() -> None:
    n = MAX_LAUNCHES_PER_CUSTOMER // MAX_LAUNCHES_PER_MODEL
    demands = [demand(f"m{i:02d}", 2 * MAX_LAUNCHES_PER_MODEL, priority=500 - i) for i in range(n)]
    result = plan(customer(*demands, demand("last", 5, priority=1)))

    assert sum(len(p.launches) for p in result.plans.values()) == MAX_LAUNCHES_PER_CUSTOMER
    assert all(len(result.plans[d.model.name].launches) == MAX_LAUNCHES_PER_MODEL for d in demands)
    last = result.plans["last"]
    assert (len(last.launches), last.deferred, last.unplaced) == (0, 5, 0)


def test_under_the_bound_nothing_is_deferred() -> None:
    result = plan(customer(demand("chat", MAX_LAUNCHES_PER_MODEL)))
    chat = result.plans["chat"]
    assert (len(chat.launches), chat.deferred, chat.unplaced) == (MAX_LAUNCHES_PER_MODEL, 0, 0)
