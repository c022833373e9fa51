"""``gpucap status|models|nodes|pools|events`` against a running API server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.availability import Unavailable
from controlplane.grpc.server import serve
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, Pool, Replica
from controlplane.store.transitions import record_unavailable
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import example_policy
from tests.tls_certs import self_signed_localhost

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EAST = "acme/acme-aws/us-east-1/p5.48xlarge"


@pytest.fixture
def applied(api: Daemon) -> Daemon:
    api.service.apply_policy(example_policy(), "examples/policy.yaml", "alice")
    with api.store.session() as s:  # one ready node, as the reconciler would record it
        model = s.query(ModelRow).filter_by(name="llama-70b").one()
        s.add(
            Replica(
                id="r1",
                model_id=model.id,
                pool_id=EAST,
                gpu_shape="8xH100",
                state="ready",
                created_at=T0,
            )
        )
        s.flush()
        s.add(
            Node(
                id="node-1",
                replica_id="r1",
                pool_id=EAST,
                customer="acme",
                account="acme-aws",
                cloud="aws",
                region="us-east-1",
                zone="us-east-1b",
                instance_type="p5.48xlarge",
                idempotency_token="tok-1",
                instance_id="i-0123abcd",
                state="ready",
                pending_at=T0,
                ready_at=T0,
            )
        )
    api.job_ticks.record("reconcile", T0, 0.042)
    return api


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_status(gpucap: Gpucap, applied: Daemon) -> None:
    table = gpucap("status")
    assert table.exit_code == 0, table.output
    assert "1 customers, 3 models" in table.stdout
    assert "reconcile" in table.stdout and "42 ms" in table.stdout

    data = json.loads(gpucap("status", "--output", "json").stdout)
    assert (data["customers"], data["models"], data["nodes_by_state"]) == (1, 3, {"ready": 1})
    assert data["jobs"][0]["job"] == "reconcile"


def test_models(gpucap: Gpucap, applied: Daemon) -> None:
    data = json.loads(gpucap("models", "-o", "json").stdout)
    by_name = {m["name"]: m for m in data["models"]}
    assert sorted(by_name) == ["deepseek-r1", "llama-70b", "llama-8b"]
    assert by_name["llama-70b"]["ready_replicas"] == 1
    assert by_name["llama-70b"]["spec"]["max_replicas"] == 40

    applied.service.pin_model("acme", "llama-8b", 2)
    table = gpucap("models", "--customer", "acme")
    assert table.exit_code == 0, table.output
    row = next(line for line in table.stdout.splitlines() if "llama-8b" in line)
    assert "pinned=2" in row and "0..16" in row
    assert json.loads(gpucap("models", "-c", "nobody", "-o", "json").stdout) == {"models": []}


def test_nodes(gpucap: Gpucap, applied: Daemon) -> None:
    table = gpucap("nodes")
    assert table.exit_code == 0, table.output
    row = next(line for line in table.stdout.splitlines() if "node-1" in line)
    for cell in ("llama-70b", "aws", "us-east-1b", "p5.48xlarge", "i-0123abcd", "ready"):
        assert cell in row

    [node] = json.loads(gpucap("nodes", "-o", "json", "--model", "llama-70b").stdout)["nodes"]
    assert (node["id"], node["state"], node["ready_at"]) == (
        "node-1",
        "ready",
        "2026-01-01T00:00:00Z",
    )
    assert json.loads(gpucap("nodes", "-o", "json", "-s", "pending").stdout) == {"nodes": []}

    bad = gpucap("nodes", "--state", "asleep")
    assert bad.exit_code == 1
    assert "states[0]: unknown node state 'asleep'" in bad.stderr
    assert "Traceback" not in bad.output


def test_pools(gpucap: Gpucap, applied: Daemon) -> None:
    applied.service.cordon_pool(EAST, True, "maintenance")
    table = gpucap("pools", "--cloud", "aws")
    assert table.exit_code == 0, table.output
    east = next(line for line in table.stdout.splitlines() if EAST in line)
    assert "committed" in east and "cordoned" in east and "ready=1" in east
    assert "gcp" not in table.stdout

    pools = json.loads(gpucap("pools", "-o", "json").stdout)["pools"]
    with applied.store.session() as s:
        assert {p["id"] for p in pools} == {p.id for p in s.query(Pool).filter_by(active=True)}


def test_pools_show_a_zone_block_until_it_expires(gpucap: Gpucap, applied: Daemon) -> None:
    now = datetime.now(UTC).timestamp()
    with applied.store.session() as s:
        for zone, until in (("us-east-1a", now + 600), ("us-east-1c", now - 60)):
            block = Unavailable("acme-aws", until, "stockout", region="us-east-1", zone=zone)
            record_unavailable(s, "acme", block)
    table = gpucap("pools", "--cloud", "aws")
    assert table.exit_code == 0, table.output
    east = next(line for line in table.stdout.splitlines() if EAST in line)
    assert "us-east-1a unavailable until" in east and "us-east-1c" not in east

    pools = json.loads(gpucap("pools", "-o", "json").stdout)["pools"]
    blocks = {p["id"]: [b["zone"] for b in p.get("zone_blocks", [])] for p in pools}
    # Both rows reach the reader (expired ones stay until gc); only the table hides the old.
    assert blocks[EAST] == ["us-east-1a", "us-east-1c"]
    assert not any(z for pool, z in blocks.items() if not pool.startswith("acme/acme-aws/"))


def test_events(gpucap: Gpucap, applied: Daemon) -> None:
    data = json.loads(gpucap("events", "-o", "json", "--limit", "1000").stdout)
    kinds = [e["kind"] for e in data["events"]]
    assert "policy.applied" in kinds
    first = int(data["events"][0]["id"])
    later = json.loads(gpucap("events", "-o", "json", "--since", str(first)).stdout)["events"]
    assert [e["id"] for e in later] == [e["id"] for e in data["events"][1:]]
    table = gpucap("events", "--model", "llama-70b")
    assert table.exit_code == 0 and "model.deployed" in table.stdout


def test_events_follow_streams_until_the_daemon_stops(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")

    def operator() -> None:
        threading.Event().wait(0.5)
        api.service.pause_model("acme", "llama-8b", True)
        threading.Event().wait(1.0)
        api.server.stop(grace=1)

    threading.Thread(target=operator).start()
    result = gpucap("events", "--follow", "-n", "1", "-o", "json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["kind"] == "policy.applied"  # the tail of one
    assert [e["kind"] for e in lines[1:]] == ["model.paused"]


@pytest.mark.parametrize("command", ["status", "models", "nodes", "pools", "events"])
def test_unreachable_daemon_is_a_clean_error(command: str) -> None:
    gpucap = Gpucap(f"127.0.0.1:{_free_port()}")
    result = gpucap(command, "--timeout", "1")
    assert result.exit_code == 3
    assert "cannot reach the gpucap daemon" in result.stderr
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not an escaped error


def test_follow_with_unreachable_daemon_fails_fast() -> None:
    result = Gpucap(f"127.0.0.1:{_free_port()}")("events", "-f", "--timeout", "1")
    assert result.exit_code == 3 and "cannot reach" in result.stderr


def test_token_and_tls_options(api: Daemon, tmp_path: Path) -> None:
    certs = self_signed_localhost(tmp_path)
    srv = serve(api.service, "127.0.0.1:0", tls_cert=certs.cert, tls_key=certs.key, token="tk")
    try:
        gpucap = Gpucap(f"localhost:{srv.port}")
        ok = gpucap("status", "--token", "tk", "--ca", str(certs.cert), "-o", "json")
        assert ok.exit_code == 0, ok.output
        gpucap.env.update({"GPUCAP_TOKEN": "tk", "GPUCAP_CA": str(certs.cert)})
        assert gpucap("models").exit_code == 0
        gpucap.env["GPUCAP_TOKEN"] = "wrong"
        denied = gpucap("models")
        assert denied.exit_code == 1 and "refused the token" in denied.stderr
    finally:
        srv.stop(grace=0)


def test_console_script_uses_gpucap_addr(applied: Daemon) -> None:
    """The installed ``gpucap`` entry point, as on-call runs it."""
    exe = Path(sys.executable).with_name("gpucap")
    env = {**os.environ, "GPUCAP_ADDR": applied.addr}
    out = subprocess.run(
        [str(exe), "models", "-o", "json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["models"]) == 3
    env["GPUCAP_ADDR"] = f"127.0.0.1:{_free_port()}"
    down = subprocess.run(
        [str(exe), "status", "--timeout", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 3
    assert "cannot reach the gpucap daemon" in down.stderr and "Traceback" not in down.stderr
