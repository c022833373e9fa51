"""The fit check asks placement's own policy filters about the policy's pools."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controlplane import placement
from controlplane.api.errors import AlreadyExistsError, InvalidArgumentError
from controlplane.api.fit import check_fits, pool_view, unfit_models, usable_pools
from controlplane.pools import pools_for_policy
from schema.policy import Model as ModelSpec
from schema.policy import Policy
from schema.policy_file import parse_policy
from schema.types import CapacityTier
from tests.policy_texts import api_model_spec, edited, example_policy

H100X8 = [{"shape": "8xH100", "max_concurrency": 64}]


def _policy(text: str | None = None) -> Policy:
    return parse_policy(text or example_policy()).policy


def _model(name: str = "mistral-7b", **overrides: object) -> ModelSpec:
    return ModelSpec.model_validate(api_model_spec(name, **{"max_replicas": 50, **overrides}))


def _places(policy: Policy, model: ModelSpec) -> set[str]:
    """Where placement itself launches, asked for a replica per pool of the policy when each
    pool has room for one node (every shape here is one node): one in each allowed pool."""
    alone = policy.model_copy(update={"models": [model]})
    pools = tuple(replace(pool_view(p), capacity_hint=1) for p in pools_for_policy(alone))
    inp = placement.PlacementInput(
        model=placement.ModelView(policy.customer, model.name, model),
        desired=float(len(pools)),
        replicas=(),
        pools=pools,
        overflow=policy.overflow,
    )
    return {launch.pool_id for launch in placement.place(inp).launches}


def test_usable_pools_are_the_models_clouds_and_regions() -> None:
    policy = _policy()
    usable = usable_pools(policy, _model(regions=["us-west-2"]))
    assert [(p.account, p.region, p.gpu_shape) for p in usable] == [
        ("acme-aws", "us-west-2", "1xH100")
    ]
    everywhere = usable_pools(policy, _model(clouds=[]))
    assert {p.region for p in everywhere} == {"us-east-1", "us-west-2"}


def test_shared_pools_only_for_models_the_overflow_names() -> None:
    policy = _policy()
    not_named = _model(shapes=H100X8, clouds=["oci"])
    assert usable_pools(policy, not_named) == []
    with pytest.raises(InvalidArgumentError) as err:
        check_fits(policy, not_named)
    assert (err.value.field, err.value.reason) == (
        "spec.shapes",
        "no account of customer acme offers 8xH100 in the model's allowed clouds and regions",
    )
    # An overflow section that names no models lets every model overflow.
    named = _policy(edited(example_policy(), "  models: [llama-70b, deepseek-r1]\n", ""))
    shared = usable_pools(named, not_named)
    assert shared and {(p.cloud, p.tier) for p in shared} == {("oci", CapacityTier.SHARED)}
    check_fits(named, not_named)


@pytest.mark.parametrize("overflow_for_all", [False, True])
def test_the_fit_check_and_placement_agree_on_the_pools(overflow_for_all: bool) -> None:
    text = example_policy()
    if overflow_for_all:
        text = edited(text, "  models: [llama-70b, deepseek-r1]\n", "")
    policy = _policy(text)
    for model in (
        _model(),
        _model(clouds=[]),
        _model(regions=["us-east-1"]),
        _model(shapes=H100X8, clouds=[]),
        _model(name="llama-70b-canary", shapes=H100X8, clouds=["oci", "gcp"]),
    ):
        usable = {p.id for p in usable_pools(policy, model)}
        assert usable and usable == _places(policy, model), model.name


def test_policy_managed_names_and_semantic_problems_are_refused() -> None:
    policy = _policy()
    with pytest.raises(AlreadyExistsError):
        check_fits(policy, _model(name="llama-8b"))
    with pytest.raises(InvalidArgumentError) as err:
        check_fits(policy, _model(regions=["eu-west-9"]))
    assert err.value.field.startswith("spec.regions")


def test_unfit_models_names_those_a_narrower_policy_no_longer_allows() -> None:
    narrower = _policy(
        edited(example_policy(), "regions: [us-east-1, us-west-2]", "regions: [us-east-1]")
    )
    west, east = _model("west", regions=["us-west-2"]), _model("east", regions=["us-east-1"])
    [(model, why)] = unfit_models(narrower, [west, east])
    assert model is west and isinstance(why, InvalidArgumentError)
    assert unfit_models(_policy(), [west, east]) == []
