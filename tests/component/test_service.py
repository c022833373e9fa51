"""ControlPlaneService against a real store, on SQLite and on PostgreSQL (``store`` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from controlplane.api import (
    AlreadyExistsError,
    ControlPlaneService,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from controlplane.jobticks import JobTicks
from controlplane.pools import pools_for_policy
from controlplane.store.db import Store
from controlplane.store.models import (
    Account,
    Customer,
    Event,
    PolicyVersion,
    Pool,
)
from controlplane.store.models import Model as ModelRow
from providers.credentials import ExternalIdGenerator
from schema.policy_file import PolicyError, parse_policy
from tests.component.oncall_kit import add_replica
from tests.policy_texts import api_model_spec, edited, example_policy, without_llama_8b

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EXTERNAL_IDS = ExternalIdGenerator(b"test-secret-0123456789")


class StepClock:
    """A clock that advances one second per read, so event order and timestamps are known."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def svc(store: Store) -> ControlPlaneService:
    return ControlPlaneService(store, clock=StepClock(), external_ids=EXTERNAL_IDS)


def _count(store: Store, table: type) -> int:
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(table)) or 0


def _event_kinds(svc: ControlPlaneService) -> list[str]:
    return [e.kind for e in svc.events(limit=1000)]


def test_apply_good_policy_records_version_accounts_models_and_pools(
    svc: ControlPlaneService, store: Store
) -> None:
    text = example_policy()
    version = svc.apply_policy(text, source="examples/policy.yaml", applied_by="alice@laptop")

    assert (version.customer, version.version, version.applied_by) == ("acme", 1, "alice@laptop")
    assert version.sha256 == parse_policy(text).sha256
    assert version.raw_yaml == text
    with store.session() as s:
        cust = s.get(Customer, "acme")
        assert cust is not None and cust.active_policy_id == version.id
        accounts = {a.name: a for a in s.scalars(select(Account))}
        assert sorted(accounts) == ["acme-aws", "acme-gcp", "shared-oci"]
        assert accounts["acme-aws"].credentials_ref == {
            "role_arn": "arn:aws:iam::123456789012:role/gpucap-provisioner"
        }
        # The ExternalId copy is kept for customer-owned AWS accounts only.
        assert accounts["acme-aws"].external_id == EXTERNAL_IDS.for_customer("acme")
        assert accounts["acme-gcp"].external_id is None
        models = {m.name: m for m in s.scalars(select(ModelRow))}
        assert sorted(models) == ["deepseek-r1", "llama-70b", "llama-8b"]
        assert {m.source for m in models.values()} == {"policy"}
        assert models["llama-70b"].spec["max_replicas"] == 40
        pools = {p.id: p for p in s.scalars(select(Pool))}

    expected = {p.id: p for p in pools_for_policy(parse_policy(text).policy)}
    assert set(pools) == set(expected)
    committed = pools["acme/acme-aws/us-east-1/p5.48xlarge"]
    assert (committed.tier, committed.committed, committed.reservation) == (
        "committed",
        2,
        "cr-0123456789abcdef0",
    )
    assert pools["acme/acme-gcp/us-central1/a3-highgpu-8g"].price_usd_per_hour == 70.0
    assert pools["acme/shared-oci/uk-london-1/BM.GPU.H200.8"].tier == "shared"
    kinds = _event_kinds(svc)
    assert kinds.count("model.deployed") == 3
    assert "policy.applied" in kinds and "pools.changed" in kinds


def test_reapplying_identical_policy_writes_no_new_version(
    svc: ControlPlaneService, store: Store
) -> None:
    first = svc.apply_policy_result(example_policy(), "a.yaml", "alice")
    events_before = _count(store, Event)
    again = svc.apply_policy_result(example_policy(), "a.yaml", "bob")

    assert first.changed and not again.changed
    assert again.version.id == first.version.id
    assert _count(store, PolicyVersion) == 1
    assert _count(store, Event) == events_before


def test_new_policy_version_drops_models_and_pools(svc: ControlPlaneService, store: Store) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    v2_text = edited(without_llama_8b(example_policy()), "max_replicas: 40", "max_replicas: 30")
    v2 = svc.apply_policy(v2_text, "a.yaml", "bob", allow_deletes=True)

    assert v2.version == 2
    assert svc.get_policy("acme").version.version == 2
    old = svc.get_policy("acme", version=1)
    assert old.version.version == 1 and not old.active
    with store.session() as s:
        models = {m.name: m for m in s.scalars(select(ModelRow))}
        pools = {p.id: p for p in s.scalars(select(Pool))}
    assert models["llama-8b"].deleted_at is not None  # replicas drain later
    assert models["llama-70b"].spec["max_replicas"] == 30
    assert models["llama-70b"].deleted_at is None
    # llama-8b was the only 1xH100 model: its pools are deactivated, not deleted.
    small = [p for p in pools.values() if p.instance_type == "p5.4xlarge"]
    assert small and not any(p.active for p in small)
    assert all(p.active for p in pools.values() if p.instance_type == "p5.48xlarge")
    assert [m.row.name for m in svc.list_models("acme")] == ["deepseek-r1", "llama-70b"]
    kinds = _event_kinds(svc)
    assert "model.deleted" in kinds and "model.updated" in kinds


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("max_replicas: 40", "max_replicas: -1", "models[0].max_replicas"),
        ("min_replicas: 1\n", "min_replicas: 50\n", "models[0].min_replicas"),
        (
            "regions: [us-east-1, us-west-2]",
            "regions: [us-east-1, us-west-9]",
            "accounts[0].regions[1]",
        ),
        ("customer: acme\n", "customer: acme\nsurprise: 1\n", "surprise"),
    ],
)
def test_bad_policy_leaves_the_active_policy_unchanged(
    svc: ControlPlaneService, store: Store, old: str, new: str, field: str
) -> None:
    good = svc.apply_policy(example_policy(), "a.yaml", "alice")
    pools_before = [(p.row.id, p.row.active) for p in svc.list_pools(include_inactive=True)]
    models_before = [(m.row.name, m.row.spec) for m in svc.list_models()]
    events_before = _count(store, Event)

    with pytest.raises(PolicyError) as err:
        svc.apply_policy(edited(example_policy(), old, new), "bad.yaml", "mallory")

    assert [p.field for p in err.value.problems] == [field]
    assert all(p.file == "bad.yaml" and p.line for p in err.value.problems)
    active = svc.get_policy("acme")
    assert active.active and active.version.id == good.id and active.version.version == 1
    assert _count(store, PolicyVersion) == 1
    assert [(p.row.id, p.row.active) for p in svc.list_pools(include_inactive=True)] == (
        pools_before
    )
    assert [(m.row.name, m.row.spec) for m in svc.list_models()] == models_before
    assert _count(store, Event) == events_before


def test_bad_policy_for_a_new_customer_creates_nothing(
    svc: ControlPlaneService, store: Store
) -> None:
    with pytest.raises(PolicyError):
        svc.apply_policy("customer: acme\naccounts: []\n", "x.yaml", "alice")
    assert _count(store, Customer) == 0
    assert _count(store, Event) == 0
    with pytest.raises(NotFoundError):
        svc.get_policy()


def test_get_policy_needs_customer_when_several(svc: ControlPlaneService) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    assert svc.get_policy().version.customer == "acme"  # the only one: implied
    svc.apply_policy(edited(example_policy(), "customer: acme", "customer: beta"), "b", "x")
    with pytest.raises(InvalidArgumentError) as err:
        svc.get_policy()
    assert err.value.field == "customer"
    with pytest.raises(NotFoundError):
        svc.get_policy("nobody")
    with pytest.raises(NotFoundError):
        svc.get_policy("acme", version=9)


def test_deploy_model_through_api_adds_its_pools(svc: ControlPlaneService) -> None:
    svc.apply_policy(without_llama_8b(example_policy()), "a.yaml", "alice")
    assert not [p for p in svc.list_pools() if p.row.instance_type == "p5.4xlarge"]

    view = svc.deploy_model("acme", api_model_spec())

    assert (view.row.source, view.row.spec["max_replicas"]) == ("api", 4)
    assert view.row.spec["target"] == {"metric": "concurrency", "utilization": 0.7}  # defaults
    small = {p.row.id for p in svc.list_pools() if p.row.instance_type == "p5.4xlarge"}
    assert small == {
        "acme/acme-aws/us-east-1/p5.4xlarge",
        "acme/acme-aws/us-west-2/p5.4xlarge",
    }
    assert svc.get_model("acme", "mistral-7b").row.id == view.row.id
    # A policy re-apply keeps API-managed models and their pools.
    svc.apply_policy(
        edited(without_llama_8b(example_policy()), "max_replicas: 40", "max_replicas: 41"), "a", "b"
    )
    assert svc.get_model("acme", "mistral-7b").row.deleted_at is None
    assert {p.row.id for p in svc.list_pools() if p.row.instance_type == "p5.4xlarge"} == small
    assert "model.deployed" in _event_kinds(svc)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"max_replicas": -1}, "spec.max_replicas"),
        ({"min_replicas": 9, "max_replicas": 2}, "spec.min_replicas"),
        ({"shapes": [{"shape": "3xH100", "max_concurrency": 4}]}, "spec.shapes[0].shape"),
        ({"shapes": [{"shape": "1xH100", "max_concurrency": 0}]}, "spec.shapes[0].max_concurrency"),
        ({"shapes": []}, "spec.shapes"),
        ({"clouds": ["azure"]}, "spec.clouds[0]"),
        ({"regions": ["eu-west-1"]}, "spec.regions[0]"),  # valid AWS region, no account has it
        ({"name": "Not_A_Name"}, "spec.name"),
        ({"colour": "blue"}, "spec.colour"),
        # 1xH100 exists only on AWS; the model allows only GCP.
        ({"clouds": ["gcp"]}, "spec.shapes"),
    ],
)
def test_deploy_model_rejects_bad_specs_naming_the_field(
    svc: ControlPlaneService, store: Store, overrides: dict[str, object], field: str
) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    models_before = _count(store, ModelRow)
    with pytest.raises(InvalidArgumentError) as err:
        svc.deploy_model("acme", api_model_spec(**overrides))
    assert err.value.field == field, err.value
    assert err.value.reason
    assert _count(store, ModelRow) == models_before


def test_deploy_model_conflicts_and_unknown_customer(svc: ControlPlaneService) -> None:
    with pytest.raises(NotFoundError):
        svc.deploy_model("acme", api_model_spec())
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    with pytest.raises(AlreadyExistsError):
        svc.deploy_model("acme", api_model_spec(name="llama-8b"))  # owned by the policy
    svc.deploy_model("acme", api_model_spec())
    with pytest.raises(AlreadyExistsError):
        svc.deploy_model("acme", api_model_spec())


def test_update_and_delete_model(svc: ControlPlaneService) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    svc.deploy_model("acme", api_model_spec(min_replicas=1, latency_slo_ms=900))

    masked = svc.update_model("acme", {"name": "mistral-7b", "max_replicas": 8}, ["max_replicas"])
    assert masked.row.spec["max_replicas"] == 8
    assert masked.row.spec["min_replicas"] == 1 and masked.row.spec["latency_slo_ms"] == 900
    # Named in the mask but unset: back to the default.
    reset = svc.update_model("acme", {"name": "mistral-7b"}, ["latency_slo_ms"])
    assert reset.row.spec["latency_slo_ms"] == 2000
    replaced = svc.update_model("acme", api_model_spec(max_replicas=2))
    assert (replaced.row.spec["max_replicas"], replaced.row.spec["min_replicas"]) == (2, 0)

    with pytest.raises(InvalidArgumentError) as err:
        svc.update_model("acme", {"name": "mistral-7b"}, ["max_replicas", "flavour"])
    assert err.value.field == "update_mask.paths[1]"
    with pytest.raises(InvalidArgumentError) as err:
        svc.update_model("acme", {"name": "mistral-7b", "min_replicas": 5}, ["min_replicas"])
    assert err.value.field == "spec.min_replicas"  # 5 > max_replicas 2
    with pytest.raises(FailedPreconditionError):
        svc.update_model("acme", {"name": "llama-8b", "max_replicas": 3}, ["max_replicas"])
    with pytest.raises(FailedPreconditionError):
        svc.delete_model("acme", "llama-8b")
    with pytest.raises(NotFoundError):
        svc.update_model("acme", api_model_spec(name="ghost"))

    deleted = svc.delete_model("acme", "mistral-7b")
    assert deleted.row.deleted_at is not None
    assert "mistral-7b" not in [m.row.name for m in svc.list_models("acme")]
    assert "mistral-7b" in [m.row.name for m in svc.list_models("acme", include_deleted=True)]
    with pytest.raises(NotFoundError):
        svc.delete_model("acme", "mistral-7b")
    # Re-deploying a deleted model revives its row.
    again = svc.deploy_model("acme", api_model_spec())
    assert again.row.id == deleted.row.id and again.row.deleted_at is None
    kinds = _event_kinds(svc)
    assert kinds.count("model.updated") == 3 and "model.deleted" in kinds


def test_pin_pause_and_cordon(svc: ControlPlaneService) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")

    assert svc.pin_model("acme", "llama-70b", 5).row.pinned_replicas == 5
    assert svc.pin_model("acme", "llama-70b", None).row.pinned_replicas is None
    with pytest.raises(InvalidArgumentError) as err:
        svc.pin_model("acme", "llama-70b", 41)
    assert err.value.field == "replicas"
    with pytest.raises(InvalidArgumentError):
        svc.pin_model("acme", "llama-70b", -1)
    with pytest.raises(NotFoundError):
        svc.pin_model("acme", "nope", 1)
    assert svc.pause_model("acme", "deepseek-r1", True).row.paused
    assert svc.get_model("acme", "deepseek-r1").row.paused

    pool_id = "acme/acme-aws/us-west-2/p5.48xlarge"
    assert svc.cordon_pool(pool_id, True, "stockouts all morning").row.cordoned
    assert next(p for p in svc.list_pools() if p.row.id == pool_id).row.cordoned
    with pytest.raises(NotFoundError):
        svc.cordon_pool("acme/none/x/y", True)
    # A later policy apply keeps the on-call cordon.
    svc.apply_policy(edited(example_policy(), "max_replicas: 40", "max_replicas: 39"), "a", "b")
    assert next(p for p in svc.list_pools() if p.row.id == pool_id).row.cordoned

    events = svc.events(limit=1000)
    kinds = [e.kind for e in events]
    for kind in ("model.pinned", "model.unpinned", "model.paused", "pool.cordoned"):
        assert kind in kinds
    cordon = next(e for e in events if e.kind == "pool.cordoned")
    assert "stockouts all morning" in cordon.message and cordon.severity == "warning"


def test_list_nodes_pools_and_model_counts(svc: ControlPlaneService, store: Store) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    east = "acme/acme-aws/us-east-1/p5.48xlarge"
    gcp = "acme/acme-gcp/us-central1/a3-highgpu-8g"
    add_replica(store, "llama-70b", east, "ready", ["ready"], rid="r1")
    add_replica(store, "llama-70b", gcp, "provisioning", ["provisioning"], rid="r2")
    add_replica(store, "llama-70b", gcp, "running", ["running"], rid="r3")
    add_replica(store, "deepseek-r1", east, "provisioning", ["pending", "provisioning"], rid="r4")
    add_replica(store, "llama-70b", east, "terminated", ["terminated"], rid="r5")

    model = svc.get_model("acme", "llama-70b")
    assert (model.ready, model.starting, model.provisioning, model.draining) == (1, 1, 1, 0)
    assert "terminated" not in model.replicas_by_state

    nodes = svc.list_nodes()
    assert sorted(n.row.id for n in nodes) == ["r1-n0", "r2-n0", "r3-n0", "r4-n0", "r4-n1"]
    assert {n.row.id: n.model for n in nodes}["r4-n1"] == "deepseek-r1"
    assert [n.row.id for n in svc.list_nodes(model="deepseek-r1", states=["pending"])] == ["r4-n0"]
    assert sorted(n.row.id for n in svc.list_nodes(pool_id=gcp)) == ["r2-n0", "r3-n0"]
    assert "r5-n0" in [n.row.id for n in svc.list_nodes(include_terminal=True)]
    assert svc.list_nodes(customer="beta") == []
    with pytest.raises(InvalidArgumentError) as err:
        svc.list_nodes(states=["ready", "sleeping"])
    assert err.value.field == "states[1]"

    pools = {p.row.id: p for p in svc.list_pools("acme")}
    assert dict(pools[east].nodes_by_state) == {"ready": 1, "pending": 1, "provisioning": 1}
    assert dict(pools[gcp].nodes_by_state) == {"provisioning": 1, "running": 1}
    assert {p.row.cloud for p in svc.list_pools(cloud="oci")} == {"oci"}

    status = svc.status()
    assert (status.customers, status.models) == (1, 3)
    assert status.pools == len(pools)
    assert dict(status.nodes_by_state)["terminated"] == 1
    assert status.last_event_id == svc.events(limit=1)[-1].id


def test_events_cursor_and_filters(svc: ControlPlaneService) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    everything = svc.events(limit=1000)
    assert [e.id for e in everything] == sorted(e.id for e in everything)
    middle = everything[2].id
    after = svc.events(since_id=middle, limit=1000)
    assert [e.id for e in after] == [e.id for e in everything if e.id > middle]
    assert [e.id for e in svc.events(limit=2)] == [e.id for e in everything[-2:]]
    assert {e.model for e in svc.events(model="llama-70b")} == {"llama-70b"}
    with pytest.raises(InvalidArgumentError) as err:
        svc.events(since_id=-1)
    assert err.value.field == "since_id"


def test_status_reports_job_ticks(store: Store) -> None:
    ticks = JobTicks()  # the daemon's; the service only reads them
    svc = ControlPlaneService(store, clock=StepClock(), job_ticks=ticks)
    ticks.record("reconcile", T0, 0.25)
    ticks.record("reconcile", T0 + timedelta(seconds=5), 0.5, error="ThrottledError: slow")
    ticks.record("decide", T0, 0.01)
    jobs = {j.job: j for j in svc.status().jobs}
    assert (jobs["reconcile"].runs, jobs["reconcile"].failures) == (2, 1)
    assert jobs["reconcile"].last_error == "ThrottledError: slow"
    assert jobs["reconcile"].last_duration_s == 0.5
    assert jobs["decide"].last_error == ""


def test_policy_that_no_longer_fits_an_api_model_warns(svc: ControlPlaneService) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    svc.deploy_model("acme", api_model_spec(regions=["us-west-2"]))

    narrower = edited(example_policy(), "regions: [us-east-1, us-west-2]", "regions: [us-east-1]")
    svc.apply_policy(narrower, "a.yaml", "bob")

    [warning] = [e for e in svc.events(limit=1000) if e.kind == "model.unfit"]
    assert warning.model == "mistral-7b" and warning.severity == "warning"
    assert "spec.regions[0]" in warning.message
    # Its pools follow the policy: nothing in us-west-2 stays active.
    assert not [p for p in svc.list_pools() if p.row.region == "us-west-2"]


def test_write_retries_when_a_daemon_job_updated_the_row_meanwhile(store: Store) -> None:
    """The decide job writes desired_replicas on the same model rows the API writes spec and
    overrides on; the optimistic version check turns a lost update into a retry."""
    interfered: list[int] = []

    class InterferingClock(StepClock):
        def __call__(self) -> datetime:
            if armed and not interfered:  # between the service's read and its write
                with store.session() as other:
                    row = other.scalar(select(ModelRow).where(ModelRow.name == "llama-70b"))
                    assert row is not None
                    row.desired_replicas, row.desired_reason = 7, "scale_up"
                interfered.append(1)
            return super().__call__()

    armed = False
    svc = ControlPlaneService(store, clock=InterferingClock())
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    armed = True

    pinned = svc.pin_model("acme", "llama-70b", 5)

    assert interfered == [1]
    assert pinned.row.pinned_replicas == 5
    assert (pinned.row.desired_replicas, pinned.row.desired_reason) == (7, "scale_up")


def test_dropped_account_is_kept_for_draining_and_announced_once(
    svc: ControlPlaneService, store: Store
) -> None:
    text = example_policy()
    svc.apply_policy(text, "a.yaml", "alice")
    start = text.index("  # The customer's own GCP project")
    end = text.index("  # gpucap's shared Oracle capacity")
    no_gcp = edited(text[:start] + text[end:], "clouds: [aws, gcp, oci]", "clouds: [aws, oci]")

    svc.apply_policy(no_gcp, "a.yaml", "bob", allow_deletes=True)
    svc.apply_policy(edited(no_gcp, "max_replicas: 40", "max_replicas: 39"), "a.yaml", "bob")

    with store.session() as s:
        gcp = s.scalar(select(Account).where(Account.name == "acme-gcp"))
        # The reconciler still needs the credentials reference to terminate its nodes.
        assert gcp is not None and gcp.credentials_ref["project"] == "acme-inference"
    assert [e.message for e in svc.events(limit=1000) if e.kind == "account.removed"] == [
        "account acme-gcp (gcp) is no longer in the policy of acme: no new replicas there; "
        "its nodes drain"
    ]
    assert not [p for p in svc.list_pools() if p.row.cloud == "gcp"]
    assert {p.row.cloud for p in svc.list_pools(include_inactive=True)} >= {"gcp"}
