"""On-call operations of ControlPlaneService on both databases (``store`` fixture): bulk
cordon, drain a node, list decisions, replay a decision.

Decision records are produced by the real control loop (``oncall_kit``), so a replay is
checked against what the daemon actually records."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from controlplane.api import (
    ControlPlaneService,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    is_replayable,
)
from controlplane.decider_code import UNKNOWN, decider_code
from controlplane.store.db import Store
from controlplane.store.models import DecisionRecord, Replica
from tests.component.oncall_kit import T0, add_replica, record_demo_decisions
from tests.policy_texts import edited, example_policy

EAST = "acme/acme-aws/us-east-1/p5.48xlarge"


@pytest.fixture
def svc(store: Store) -> ControlPlaneService:
    return ControlPlaneService(store, clock=lambda: T0)


def _pools(svc: ControlPlaneService) -> dict[str, bool]:
    return {p.row.id: p.row.cordoned for p in svc.list_pools(include_inactive=True)}


# --------------------------------------------------------------------------- bulk cordon


def test_cordon_pools_by_cloud_region_and_customer(svc: ControlPlaneService) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    svc.apply_policy(edited(example_policy(), "customer: acme", "customer: beta"), "b", "bob")
    aws = {pid for pid in _pools(svc) if pid.split("/")[1] == "acme-aws"}
    assert {pid.split("/")[0] for pid in aws} == {"acme", "beta"}

    east = svc.cordon_pools(cloud="aws", region="us-east-1", cordoned=True, reason="ICE storm")
    east_ids = {v.row.id for v in east.changed}
    assert east_ids == {pid for pid in aws if pid.split("/")[2] == "us-east-1"}
    assert east.matched == len(east_ids) >= 2
    assert {pid for pid, c in _pools(svc).items() if c} == east_ids

    # The whole cloud for one customer: its us-east-1 pools were already cordoned.
    acme = svc.cordon_pools(customer="acme", cloud="aws", cordoned=True)
    acme_aws = {pid for pid in aws if pid.startswith("acme/")}
    assert acme.matched == len(acme_aws)
    assert {v.row.id for v in acme.changed} == acme_aws - east_ids
    assert {pid for pid, c in _pools(svc).items() if c} == east_ids | acme_aws

    # Again: nothing changes, and it says so.
    again = svc.cordon_pools(customer="acme", cloud="aws", cordoned=True)
    assert (again.changed, again.matched) == ([], len(acme_aws))

    # By account (gcp pools of acme only), then everything of beta's back.
    gcp = svc.cordon_pools(customer="acme", account="acme-gcp", cordoned=True)
    assert gcp.changed and {(v.row.customer, v.row.cloud) for v in gcp.changed} == {("acme", "gcp")}
    back = svc.cordon_pools(customer="beta", cordoned=False)
    assert {v.row.id for v in back.changed} == {pid for pid in east_ids if pid.startswith("beta/")}
    assert not any(c for pid, c in _pools(svc).items() if pid.startswith("beta/"))

    events = [e for e in svc.events(limit=1000) if e.kind.startswith("pool.")]
    cordons = [e for e in events if e.kind == "pool.cordoned"]
    assert len(cordons) == len(east_ids) + len(acme_aws - east_ids) + len(gcp.changed)
    first = next(e for e in cordons if "us-east-1" in e.message)
    assert "cloud=aws region=us-east-1" in first.message and "ICE storm" in first.message
    assert first.severity == "warning"
    assert sum(e.kind == "pool.uncordoned" for e in events) == len(back.changed)


def test_cordon_pools_refuses_empty_unknown_and_unmatched_selectors(
    svc: ControlPlaneService,
) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    with pytest.raises(InvalidArgumentError) as err:
        svc.cordon_pools(cordoned=True, reason="oops")
    assert err.value.field == "selector" and "every pool" in err.value.reason
    with pytest.raises(InvalidArgumentError) as err:
        svc.cordon_pools(cloud="azure", cordoned=True)
    assert err.value.field == "selector.cloud" and "aws, gcp, oci" in err.value.reason
    with pytest.raises(NotFoundError) as nf:
        svc.cordon_pools(cloud="aws", region="us-east-9", cordoned=True)
    assert "cloud=aws region=us-east-9" in str(nf.value)
    assert not any(_pools(svc).values())  # nothing changed by any of these


# --------------------------------------------------------------------------- drain


def _states(store: Store, rid: str) -> tuple[str, dict[str, str]]:
    with store.session() as s:
        replica = s.get(Replica, rid)
        assert replica is not None
        return replica.state, {n.id: n.state for n in replica.nodes}


def test_drain_node_drains_its_whole_gang_once(svc: ControlPlaneService, store: Store) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    gang = add_replica(store, "deepseek-r1", EAST, "ready", ["ready", "ready"])
    other = add_replica(store, "llama-70b", EAST, "ready", ["ready"])

    # By default a ready replica retires: it serves on (still ready, both nodes) and no
    # longer counts as the model's, so placement launches its replacement first.
    surge = svc.drain_node(f"{gang}-n1", reason="bad GPU (Xid 79)")
    assert (surge.changed, surge.drained) == (True, [])
    assert surge.message.startswith(f"node {gang}-n1 retiring (replica {gang} of deepseek-r1")
    assert _states(store, gang) == ("ready", {f"{gang}-n0": "ready", f"{gang}-n1": "ready"})
    assert svc.get_model("acme", "deepseek-r1").ready == 1  # it still serves
    assert not svc.drain_node(f"{gang}-n0").changed  # already retiring

    result = svc.drain_node(f"{gang}-n1", reason="bad GPU (Xid 79)", immediate=True)
    assert result.changed
    assert result.drained == [f"{gang}-n0", f"{gang}-n1"]
    assert (result.node.row.state, result.node.model) == ("draining", "deepseek-r1")
    assert result.node.row.draining_at == T0
    assert _states(store, gang) == (
        "draining",
        {f"{gang}-n0": "draining", f"{gang}-n1": "draining"},
    )
    assert _states(store, other) == ("ready", {f"{other}-n0": "ready"})  # untouched
    # A draining replica is not live: the model no longer counts it as ready.
    assert svc.get_model("acme", "deepseek-r1").ready == 0

    [event] = [e for e in svc.events(limit=1000) if e.kind == "node.draining"]
    assert (event.node, event.model, event.severity) == (f"{gang}-n1", "deepseek-r1", "warning")
    assert "bad GPU (Xid 79)" in event.message and "1 other node" in event.message

    again = svc.drain_node(f"{gang}-n0")
    assert (again.changed, again.drained) == (False, [])
    assert "already draining" in again.message
    assert [e.kind for e in svc.events(limit=1000)].count("node.draining") == 1


def test_drain_node_on_terminal_unknown_and_empty(svc: ControlPlaneService, store: Store) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    done = add_replica(store, "llama-70b", EAST, "terminated", ["terminated"])
    result = svc.drain_node(f"{done}-n0")
    assert not result.changed and "already terminated" in result.message
    assert _states(store, done) == ("terminated", {f"{done}-n0": "terminated"})
    with pytest.raises(NotFoundError):
        svc.drain_node("n-ghost")
    with pytest.raises(InvalidArgumentError) as err:
        svc.drain_node("")
    assert err.value.field == "node_id"


# --------------------------------------------------------------------------- decisions


@pytest.fixture
def decided(store: Store) -> ControlPlaneService:
    svc = ControlPlaneService(store)
    record_demo_decisions(store, svc)
    return svc


def _records(store: Store) -> list[DecisionRecord]:
    with store.session() as s:
        return list(s.scalars(select(DecisionRecord).order_by(DecisionRecord.id)))


def test_list_decisions_filters_and_pages(decided: ControlPlaneService, store: Store) -> None:
    every = _records(store)
    assert {d.kind for d in every} == {"autoscale", "placement"}

    assert [d.id for d in decided.list_decisions(limit=1000)] == [d.id for d in every]
    assert [d.id for d in decided.list_decisions(limit=2)] == [d.id for d in every[-2:]]
    placement = decided.list_decisions(kind="placement")
    assert placement and {d.kind for d in placement} == {"placement"}
    llama = decided.list_decisions(customer="demo", model="llama-70b", kind="autoscale")
    assert llama and {(d.model, d.kind) for d in llama} == {("llama-70b", "autoscale")}
    assert decided.list_decisions(customer="nobody") == []

    middle = every[len(every) // 2].id
    after = decided.list_decisions(since_id=middle, limit=2)
    assert [d.id for d in after] == [d.id for d in every if d.id > middle][:2]
    last_at = every[-1].at
    since = decided.list_decisions(since=last_at, limit=1000)
    assert since and all(d.at >= last_at for d in since)
    assert {d.id for d in since} == {d.id for d in every if d.at >= last_at}
    assert decided.list_decisions(since=last_at + timedelta(seconds=1)) == []

    with pytest.raises(InvalidArgumentError) as err:
        decided.list_decisions(kind="scaling")
    assert err.value.field == "kind"
    with pytest.raises(InvalidArgumentError) as err:
        decided.list_decisions(limit=-1)
    assert err.value.field == "limit"


def test_replay_reproduces_every_recorded_autoscaler_decision(
    decided: ControlPlaneService, store: Store
) -> None:
    autoscale = [d for d in _records(store) if d.kind == "autoscale" and is_replayable(d)]
    reasons = {d.reason for d in autoscale}
    assert reasons & {"scale_up_burst", "scale_up_forecast", "wake"}, reasons
    for record in autoscale:
        view = decided.replay_decision(record.id)
        assert view.autoscaler == "ours"
        assert view.result.matches
        assert (view.result.replayed.desired, view.result.replayed.reason) == (
            record.desired,
            record.reason,
        )
        assert view.result.replayed.detail == record.detail
        # Recorded with the decider and its code, which is the code replaying it.
        assert record.inputs["decider"] == {"name": "ours", "code": decider_code()}
        assert view.same_code is True and view.recorded_code == view.running_code


def test_replay_says_whether_the_decider_code_changed(
    decided: ControlPlaneService, store: Store
) -> None:
    source = next(d for d in _records(store) if d.reason == "wake")
    inputs = dict(source.inputs)
    variants = {
        "changed": {**inputs, "decider": {"name": "ours", "code": "0123456789ab"}},
        "other decider": {**inputs, "decider": {"name": "knative", "code": decider_code()}},
        "older record": {k: v for k, v in inputs.items() if k != "decider"},
        "unreadable": {**inputs, "decider": {"name": "ours", "code": UNKNOWN}},
    }
    ids = {}
    with store.session() as s:
        for label, variant in variants.items():
            row = DecisionRecord(
                at=source.at, kind="autoscale", customer=source.customer, model=source.model,
                desired=source.desired, reason=source.reason, detail=source.detail,
                inputs=variant,
            )  # fmt: skip
            s.add(row)
            s.flush()
            ids[label] = row.id
    same = {label: decided.replay_decision(i).same_code for label, i in ids.items()}
    assert same == {
        "changed": False,
        "other decider": False,
        "older record": None,
        "unreadable": None,
    }
    changed = decided.replay_decision(ids["changed"])
    assert (changed.recorded_decider, changed.recorded_code) == ("ours", "0123456789ab")
    assert changed.result.matches  # (the code changed, yet this decision did not)


def test_replay_reports_a_mismatch(decided: ControlPlaneService, store: Store) -> None:
    """A record the decider would not produce today (as after a decider change)."""
    source = next(d for d in _records(store) if d.model == "llama-70b" and d.kind == "autoscale")
    with store.session() as s:
        forged = DecisionRecord(
            at=source.at,
            kind="autoscale",
            customer=source.customer,
            model=source.model,
            desired=(source.desired or 0) + 7,
            reason="scale_up_forecast_v0",
            detail="an older decider's words",
            inputs=source.inputs,
        )
        s.add(forged)
        s.flush()
        forged_id = forged.id
    view = decided.replay_decision(forged_id)
    assert not view.result.matches
    assert view.result.recorded.desired == (source.desired or 0) + 7
    assert (view.result.replayed.desired, view.result.replayed.reason) == (
        source.desired,
        source.reason,
    )


def test_replay_refuses_what_is_not_an_autoscaler_output(
    decided: ControlPlaneService, store: Store
) -> None:
    records = _records(store)
    placement = next(d for d in records if d.kind == "placement")
    pinned = next(d for d in records if d.reason == "pinned")
    source_inputs = next(d for d in records if d.reason == "wake").inputs
    assert pinned.model == "chat-8b" and not is_replayable(pinned)
    with pytest.raises(FailedPreconditionError, match="placement decision, not an autoscaler"):
        decided.replay_decision(placement.id)
    with pytest.raises(FailedPreconditionError, match="on-call override .*pinned"):
        decided.replay_decision(pinned.id)

    with store.session() as s:
        old = DecisionRecord(
            at=T0, kind="autoscale", customer="demo", model="llama-70b", desired=3,
            reason="scale_up_burst", detail="", inputs={},
        )  # fmt: skip
        broken = DecisionRecord(
            at=T0, kind="autoscale", customer="demo", model="llama-70b", desired=3,
            reason="scale_up_burst", detail="", inputs={"now": 1.0, "spec": {}},
        )  # fmt: skip
        s.add_all([old, broken])
        s.flush()
        old_id, broken_id = old.id, broken.id
    with pytest.raises(FailedPreconditionError, match="no recorded inputs"):
        decided.replay_decision(old_id)
    with pytest.raises(
        FailedPreconditionError, match="cannot be replayed: its recorded inputs lack 'metrics'"
    ):
        decided.replay_decision(broken_id)
    with store.session() as s:
        bad_type = DecisionRecord(
            at=T0, kind="autoscale", customer="demo", model="llama-70b", desired=3,
            reason="scale_up_burst", detail="",
            inputs={**source_inputs, "now": "yesterday"},
        )  # fmt: skip
        s.add(bad_type)
        s.flush()
        bad_type_id = bad_type.id
    with pytest.raises(FailedPreconditionError, match="inputs are malformed .*yesterday"):
        decided.replay_decision(bad_type_id)
    with pytest.raises(NotFoundError):
        decided.replay_decision(10**9)
    with pytest.raises(InvalidArgumentError) as err:
        decided.replay_decision(0)
    assert err.value.field == "id"
