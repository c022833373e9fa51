"""Policy changes lose nothing by accident (issue 26 item 7), against a real store on SQLite
and PostgreSQL: a reload (the daemon's ``apply_policies``, what start and SIGHUP run) or an
apply that would delete models or drain replicas is refused without ``allow_deletes``,
keeping the last good policy and saying why (log line and event); a model the API owns is
not taken over silently; a file unchanged since the daemon applied it does not undo a
version applied since through the API."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from sqlalchemy import select

from controlplane.api import ControlPlaneService
from controlplane.daemon import Daemon, Wiring
from controlplane.loop import Tuning
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import PolicyVersion
from providers.sim import SimCloud
from schema.daemon_config import DaemonConfig
from schema.policy_file import PolicyRefused
from tests.component.oncall_kit import add_replica
from tests.policy_texts import api_model_spec, edited, example_policy, without_llama_8b

LLAMA_8B_POOL = "acme/acme-aws/us-east-1/p5.4xlarge"


@pytest.fixture
def svc(store: Store) -> ControlPlaneService:
    return ControlPlaneService(store)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "acme.yaml"
    path.write_text(example_policy())
    return path


@pytest.fixture
def reload(store: Store, svc: ControlPlaneService, policy_file: Path) -> Iterator[Any]:
    """The daemon's policy reload over ``policy_file`` (its service on the test's store);
    each call returns the log lines it wrote."""
    sim = SimCloud()
    wiring = Wiring(
        database_url="sqlite://",  # (unused: the daemon is not started)
        providers=SimResolver(sim),
        health=SimHealth(sim),
        metrics_source=SyntheticTraffic({}),
        tuning=Tuning(),
        policy_files=[policy_file],
    )
    daemon = Daemon(DaemonConfig(), wiring)
    daemon.service = svc

    def run() -> list[MutableMapping[str, Any]]:
        with structlog.testing.capture_logs() as logs:
            daemon.apply_policies()
        return logs

    yield run


def _active(store: Store) -> PolicyVersion:
    with store.session() as s:
        rows = s.scalars(select(PolicyVersion).order_by(PolicyVersion.version)).all()
        (active,) = [r for r in rows if r.customer == "acme"][-1:]
        return active


def _models(store: Store) -> dict[str, tuple[str, bool]]:
    """Live and deleted models: name -> (owner, deleted)."""
    with store.session() as s:
        return {m.name: (m.source, m.deleted_at is not None) for m in s.scalars(select(ModelRow))}


def _events(svc: ControlPlaneService, kind: str) -> list[str]:
    return [e.message for e in svc.events(limit=1000) if e.kind == kind]


def test_a_reload_that_loses_a_model_is_refused_and_the_last_good_policy_stays(
    reload: Any, svc: ControlPlaneService, store: Store, policy_file: Path
) -> None:
    logs = reload()
    assert [x["event"] for x in logs if "file" in x] == ["policy.applied"]
    add_replica(store, "llama-8b", LLAMA_8B_POOL, "ready", ["n-a"])
    good = _active(store)

    policy_file.write_text(without_llama_8b(example_policy()))  # a half-written file
    logs = reload()

    (refused,) = [x for x in logs if x["event"] == "policy.refused" and "file" in x]
    assert refused["file"] == str(policy_file)
    model, pool = refused["problems"]  # (its pool holds the replica's node)
    lines = policy_file.read_text().splitlines()
    models_line, accounts_line = lines.index("models:") + 1, lines.index("accounts:") + 1
    assert model.startswith(f"{policy_file}:{models_line}:1: models: would delete model ")
    assert "llama-8b (1 live replica drains)" in model and "allow_deletes: true" in model
    assert pool.startswith(f"{policy_file}:{accounts_line}:1: accounts: would delete pool ")
    assert f"{LLAMA_8B_POOL} (1 live node drains)" in pool
    assert _active(store).id == good.id
    assert _models(store)["llama-8b"] == ("policy", False)
    (event,) = _events(svc, "policy.refused")
    assert "the active one stays" in event and "llama-8b" in event

    # The file says it means it: the model goes, its replica drains.
    policy_file.write_text(without_llama_8b(example_policy()) + "allow_deletes: true\n")
    logs = reload()
    assert [x["event"] for x in logs if "file" in x] == ["policy.applied"]
    assert _active(store).version == good.version + 1
    assert _models(store)["llama-8b"] == ("policy", True)


def test_a_reload_does_not_undo_a_policy_applied_through_the_api(
    reload: Any, svc: ControlPlaneService, store: Store, policy_file: Path
) -> None:
    reload()
    assert _active(store).applied_via == "file"
    through_api = edited(example_policy(), "max_replicas: 40", "max_replicas: 44")
    v2 = svc.apply_policy(through_api, "laptop/acme.yaml", "alice@ops")

    logs = reload()  # SIGHUP or a restart, the file as it was

    (kept,) = [x for x in logs if x["event"] == "policy.kept" and "file" in x]
    assert (
        "policy v2 of acme, applied through the API by alice@ops, stays active" in (kept["detail"])
    )
    assert _active(store).id == v2.id

    # A change to the file is the file owner's newer word: it is applied.
    policy_file.write_text(edited(example_policy(), "max_replicas: 40", "max_replicas: 38"))
    logs = reload()
    assert [x["event"] for x in logs if "file" in x] == ["policy.applied"]
    active = _active(store)
    assert (active.version, active.applied_via) == (3, "file")
    # ... and the same file again is no new version.
    reload()
    assert _active(store).id == active.id


def test_an_api_owned_model_named_in_the_file_is_a_conflict_until_adopted(
    svc: ControlPlaneService, store: Store
) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    svc.deploy_model("acme", api_model_spec(max_replicas=4))
    entry = (
        "  - name: mistral-7b\n"
        "    shapes: [{shape: 1xH100, max_concurrency: 16}]\n"
        "    clouds: [aws]\n"
        "    max_replicas: 6\n"
    )
    naming = edited(example_policy(), "\noverflow:", f"{entry}\noverflow:")

    with pytest.raises(PolicyRefused) as err:
        svc.apply_policy(naming, "a.yaml", "bob", allow_deletes=True)

    (problem,) = err.value.problems
    assert problem.field == "models[3].name"
    assert problem.line == naming.splitlines().index("  - name: mistral-7b") + 1
    assert "owned by the API" in problem.reason and "adopt_models" in problem.reason
    assert svc.get_policy("acme").version.version == 1
    assert svc.get_model("acme", "mistral-7b").row.spec["max_replicas"] == 4
    assert _models(store)["mistral-7b"] == ("api", False)

    svc.apply_policy(naming + "adopt_models: [mistral-7b]\n", "a.yaml", "bob")

    row = svc.get_model("acme", "mistral-7b").row
    assert (row.source, row.spec["max_replicas"]) == ("policy", 6)
    assert any(
        "mistral-7b updated by the policy (was owned by api)" in m
        for m in _events(svc, "model.updated")
    )


def test_allow_deletes_from_the_caller_lets_the_apply_delete(
    svc: ControlPlaneService, store: Store
) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    with pytest.raises(PolicyRefused):
        svc.apply_policy(without_llama_8b(example_policy()), "a.yaml", "bob")
    svc.apply_policy(without_llama_8b(example_policy()), "a.yaml", "bob", allow_deletes=True)
    assert _models(store)["llama-8b"] == ("policy", True)


def test_a_diff_shows_what_an_apply_would_do_and_writes_nothing(
    svc: ControlPlaneService, store: Store
) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    events_before = len(svc.events(limit=1000))
    text = edited(without_llama_8b(example_policy()), "max_replicas: 40", "max_replicas: 44")

    diff, refusals = svc.diff_policy(text, "a.yaml")

    models = {(c.name, c.action.value): c for c in diff.changes if c.kind == "model"}
    assert set(models) == {("llama-70b", "change"), ("llama-8b", "delete")}
    assert [(f.path, f.before, f.after) for f in models["llama-70b", "change"].fields] == [
        ("max_replicas", "40", "44")
    ]
    assert [p.field for p in refusals] == ["models"]
    assert not svc.diff_policy(text, "a.yaml", allow_deletes=True)[1]
    assert svc.diff_policy(example_policy(), "a.yaml")[0].empty
    assert svc.get_policy("acme").version.version == 1
    assert len(svc.events(limit=1000)) == events_before
