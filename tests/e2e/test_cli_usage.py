"""``gpucap usage`` against a running API server: table, JSON, YAML and CSV, ranges given as ISO
8601 times and as durations ago, groups, and bad input refused naming the field."""

from __future__ import annotations

import csv
import io
import json

import grpc
import pytest
import yaml

from controlplane.grpc.client import ControlPlaneClient
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.component.test_usage import EAST, OCI, SMALL, add_node, h
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import example_policy

RANGE = ("--since", "2026-01-01T00:00:00Z", "--until", "2026-01-01T10:00:00Z")


@pytest.fixture
def metered(api: Daemon) -> Daemon:
    api.service.apply_policy(example_policy(), "examples/policy.yaml", "alice")
    # 1..4 h committed (8 GPUs, $55.04/h); 6 h on, on demand (1 GPU, $6.88/h); 0..2 h and
    # 5 h on shared (8 GPUs, $80/h), stopped 2..5 h.
    add_node(api.store, "n-done", "llama-70b", EAST, state="terminated", pending_at=h(1),
             terminated_at=h(4))  # fmt: skip
    add_node(api.store, "n-running", "llama-8b", SMALL, pending_at=h(6))
    add_node(api.store, "n-resumed", "llama-70b", OCI, pending_at=h(0), stopped_at=h(2),
             resuming_at=h(5))  # fmt: skip
    return api


def test_usage_json_by_model(gpucap: Gpucap, metered: Daemon) -> None:
    out = gpucap("usage", "-c", "acme", *RANGE, "--by", "model", "-o", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    rows = {r["model"]: r for r in data["rows"]}
    assert sorted(rows) == ["llama-70b", "llama-8b"]
    big = rows["llama-70b"]
    assert big["nodes"] == 2 and isinstance(big["nodes"], int)
    assert big["gpu_hours"] == pytest.approx((3 + 7) * 8)
    assert big["cost_usd"] == pytest.approx(3 * 55.04 + 7 * 80)
    assert rows["llama-8b"]["node_hours"] == pytest.approx(4.0)
    assert data["since"] == "2026-01-01T00:00:00Z" and data["until"] == "2026-01-01T10:00:00Z"
    assert data["gpu_hours"] == pytest.approx(80 + 4)


def test_usage_csv_by_tier_and_cloud(gpucap: Gpucap, metered: Daemon) -> None:
    out = gpucap("usage", *RANGE, "--by", "tier", "--by", "cloud", "-o", "csv")
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert list(rows[0]) == [
        "customer", "tier", "cloud", "nodes", "gpu_hours", "node_hours", "cost_usd"
    ]  # fmt: skip
    by = {(r["tier"], r["cloud"]): float(r["gpu_hours"]) for r in rows}
    assert by == {("committed", "aws"): 24.0, ("on_demand", "aws"): 4.0, ("shared", "oci"): 56.0}


def test_usage_yaml(gpucap: Gpucap, metered: Daemon) -> None:
    out = gpucap("usage", "-c", "acme", *RANGE, "-o", "yaml")
    assert out.exit_code == 0, out.output
    data = yaml.safe_load(out.stdout)
    [row] = data["rows"]
    assert row["nodes"] == 3 and row["gpu_hours"] == pytest.approx(80 + 4)


def test_usage_table(gpucap: Gpucap, metered: Daemon) -> None:
    out = gpucap("usage", "-c", "acme", "--since", "2026-01-01T03:00:00Z", "--until",
                 "2026-01-01T06:00:00Z", "--by", "tier")  # fmt: skip
    assert out.exit_code == 0, out.output
    committed = next(line for line in out.stdout.splitlines() if "committed" in line)
    assert "acme" in committed and "8.00" in committed and "55.04" in committed  # 3..4 h
    shared = next(line for line in out.stdout.splitlines() if "shared" in line)
    assert "8.00" in shared and "80.00" in shared  # 5..6 h (stopped 3..5)
    assert "16.00 GPU-hours" in out.stdout and "$135.04" in out.stdout


def test_a_range_given_as_a_duration_ago(gpucap: Gpucap, metered: Daemon) -> None:
    """The nodes still held (n-running, 1 GPU; n-resumed, 8) bill the last 24 h whole;
    n-done, released in January, none of it."""
    data = json.loads(gpucap("usage", "--since", "24h", "-o", "json").stdout)
    [row] = data["rows"]
    assert row["nodes"] == 2 and row["gpu_hours"] == pytest.approx(24.0 * 9, rel=1e-3)


def test_bad_input_names_the_field(gpucap: Gpucap, metered: Daemon) -> None:
    bad = gpucap("usage", "--since", "yesterday")
    assert bad.exit_code == 2 and "--since" in bad.output
    bad = gpucap("usage", "--until", "soon")
    assert bad.exit_code == 2 and "--until" in bad.output
    backwards = gpucap("usage", "--since", "1h", "--until", "2h")
    assert backwards.exit_code == 1 and "until: must be after since" in backwards.stderr
    assert "Traceback" not in backwards.output
    bad = gpucap("usage", "--by", "region")
    assert bad.exit_code == 2 and "--by" in bad.output


def test_the_rpc_refuses_a_bad_group_naming_it(metered: Daemon) -> None:
    client = ControlPlaneClient(metered.addr)
    try:
        with pytest.raises(grpc.RpcError) as err:
            client.stub.GetUsage(pb.GetUsageRequest(group_by=["model", "zone"]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "group_by[1]" in (err.value.details() or "")
        with pytest.raises(grpc.RpcError) as err:
            client.stub.GetUsage(pb.GetUsageRequest(customer="nobody"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        client.close()
