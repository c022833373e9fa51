"""``gpucap get``, ``gpucap describe``, ``-o table|wide|json|yaml``, ``--watch`` and
``--version`` against a running API server."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from controlplane.grpc.client import ControlPlaneClient
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.component.oncall_kit import add_replica, record_demo_decisions
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import example_policy

EAST = "acme/acme-aws/us-east-1/p5.48xlarge"


def _applied(api: Daemon) -> str:
    """The example policy and one ready llama-70b replica in EAST; returns its node id."""
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    return add_replica(api.store, "llama-70b", EAST, "ready", ["ready"]) + "-n0"


def test_get_is_the_list_commands_and_the_old_names_stay(gpucap: Gpucap, api: Daemon) -> None:
    _applied(api)
    for what in ("models", "nodes", "pools"):
        new = gpucap("get", what, "-o", "json")
        old = gpucap(what, "-o", "json")
        assert new.exit_code == 0 and old.exit_code == 0, new.output + old.output
        assert json.loads(new.stdout) == json.loads(old.stdout)


def test_yaml_is_the_json_document_and_numbers_stay_numbers(gpucap: Gpucap, api: Daemon) -> None:
    _applied(api)
    as_json = json.loads(gpucap("get", "models", "-o", "json").stdout)
    as_yaml = yaml.safe_load(gpucap("get", "models", "-o", "yaml").stdout)
    assert as_yaml == as_json
    llama = next(m for m in as_json["models"] if m["name"] == "llama-70b")
    assert llama["ready_replicas"] == 1 and llama["spec"]["max_replicas"] == 40
    # uint64 ids: numbers, where protobuf's JSON mapping writes strings.
    events = json.loads(gpucap("events", "-o", "json").stdout)["events"]
    assert events and all(isinstance(e["id"], int) for e in events)


def test_wide_adds_columns_and_keeps_ids_whole(gpucap: Gpucap, api: Daemon) -> None:
    node = _applied(api)
    # (Piped, the console is 200 wide; narrower terminals: tests/unit/cli/test_tables.py.)
    table = gpucap("get", "nodes")
    wide = gpucap("get", "nodes", "-o", "wide")
    assert table.exit_code == 0 and wide.exit_code == 0, table.output + wide.output
    for out in (table.stdout, wide.stdout):
        assert node in out and f"i-{node.removesuffix('-n0')}0" in out and "…" not in out
    assert "PRIVATE IP" in wide.stdout and "PRIVATE IP" not in table.stdout
    pools = gpucap("get", "pools", "-o", "wide")
    assert EAST in pools.stdout and "RESERVATION" in pools.stdout
    models = gpucap("get", "models", "-o", "wide")
    llama = next(line for line in models.stdout.splitlines() if "llama-70b" in line)
    assert "SHAPES" in models.stdout and "8xH100 8xH200" in llama


def test_describe_model(gpucap: Gpucap, api: Daemon) -> None:
    _applied(api)
    out = gpucap("describe", "model", "llama-8b")
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert "acme/llama-8b" in text and "replicas 0..16" in text
    assert "desired 0 = ready 0 + starting 0 + provisioning 0" in text
    assert "no decision recorded yet" in text
    # llama-8b runs on 1xH100 in aws us-east-1 only: every other pool is ruled out, by name.
    assert "acme/acme-gcp/us-central1/" in text and "cloud_not_allowed" in text
    assert "shape_not_accepted" in text and EAST in text

    data = json.loads(gpucap("describe", "model", "acme/llama-70b", "-o", "json").stdout)
    assert data["model"]["ready_replicas"] == 1
    assert [n["pool_id"] for n in data["nodes"]] == [EAST]
    allowed = {p["pool_id"] for p in data["placement"]["pools"]}
    ruled_out = {x["pool_id"] for x in data["excluded_pools"]}
    assert EAST in allowed and not allowed & ruled_out


def test_describe_model_shows_decisions_in_plain_words(gpucap: Gpucap, api: Daemon) -> None:
    record_demo_decisions(api.store, api.service)
    out = gpucap("describe", "model", "demo/chat-8b")
    assert out.exit_code == 0, out.output
    assert "pinned to 2 by on-call" in out.stdout
    assert "on-call pin: the count is fixed (pinned)" in out.stdout
    model = json.loads(gpucap("describe", "model", "demo/chat-8b", "-o", "json").stdout)
    reasons = [d["reason"] for d in model["decisions"]]
    assert "pinned" in reasons and len(reasons) <= 5  # (the latest 5 by default)


def test_describe_node(gpucap: Gpucap, api: Daemon) -> None:
    node = _applied(api)
    api.service.drain_node(node, "ECC errors", True)
    out = gpucap("describe", "node", node)
    assert out.exit_code == 0, out.output
    for text in (node, EAST, "p5.48xlarge", "draining", "State history", "ECC errors"):
        assert text in out.stdout
    data = yaml.safe_load(gpucap("describe", "node", node, "-o", "yaml").stdout)
    assert data["node"]["id"] == node and data["node"]["state"] == "draining"
    assert any("ECC errors" in e["message"] for e in data["events"])

    missing = gpucap("describe", "node", "n-ghost")
    assert missing.exit_code == 1 and "node 'n-ghost' not found" in missing.stderr


def test_version(gpucap: Gpucap) -> None:
    out = gpucap("--version")
    assert out.exit_code == 0
    assert out.stdout.startswith("gpucap 0.") and "commit " in out.stdout


def test_bad_output_format_is_a_usage_error(gpucap: Gpucap) -> None:
    out = gpucap("get", "models", "-o", "xml")
    assert out.exit_code == 2 and "xml" in out.output


def test_get_watch_prints_a_document_per_change_until_ctrl_c(api: Daemon) -> None:
    _applied(api)
    exe = Path(sys.executable).with_name("gpucap")
    proc = subprocess.Popen(
        [str(exe), "get", "models", "-c", "acme", "--watch", "--interval", "0.2", "-o", "json"],
        env={**os.environ, "GPUCAP_ADDR": api.addr, "GPUCAP_TOKEN": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        first = json.loads(lines.get(timeout=30))
        assert not any("pinned_replicas" in m for m in first["models"])
        api.service.pin_model("acme", "llama-8b", 2)
        second = json.loads(lines.get(timeout=30))
        pinned = {m["name"]: m.get("pinned_replicas") for m in second["models"]}
        assert pinned["llama-8b"] == 2
        assert lines.empty()  # (nothing changed since: nothing printed)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


def test_list_nodes_by_id_with_the_other_filters(api: Daemon) -> None:
    node = _applied(api)
    other = add_replica(
        api.store, "llama-8b", "acme/acme-aws/us-east-1/p5.4xlarge", "ready", ["ready"]
    )
    client = ControlPlaneClient(api.addr)
    try:

        def ids(**kw: str) -> list[str]:
            resp = client.stub.ListNodes(pb.ListNodesRequest(**kw), timeout=10)
            return [n.id for n in resp.nodes]

        assert sorted(ids()) == sorted([node, f"{other}-n0"])
        assert ids(node_id=node) == [node]
        assert ids(node_id=node, customer="acme") == [node]
        assert ids(node_id=node, customer="beta") == []
        assert ids(node_id=node, model="llama-8b") == []
    finally:
        client.close()
