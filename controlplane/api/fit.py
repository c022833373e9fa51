"""Whether a model fits a customer's policy. Pure.

"The policy allows this pool for this model" has one definition, placement's policy
filters (:data:`controlplane.placement.plan.POLICY_FILTERS`): the fit check builds the
placement input the loop would, from the policy's pools, and asks those filters."""

from __future__ import annotations

from controlplane import placement
from controlplane.api.errors import AlreadyExistsError, InvalidArgumentError, ServiceError
from controlplane.placement.plan import POLICY_FILTERS
from controlplane.pools import PoolSpec, pools_for_policy
from schema.policy import Model as ModelSpec
from schema.policy import Policy, Problem, semantic_problems


def check_fits(policy: Policy, model: ModelSpec) -> None:
    """The model must be acceptable inside the customer's policy: the same checks a policy
    file gets (clouds and regions the accounts allow, bounds, shapes), plus at least one
    pool that placement may use for it. The customer's other API models play no part: the
    checks of one model read only the policy's accounts and the model itself (a name taken
    by another API model is the store's to refuse), so a deploy costs the same at the
    thousandth model as at the first."""
    others = [m for m in policy.models if m.name != model.name]
    if len(others) != len(policy.models):
        raise AlreadyExistsError(
            "model (managed by the policy file)", f"{policy.customer}/{model.name}"
        )
    candidate = policy.model_copy(update={"models": [*others, model]})
    index = len(candidate.models) - 1
    mine = [
        Problem(p.path[2:], p.reason)
        for p in semantic_problems(candidate)
        if p.path[:2] == ("models", index)
    ]
    if mine:
        raise InvalidArgumentError.from_problems(mine, prefix="spec.")
    if not usable_pools(policy, model):
        shapes = ", ".join(o.shape for o in model.shapes)
        raise InvalidArgumentError(
            "spec.shapes",
            f"no account of customer {policy.customer} offers {shapes} in the model's allowed "
            "clouds and regions",
        )


def usable_pools(policy: Policy, model: ModelSpec) -> list[placement.PoolView]:
    """The policy's pools that every one of placement's policy filters allows for ``model``
    (cloud, region, shape, shared overflow). Transient conditions (cordons, stockouts) are
    not the policy's and are not asked."""
    alone = policy.model_copy(update={"models": [model]})
    inp = placement.PlacementInput(
        model=placement.ModelView(policy.customer, model.name, model),
        desired=0.0,
        replicas=(),
        pools=tuple(pool_view(p) for p in pools_for_policy(alone)),
        overflow=policy.overflow,
    )
    return [p for p in inp.pools if all(ok(inp, p) for _, ok in POLICY_FILTERS)]


def pool_view(spec: PoolSpec) -> placement.PoolView:
    """Placement's view of a pool the policy derives (no nodes yet, nothing transient)."""
    return placement.PoolView(
        id=spec.id,
        cloud=spec.cloud.value,
        account=spec.account,
        region=spec.region,
        instance_type=spec.instance_type,
        gpu_shape=spec.gpu_shape,
        tier=spec.tier,
        price_usd_per_hour=spec.price_usd_per_hour,
        committed=spec.committed,
    )


def unfit_models(
    policy: Policy, api_models: list[ModelSpec]
) -> list[tuple[ModelSpec, ServiceError]]:
    """The API-deployed models a (new) policy no longer fits, each with why."""
    out: list[tuple[ModelSpec, ServiceError]] = []
    for model in api_models:
        try:
            check_fits(policy, model)
        except (InvalidArgumentError, AlreadyExistsError) as exc:
            out.append((model, exc))
    return out
