"""Several daemon processes on one database, as an operator runs them: on PostgreSQL one acts
and the other takes over within 2 x the lease TTL of a SIGKILL; on SQLite the second refuses
to start; a second daemon on a used gRPC address fails and says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.component.test_leadership import pg_url  # noqa: F401  (fixture)
from tests.e2e.test_daemon import GPUCAP, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]

TTL = 1.0


class Proc:
    def __init__(self, tmp: Path, name: str, db: str, *, grpc_port: int | None = None) -> None:
        self.grpc_port = grpc_port or free_port()
        self.metrics_port = free_port()
        config = {
            "database_url": db,
            "provider_mode": "sim",
            "grpc": {"addr": f"127.0.0.1:{self.grpc_port}"},
            "metrics_addr": f"127.0.0.1:{self.metrics_port}",
            "intervals": {"collect_s": 0.5, "decide_s": 0.5, "place_s": 0.5, "reconcile_s": 0.5},
            "leadership": {"ttl_s": TTL},
        }
        path = tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        self.log = tmp / f"{name}.log"
        env = {**os.environ, "GPUCAP_STATE_DIR": str(tmp / f"state-{name}")}
        self.proc = subprocess.Popen(
            [*GPUCAP, "daemon", "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
            env=env,
        )

    def readyz(self) -> tuple[int, dict[str, Any]]:
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def role(self) -> str:
        try:
            return str(self.readyz()[1]["role"])
        except OSError:
            return "down"

    def wait_ready(self, within: float = 30.0) -> str:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                code, body = self.readyz()
                if code == 200:
                    return str(body["role"])
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"not ready within {within} s:\n{self.log.read_text()}")

    def finish(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def test_sigkill_of_the_leader_hands_over_within_two_ttls(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    procs: list[Proc] = []
    try:
        first = Proc(tmp_path, "d0", pg_url)
        procs.append(first)
        assert first.wait_ready() == "leader"
        standby = Proc(tmp_path, "d1", pg_url)
        procs.append(standby)
        assert standby.wait_ready() == "standby"

        leader, takeovers = first, []
        for i in range(2):
            leader.proc.send_signal(signal.SIGKILL)
            leader.proc.wait()
            t0 = time.monotonic()
            while standby.role() != "leader":
                assert time.monotonic() - t0 < 5 * TTL, standby.log.read_text()
                time.sleep(0.02)
            takeovers.append(time.monotonic() - t0)
            # It acts: its job ticks (the loop's, not just the scheduler's) run.
            body = standby.readyz()[1]
            assert f"token {i + 2}" in body["checks"]["lease"]["detail"], body
            if i == 1:
                break
            # The killed one comes back as a standby.
            restarted = Proc(tmp_path, f"d{i + 2}", pg_url)
            procs.append(restarted)
            assert restarted.wait_ready() == "standby"
            leader, standby = standby, restarted
        print(f"takeover after SIGKILL: {[round(t, 2) for t in takeovers]} s (TTL {TTL} s)")
        assert max(takeovers) < 2 * TTL, takeovers
    finally:
        for p in procs:
            p.finish()


def test_a_second_daemon_on_one_sqlite_file_refuses_to_start(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'one.db'}"
    first = Proc(tmp_path, "s0", db)
    try:
        assert first.wait_ready() == "leader"
        second = Proc(tmp_path, "s1", db)
        assert second.proc.wait(timeout=60) == 1
        said = " ".join(second.log.read_text().split())
        assert f"another gpucap daemon (pid {first.proc.pid}) is running on" in said, said
        assert "use PostgreSQL to run several daemons" in said
        assert first.readyz()[0] == 200  # untouched
    finally:
        first.finish()
    assert first.proc.returncode == 0


def test_a_second_daemon_on_a_used_grpc_address_exits_and_says_so(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    first = Proc(tmp_path, "g0", pg_url)
    try:
        first.wait_ready()
        second = Proc(tmp_path, "g1", pg_url, grpc_port=first.grpc_port)
        assert second.proc.wait(timeout=60) == 1
        said = " ".join(second.log.read_text().split())
        assert f"cannot listen on 127.0.0.1:{first.grpc_port}: address in use" in said, said
    finally:
        first.finish()
