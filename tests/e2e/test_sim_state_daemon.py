"""The demo daemon on a persistent simulated cloud (``--sim-state``) and PostgreSQL, as a user
runs it: SIGKILLed while its nodes serve, restarted on the same state file and database, it
adopts the running nodes (the same instances become ready again, none is replaced),
``gpucap audit`` is clean, after a clean stop no process of any node is left, and an
instance another process puts in the file without a store row is leaked."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import make_url, text

from controlplane.api.audit import Audit
from controlplane.resolvers import SimResolver
from controlplane.store.db import Store, make_engine
from providers.base import NodeRequest, ownership_tags
from providers.retry import NO_RETRY
from providers.sim import SimProvider
from providers.sim.cloud import open_shared
from providers.sim.local import group_alive
from schema.types import Cloud
from tests.conftest import PG_URL
from tests.e2e.test_daemon import GPUCAP, Running, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]

DEADLINE_S = 180  # bounds a wait on a loaded 2-core machine; it measures nothing


@pytest.fixture
def pg_url(pg_available: bool) -> Iterator[str]:
    """A database of this test's own (dropped after, whatever its daemons left connected)."""
    name = f"gpucap_e2e_{uuid.uuid4().hex[:12]}"
    admin = make_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _cli(d: Running, *args: str) -> dict[str, Any] | None:
    """None: no answer in time (a loaded machine: the next poll asks again)."""
    try:
        out = subprocess.run(
            [*GPUCAP, *args, "--addr", d.addr, "--output", "json"],
            capture_output=True,
            text=True,
            timeout=90,
            check=True,
        )
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
        return None
    return dict(json.loads(out.stdout))


def start_demo(tmp_path: Path, *args: str, env: dict[str, str]) -> Running:
    """``test_daemon.start`` with room for a loaded machine: it waits up to DEADLINE_S."""
    grpc_port, metrics_port = free_port(), free_port()
    addr, log = f"127.0.0.1:{grpc_port}", tmp_path / "daemon.log"
    proc = subprocess.Popen(
        [
            *GPUCAP,
            "daemon",
            *args,
            "--grpc-addr",
            addr,
            "--metrics-addr",
            f"127.0.0.1:{metrics_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("a"),
        text=True,
        env={**os.environ, "GPUCAP_STATE_DIR": str(tmp_path / "state"), **env},
    )
    d = Running(proc, addr, metrics_port, log)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited early:\n{log.read_text()[-3000:]}")
        if _cli(d, "status") is not None:
            return d
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"daemon did not answer within {DEADLINE_S} s")


def ready(d: Running) -> dict[str, str]:
    """Ready nodes: instance id -> model."""
    nodes = (_cli(d, "nodes") or {}).get("nodes", [])
    return {n["instance_id"]: n["model"] for n in nodes if n["state"] == "ready"}


def audit(d: Running) -> tuple[int, dict[str, Any]]:
    try:
        out = subprocess.run(
            [*GPUCAP, "audit", "--addr", d.addr, "--output", "json"],
            capture_output=True,
            text=True,
            timeout=90,
        )
    except subprocess.TimeoutExpired:
        return -1, {}
    return out.returncode, json.loads(out.stdout or "{}")


def end_leftovers(root: Path) -> None:
    """After a failure: a SIGKILLed daemon's nodes outlive it, as hosts do; end them."""
    for pid in leftovers(root):
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def leftovers(root: Path) -> list[int]:
    """Processes of any local node under ``root`` (their environment names their folder)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(f"GPUCAP_ROOT={root}/".encode()) for e in env):
            found.append(int(pid))
    return found


def staying(nodes: dict[str, str], state: Path) -> dict[str, str]:
    """``nodes`` (instance -> model) less those the cloud was asked to stop or end."""
    seen = open_shared(state).instances
    return {
        iid: model
        for iid, model in nodes.items()
        if seen[iid].stop_requested_at is None and seen[iid].terminate_requested_at is None
    }


def test_a_killed_demo_daemon_restarts_on_its_cloud_and_audits_clean(
    tmp_path: Path, pg_url: str
) -> None:
    state = tmp_path / "sim-state.db"
    nodes_root = Path(f"{state}.nodes")
    network = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.0/24"
    env = {"GPUCAP_DEMO_PROMETHEUS": "", "GPUCAP_DEMO_NETWORK": network}
    args = ("--demo", "--sim-state", str(state), "--database-url", pg_url)
    first = start_demo(tmp_path, *args, env=env)
    second: Running | None = None
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not (before := staying(ready(first), state)) and time.monotonic() < deadline:
            time.sleep(1)
        assert before, f"no node ready (and not on its way out) within {DEADLINE_S} s"
        first.proc.kill()  # SIGKILL: no clean stop, its nodes keep running
        first.proc.wait()
        # A ready node the daemon asked to stop (its warm pool) or to end just before the
        # kill leaves anyway: only the others must come back as they were.
        before = staying(before, state)
        assert before, "the daemon sent every ready node away in the moment before the kill"
        seen = open_shared(state).instances  # (a copy read from the file)
        groups = {iid: seen[iid].node_group for iid in before}
        owners = {iid: seen[iid].node_owner for iid in before}
        assert all(groups.values()), groups
        assert all(group_alive(g or 0, nodes_root / iid) for iid, g in groups.items())

        second = start_demo(tmp_path, *args, env=env)
        deadline = time.monotonic() + DEADLINE_S
        after: dict[str, str] = {}
        code, report = 1, dict[str, Any]()
        while time.monotonic() < deadline:
            after = ready(second)
            code, report = audit(second)
            if set(before) <= set(after) and code == 0:
                break
            time.sleep(1)
        # The same instances serve again: adopted (the same process trees), not replaced.
        assert set(before) <= set(after), (before, after)
        assert code == 0 and report["clean"] is True, report
        adopted = open_shared(state).instances
        assert {iid: adopted[iid].node_group for iid in before} == groups
        assert all(adopted[iid].node_owner not in (None, owners[iid]) for iid in before)

        assert second.stop() == 0
        assert leftovers(nodes_root) == []

        # Another process puts an instance with gpucap's tags in the cloud, no row has it:
        # audited with the daemons' store and cloud (in this process: a running leader's gc
        # would terminate the orphan within its interval, racing the audit).
        store = Store.from_url(pg_url)
        try:
            service = Audit(store, lambda: datetime.now(UTC), SimResolver(open_shared(state)))
            assert service.run().clean
            ghost = SimProvider(Cloud.AWS, "demo/demo-aws", open_shared(state), retry=NO_RETRY)
            made = ghost.create_node(
                NodeRequest(
                    intent_id="ghost-1",
                    instance_type="p5.4xlarge",
                    region="us-east-1",
                    tags=ownership_tags("ghost-1", "demo", "demo/demo-aws/us-east-1", "chat-8b"),
                )
            ).node
            leaked = service.run()
            assert leaked.totals["leaked"] == 1, leaked.totals
            [finding] = [f for site in leaked.sites for f in site.findings]
            assert [n.instance_id for n in finding.instances] == [made.instance_id]
        finally:
            store.close()
    finally:
        for d in (first, second):
            if d is not None and d.proc.poll() is None:
                d.proc.kill()
        end_leftovers(nodes_root)
