"""``gpucap drain NODE`` and bulk ``gpucap cordon|uncordon --cloud/--region/--customer/
--account`` against a running API server."""

from __future__ import annotations

import json

from tests.component.oncall_kit import add_replica
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import edited, example_policy

EAST = "acme/acme-aws/us-east-1/p5.48xlarge"


def _cordoned(api: Daemon) -> set[str]:
    return {p.row.id for p in api.service.list_pools(include_inactive=True) if p.row.cordoned}


def test_drain_marks_the_node_and_its_replica(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    rid = add_replica(api.store, "llama-70b", EAST, "ready", ["ready"])
    node = f"{rid}-n0"

    surge = gpucap("drain", node, "--reason", "ECC errors")
    assert surge.exit_code == 0, surge.output
    assert surge.stdout.startswith(f"node {node} retiring (replica {rid} of llama-70b")
    assert "serves until its replacement is ready" in surge.stdout
    nodes = json.loads(gpucap("nodes", "-o", "json").stdout)["nodes"]
    assert [(n["id"], n["state"]) for n in nodes] == [(node, "ready")]

    drained = gpucap("drain", node, "--reason", "ECC errors", "--now")
    assert drained.exit_code == 0, drained.output
    assert drained.stdout.startswith(f"node {node} draining (replica {rid} of llama-70b")
    assert "placement replaces the replica" in drained.stdout
    nodes = json.loads(gpucap("nodes", "-o", "json").stdout)["nodes"]
    assert [(n["id"], n["state"]) for n in nodes] == [(node, "draining")]
    model = api.service.get_model("acme", "llama-70b")
    assert (model.ready, model.draining) == (0, 1)
    [event] = [e for e in api.service.events(limit=1000) if e.kind == "node.draining"]
    assert "ECC errors" in event.message

    again = gpucap("drain", node, "-o", "json")
    assert again.exit_code == 0
    data = json.loads(again.stdout)
    assert data["changed"] is False and data["drained"] == []
    assert data["message"] == f"node {node} is already draining; nothing to do"

    missing = gpucap("drain", "n-ghost")
    assert missing.exit_code == 1 and "node 'n-ghost' not found" in missing.stderr
    assert "Traceback" not in missing.output


def test_bulk_cordon_and_uncordon(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    api.service.apply_policy(edited(example_policy(), "customer: acme", "customer: beta"), "b", "x")
    add_replica(api.store, "llama-70b", EAST, "ready", ["ready"])

    out = gpucap("cordon", "--cloud", "aws", "--region", "us-east-1", "--customer", "acme")
    assert out.exit_code == 0, out.output
    acme_east = {
        p.row.id
        for p in api.service.list_pools("acme", "aws", include_inactive=True)
        if p.row.region == "us-east-1"
    }
    assert _cordoned(api) == acme_east and EAST in acme_east
    lines = out.stdout.splitlines()
    assert lines[0] == (
        f"cordoned {len(acme_east)} of {len(acme_east)} pools matching "
        "customer=acme cloud=aws region=us-east-1"
    )
    assert {ln.split(":")[0] for ln in lines[1:-1]} == acme_east
    assert "keep running" in lines[-1]
    # Cordoning leaves the replica already there alone.
    assert [n.row.state for n in api.service.list_nodes(pool_id=EAST)] == ["ready"]

    whole_cloud = json.loads(gpucap("cordon", "--cloud", "aws", "-o", "json").stdout)
    aws = {p.row.id for p in api.service.list_pools(cloud="aws", include_inactive=True)}
    assert {p["id"] for p in whole_cloud["changed"]} == aws - acme_east
    assert whole_cloud["matched"] == len(aws)
    assert _cordoned(api) == aws

    back = gpucap("uncordon", "--customer", "beta")
    assert back.exit_code == 0, back.output
    assert back.stdout.splitlines()[0].startswith("uncordoned ")
    assert _cordoned(api) == {pid for pid in aws if pid.startswith("acme/")}

    # The single-pool form still works.
    assert gpucap("uncordon", EAST).stdout.strip() == f"{EAST}: schedulable"


def test_cordon_refuses_no_selector_both_forms_and_bad_values(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    nothing = gpucap("cordon", "--reason", "oops")
    assert nothing.exit_code == 2 and "refusing to touch every pool" in nothing.stderr
    both = gpucap("cordon", EAST, "--cloud", "aws")
    assert both.exit_code == 2 and "not both" in both.stderr
    azure = gpucap("cordon", "--cloud", "azure")
    assert azure.exit_code == 1
    assert "selector.cloud: unknown cloud 'azure'" in azure.stderr
    typo = gpucap("uncordon", "--region", "us-easst-1")
    assert typo.exit_code == 1 and "region=us-easst-1" in typo.stderr
    assert _cordoned(api) == set()
    for result in (nothing, both, azure, typo):
        assert "Traceback" not in result.output
