"""``controlplane.policy_diff``: what an apply would change, and when it must be refused
(a model the API owns named without adopting it; a deletion or drain without
``allow_deletes``). Pure: the store's side comes in as plain data."""

from __future__ import annotations

from controlplane.policy_diff import (
    OWNER_API,
    OWNER_POLICY,
    Action,
    FieldChange,
    ModelState,
    diff_policy,
)
from controlplane.pools import pools_for_policy
from schema.policy import Policy
from schema.policy_file import parse_policy
from tests.policy_texts import api_model_spec, edited, example_policy, without_llama_8b


def _policy(text: str) -> Policy:
    return parse_policy(text).policy


ACTIVE = _policy(example_policy())


def _models(policy: Policy, replicas: int = 0) -> dict[str, ModelState]:
    """The store's live models as the active policy left them."""
    return {
        m.name: ModelState(OWNER_POLICY, m.model_dump(mode="json"), replicas) for m in policy.models
    }


def _pools(policy: Policy, nodes: int = 0) -> dict[str, int]:
    return {p.id: nodes for p in pools_for_policy(policy)}


def _changes(diff: object) -> list[tuple[str, str, str]]:
    return [(c.kind, c.name, c.action.value) for c in diff.changes]  # type: ignore[attr-defined]


def test_the_active_policy_again_changes_nothing() -> None:
    diff = diff_policy(ACTIVE, ACTIVE, _models(ACTIVE), _pools(ACTIVE))
    assert diff.empty and not diff.refusals(allow_deletes=False)


def test_a_new_customer_creates_its_models_accounts_and_pools() -> None:
    diff = diff_policy(None, ACTIVE, {}, {}, new_customer=True)
    kinds = _changes(diff)
    assert kinds[0] == ("customer", "acme", "create")
    assert [n for k, n, a in kinds if k == "model"] == ["llama-70b", "llama-8b", "deepseek-r1"]
    assert {a for _, _, a in kinds} == {"create"}
    assert len([k for k, _, _ in kinds if k == "pool"]) == len(pools_for_policy(ACTIVE))
    assert not diff.refusals(allow_deletes=False)


def test_a_changed_model_lists_each_field_before_and_after() -> None:
    new = _policy(edited(example_policy(), "max_replicas: 40", "max_replicas: 44"))
    diff = diff_policy(ACTIVE, new, _models(ACTIVE), _pools(ACTIVE))
    (change,) = diff.changes
    assert (change.kind, change.name, change.action) == ("model", "llama-70b", Action.CHANGE)
    assert change.fields == (FieldChange("max_replicas", "40", "44"),)
    assert change.path == ("models", 0, "name")
    assert not diff.refusals(allow_deletes=False)


def test_nested_fields_are_named_by_their_dotted_path() -> None:
    new = _policy(edited(example_policy(), "utilization: 0.7", "utilization: 0.5"))
    (change,) = diff_policy(ACTIVE, new, _models(ACTIVE), _pools(ACTIVE)).changes
    assert change.fields == (FieldChange("target.utilization", "0.7", "0.5"),)


def test_a_model_left_out_is_a_deletion_that_needs_allow_deletes() -> None:
    new = _policy(without_llama_8b(example_policy()))
    diff = diff_policy(ACTIVE, new, _models(ACTIVE, replicas=2), _pools(ACTIVE))
    deleted = [c for c in diff.changes if c.action == Action.DELETE and c.kind == "model"]
    assert [(c.name, c.detail) for c in deleted] == [("llama-8b", "2 live replicas drain")]
    (refusal,) = diff.refusals(allow_deletes=False)
    assert refusal.path == ("models",)
    assert "would delete model llama-8b (2 live replicas drain)" in refusal.reason
    assert "allow_deletes: true" in refusal.reason
    assert not diff.refusals(allow_deletes=True)


def test_a_pool_taken_away_needs_allow_deletes_only_while_it_has_live_nodes() -> None:
    new = _policy(without_llama_8b(example_policy()))  # the only 1xH100 model: its pools go
    empty = diff_policy(ACTIVE, new, {}, _pools(ACTIVE, nodes=0))
    gone = [c for c in empty.changes if c.kind == "pool" and c.action == Action.DELETE]
    assert gone and not any(c.drains for c in gone)
    busy = diff_policy(ACTIVE, new, {}, _pools(ACTIVE, nodes=3))
    drained = [c for c in busy.changes if c.kind == "pool" and c.drains]
    assert [c.name for c in drained] == [c.name for c in gone]
    assert all(c.detail == "3 live nodes drain" for c in drained)
    assert len(busy.refusals(allow_deletes=False)) == len(drained)


def test_an_account_left_out_is_a_deletion() -> None:
    text = example_policy()
    start = text.index("  # The customer's own GCP project")
    end = text.index("  # gpucap's shared Oracle capacity")
    new = _policy(
        edited(text[:start] + text[end:], "clouds: [aws, gcp, oci]", "clouds: [aws, oci]")
    )
    diff = diff_policy(ACTIVE, new, _models(ACTIVE), {})
    assert ("account", "acme-gcp", "delete") in _changes(diff)
    assert any("account acme-gcp" in p.reason for p in diff.refusals(allow_deletes=False))


def test_an_api_owned_model_named_in_the_file_is_a_conflict_unless_adopted() -> None:
    spec = api_model_spec(name="llama-8b", max_replicas=4)
    models = {**_models(ACTIVE), "llama-8b": ModelState(OWNER_API, spec, 1)}
    diff = diff_policy(ACTIVE, ACTIVE, models, _pools(ACTIVE))
    (conflict,) = diff.conflicts
    assert (conflict.name, conflict.path) == ("llama-8b", ("models", 1, "name"))
    (refusal,) = diff.refusals(allow_deletes=True)  # allow_deletes does not settle it
    assert "owned by the API" in refusal.reason and "adopt_models" in refusal.reason

    adopting = _policy(example_policy() + "adopt_models: [llama-8b]\n")
    diff = diff_policy(ACTIVE, adopting, models, _pools(ACTIVE))
    (adopt,) = [c for c in diff.changes if c.kind == "model"]
    assert (adopt.name, adopt.action) == ("llama-8b", Action.ADOPT)
    assert FieldChange("max_replicas", "4", "16") in adopt.fields
    assert not diff.refusals(allow_deletes=False)


def test_api_models_the_file_does_not_name_are_left_alone() -> None:
    new = _policy(without_llama_8b(example_policy()))
    models = {**_models(new), "mistral-7b": ModelState(OWNER_API, api_model_spec(), 2)}
    diff = diff_policy(ACTIVE, new, models, _pools(ACTIVE))
    assert not [c for c in diff.changes if c.kind == "model"]
    # its 1xH100 pools stay, as sync_pools keeps them for it
    assert not [c for c in diff.changes if c.kind == "pool" and "p5.4xlarge" in c.name]


def test_overflow_changes_are_listed_field_by_field() -> None:
    new = _policy(edited(example_policy(), "max_replicas: 12", "max_replicas: 13"))
    changes = diff_policy(ACTIVE, new, _models(ACTIVE), _pools(ACTIVE)).changes
    assert [(c.kind, c.fields) for c in changes] == [
        ("overflow", (FieldChange("max_replicas", "12", "13"),))
    ]
