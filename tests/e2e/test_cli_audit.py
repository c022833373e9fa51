"""``gpucap audit`` (gRPC Audit) against a real gRPC server whose service lists the simulated
cloud through the resolver the control loop uses, on a fleet the loop made (ready nodes on
AWS, GCP and shared OCI, a stopped warm-pool node): clean exits 0; an instance with our tags
and no row is leaked, one terminated behind our back is lost, a second instance of one
intent is duplicated, each exiting 4 with the ids on-call needs; the JSON's shape; filters;
NOT_FOUND and FAILED_PRECONDITION."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from click.testing import Result
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.audit import DEFAULT_GRACE_S
from controlplane.cli.audit import EXIT_FINDINGS
from controlplane.grpc.server import serve
from controlplane.loop import ControlLoop, LoopContext
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.migrate import upgrade
from controlplane.store.models import Node
from controlplane.telemetry import Metrics
from providers.base import InstanceStatus, NodeRequest, ownership_tags
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimProvider, SimTimings
from schema.types import TERMINAL_NODE_STATES, Cloud
from tests.component.test_control_loop import TUNING, Clock, ScriptedLoad, run
from tests.e2e.conftest import Daemon, Gpucap
from tests.e2e.test_cli_warm import DEMO

AWS_KEY = "demo/demo-aws"  # the simulated resolver's key of demo's own AWS account


def sim_key(node: Node) -> str:
    """The simulated resolver's account key (a shared account's is its name)."""
    return node.account if node.account.startswith("shared-") else f"{node.customer}/{node.account}"


@dataclass
class Fleet:
    gpucap: Gpucap
    store: Store
    sim: SimCloud
    loop: ControlLoop
    clock: Clock

    def run(self, seconds: int) -> None:
        run(self.loop, self.clock, seconds)

    def audit(self, *args: str) -> tuple[Result, dict[str, Any]]:
        out = self.gpucap("audit", *args, "-o", "json")
        data: dict[str, Any] = json.loads(out.stdout) if out.stdout else {}
        return out, data

    def live(self) -> list[Node]:
        terminal = [s.value for s in TERMINAL_NODE_STATES]
        with self.store.session() as s:
            return list(s.scalars(select(Node).where(Node.state.not_in(terminal))))


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    url = f"sqlite:///{tmp_path / 'gpucap.db'}"
    upgrade(url)
    store = Store.from_url(url)
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
    providers = SimResolver(sim, retry=NO_RETRY)  # one resolver: the loop's and the API's
    service = ControlPlaneService(
        store, clock=lambda: datetime.fromtimestamp(clock.t, UTC), providers=providers
    )
    service.apply_policy(DEMO, "demo.yaml", "alice")
    ctx = LoopContext(
        store=store,
        providers=providers,
        metrics_source=ScriptedLoad(),
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=TUNING,
        clock=clock,
    )
    with structlog.testing.capture_logs():
        server = serve(service, "127.0.0.1:0")
        f = Fleet(Gpucap(f"127.0.0.1:{server.port}"), store, sim, ControlLoop(ctx), clock)
        f.run(20)  # each model's minimum ready, chat-8b's warm node stopped
        # Past the grace: whatever the cloud accepted has had time to show in its listing.
        clock.t += DEFAULT_GRACE_S + 1
        yield f
        server.stop(grace=0)
    store.close()


def _findings(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for s in data["sites"] for f in s["findings"]]


def test_a_clean_fleet_exits_0_with_every_node_tracked(fleet: Fleet) -> None:
    live = fleet.live()
    assert {n.state for n in live} == {"ready", "stopped"}, [(n.id, n.state) for n in live]
    out, data = fleet.audit()
    assert out.exit_code == 0, out.output
    assert data["clean"] is True and _findings(data) == []
    assert (data["tracked"], data["in_cloud"]) == (len(live), len(live))
    assert data["stopped"] == 1  # chat-8b's warm node: stopped in the store and the cloud
    assert (data["leaked"], data["lost"], data["duplicated"], data["unreachable"]) == (0,) * 4
    # One site per account and region; the shared account once, for every customer.
    sites = {(s["cloud"], s["account"], s["region"], s["customer"]) for s in data["sites"]}
    assert sites == {
        ("aws", "demo-aws", "us-east-1", "demo"),
        ("gcp", "demo-gcp", "us-central1", "demo"),
        ("oci", "shared-oci", "us-ashburn-1", ""),
    }
    per_site = {s["account"]: s["tracked"] for s in data["sites"]}
    assert per_site == {a: sum(1 for n in live if n.account == a) for a in per_site}
    assert data["grace_s"] == DEFAULT_GRACE_S

    table = fleet.gpucap("audit")
    assert table.exit_code == 0, table.output
    assert table.stdout.strip().splitlines()[-1].startswith(f"clean: tracked {len(live)}")


def test_an_instance_with_our_tags_and_no_row_is_leaked(fleet: Fleet) -> None:
    [aws_node, *_] = [n for n in fleet.live() if n.account == "demo-aws"]
    made = SimProvider(Cloud.AWS, AWS_KEY, fleet.sim).create_node(
        NodeRequest(
            intent_id="ghost-1",
            instance_type=aws_node.instance_type,
            region="us-east-1",
            tags=ownership_tags("ghost-1", "demo", aws_node.pool_id, "chat-8b"),
        )
    )
    out, data = fleet.audit()
    assert out.exit_code == EXIT_FINDINGS, out.output
    assert (data["clean"], data["leaked"], data["lost"], data["duplicated"]) == (False, 1, 0, 0)
    [f] = _findings(data)
    assert {k: f[k] for k in ("category", "reason", "customer", "account", "region")} == {
        "category": "leaked",
        "reason": "untracked",
        "customer": "demo",
        "account": "demo-aws",
        "region": "us-east-1",
    }
    assert (f["intent_id"], f["node_state"], f["kind"]) == ("ghost-1", "", "")
    [i] = f["instances"]
    assert (i["instance_id"], i["instance_type"]) == (made.node.instance_id, aws_node.instance_type)
    assert i["state"] in ("pending", "running") and "age_s" not in f  # no row: no age

    # JSON: integer counts are numbers; every site and finding spells out its fields.
    for key in ("tracked", "in_cloud", "stopped", "settling", "leaked", "lost", "duplicated"):
        assert type(data[key]) is int, key
        assert all(type(s[key]) is int for s in data["sites"]), key
    assert set(data) == {
        "sites",
        "tracked",
        "in_cloud",
        "stopped",
        "settling",
        "leaked",
        "lost",
        "duplicated",
        "unreachable",
        "clean",
        "grace_s",
        "at",
    }
    assert data["at"] == datetime.fromtimestamp(fleet.clock.t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    table = fleet.gpucap("audit")
    assert table.exit_code == EXIT_FINDINGS
    assert made.node.instance_id in table.stdout and "untracked" in table.stdout
    assert "NOT CLEAN" in table.stdout

    # Filters: another account, or another customer, sees none of it.
    out, data = fleet.audit("--account", "demo-gcp")
    assert out.exit_code == 0, out.output
    assert [s["account"] for s in data["sites"]] == ["demo-gcp"]
    out, data = fleet.audit("--account", "demo-aws", "--customer", "demo")
    assert out.exit_code == EXIT_FINDINGS and data["leaked"] == 1

    # The gc job agrees it is an orphan; once it is gone the audit is clean again.
    assert fleet.loop.collect_garbage() == 1
    fleet.clock.t += 2
    out, data = fleet.audit()
    assert out.exit_code == 0, out.output


def test_a_node_terminated_behind_our_back_is_lost_until_the_loop_replaces_it(
    fleet: Fleet,
) -> None:
    [victim, *_] = [n for n in fleet.live() if n.state == "ready"]
    assert victim.instance_id is not None
    fleet.sim.terminate(sim_key(victim), victim.instance_id)
    fleet.clock.t += 2  # terminate_s: gone from the cloud's listing
    out, data = fleet.audit()
    assert out.exit_code == EXIT_FINDINGS, out.output
    assert (data["lost"], data["leaked"], data["duplicated"]) == (1, 0, 0)
    [f] = _findings(data)
    assert (f["category"], f["reason"], f["intent_id"], f["kind"]) == (
        "lost",
        "gone",
        victim.id,
        "node",
    )
    assert (f["tracked_instance_id"], f["instances"], f["node_state"]) == (
        victim.instance_id,
        [],
        victim.state,
    )
    assert (f["account"], f["region"], f["customer"]) == (victim.account, victim.region, "demo")
    assert f["age_s"] > DEFAULT_GRACE_S and f["state_age_s"] > DEFAULT_GRACE_S

    table = fleet.gpucap("audit", "--account", victim.account)
    assert table.exit_code == EXIT_FINDINGS
    assert victim.id in table.stdout and f"{victim.instance_id} (gone)" in table.stdout

    # The loop notices and replaces it; the replacement is settling or tracked, never lost.
    fleet.run(3)
    out, data = fleet.audit()
    assert out.exit_code == 0, out.output
    assert data["settling"] + data["tracked"] == len(fleet.live())


def test_two_instances_for_one_intent_are_duplicated(fleet: Fleet) -> None:
    [node, *_] = [n for n in fleet.live() if n.account == "demo-aws" and n.state == "ready"]
    # What an expired idempotency token makes: a second instance carrying the same intent.
    with fleet.sim.lock:
        first = fleet.sim.instances[node.instance_id or ""]
        dup = first.instance_id[:-6] + "999999"  # (the simulator's ids end in 6 digits)
        fleet.sim.instances[dup] = replace(first, instance_id=dup)
    out, data = fleet.audit()
    assert out.exit_code == EXIT_FINDINGS, out.output
    assert (data["duplicated"], data["leaked"], data["lost"]) == (1, 0, 0)
    [f] = _findings(data)
    assert (f["category"], f["intent_id"], f["node_state"], f["tracked_instance_id"]) == (
        "duplicated",
        node.id,
        "ready",
        node.instance_id,
    )
    assert sorted(i["instance_id"] for i in f["instances"]) == sorted([node.instance_id or "", dup])
    assert {i["state"] for i in f["instances"]} == {InstanceStatus.RUNNING.value}


def test_unknown_filters_are_not_found(fleet: Fleet) -> None:
    for args in (("--account", "nope"), ("--customer", "nope"), ("-c", "demo", "--account", "x")):
        out = fleet.gpucap("audit", *args)
        assert out.exit_code == 1, out.output
        assert "not found" in out.stderr


def test_a_server_without_provider_access_refuses(gpucap: Gpucap, api: Daemon) -> None:
    out = gpucap("audit")
    assert out.exit_code == 1, out.output
    assert "failed precondition" in out.stderr and "provider access" in out.stderr
