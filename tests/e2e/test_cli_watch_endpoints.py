"""``gpucap endpoints --watch`` against a running API server: one line (JSON) or table per
change, until Ctrl-C or the daemon stops."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from controlplane.store.db import Store
from tests.component.oncall_kit import add_replica
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import example_policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EAST = "acme/acme-aws/us-east-1/p5.48xlarge"


def _ready_replica(store: Store, rid: str, ip: str) -> None:
    add_replica(store, "llama-70b", EAST, "ready", ["ready"], rid=rid, private_ip=ip)


def test_watch_json_prints_a_line_per_change_until_ctrl_c(api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    _ready_replica(api.store, "r1", "10.0.0.1")
    exe = Path(sys.executable).with_name("gpucap")
    proc = subprocess.Popen(
        [str(exe), "endpoints", "llama-70b", "--watch", "-o", "json"],
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
        assert [e["address"] for e in first["endpoints"]] == ["10.0.0.1"]
        _ready_replica(api.store, "r2", "10.0.0.2")
        second = json.loads(lines.get(timeout=30))
        assert int(second["revision"]) > int(first["revision"])
        assert [e["address"] for e in second["added"]] == ["10.0.0.2"]
        assert len(second["endpoints"]) == 2
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


def test_watch_table_until_the_daemon_stops(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")

    def operator() -> None:
        threading.Event().wait(1.0)
        _ready_replica(api.store, "r1", "10.0.0.1")
        threading.Event().wait(1.5)
        api.server.stop(grace=1)

    threading.Thread(target=operator).start()
    result = gpucap("endpoints", "--watch")
    assert result.exit_code == 0, result.output
    assert "revision 0: 0 endpoints" in result.stdout
    assert ": 1 endpoint (+1 -0)" in result.stdout and "10.0.0.1:8000" in result.stdout


def test_watch_with_unreachable_daemon_fails_fast() -> None:
    result = Gpucap("127.0.0.1:1")("endpoints", "--watch", "--timeout", "1")
    assert result.exit_code == 3 and "cannot reach" in result.stderr
