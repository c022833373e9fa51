"""Shutdown never deadlocks: the daemon as a process whose stderr is a pipe nobody reads for a
while (a stalled log collector), stopped by a signal that lands while its main thread is
blocked writing a log line, then signalled again during the stop. Once the pipe is read
again it exits, cleanly and within a bound.

A signal handler that logged would deadlock here for good: it runs on the main thread inside
the blocked write, which holds the log's lock."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import threading
import time
import urllib.request
from importlib import resources
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_daemon import GPUCAP, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]

PIPE_BYTES = 4096  # the smallest pipe Linux gives: a few log lines fill it
EXIT_WITHIN_S = 30.0  # bounds a wait on a loaded 2-core machine; the stop itself takes < 1 s


class Drain:
    """Reads the pipe while ``on`` is set, keeping what it read."""

    def __init__(self, fd: int) -> None:
        self.fd, self.on, self.done = fd, threading.Event(), threading.Event()
        self.on.set()
        self.data = bytearray()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            if not self.on.is_set():
                time.sleep(0.01)
                continue
            if select.select([self.fd], [], [], 0.05)[0]:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return
                self.data += chunk

    def pause(self) -> None:
        self.on.clear()
        time.sleep(0.2)  # (a read under way ends)


def _ready(port: int, proc: subprocess.Popen[bytes], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the daemon exited early"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"not ready within {within} s")


def test_a_signal_while_a_log_write_blocks_and_a_second_during_the_stop(tmp_path: Path) -> None:
    policy = resources.files("controlplane.demo").joinpath("policy.yaml").read_text()
    (tmp_path / "demo.yaml").write_text(policy)
    metrics = free_port()
    config = tmp_path / "daemon.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "provider_mode": "sim",
                "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}",
                "policies": ["demo.yaml"],
                "grpc": {"addr": f"127.0.0.1:{free_port()}"},
                "metrics_addr": f"127.0.0.1:{metrics}",
                "intervals": {"collect_s": 1, "decide_s": 1, "place_s": 1, "reconcile_s": 1},
            }
        )
    )
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    drain = Drain(read_end)
    proc = subprocess.Popen(
        [*GPUCAP, "daemon", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=write_end,
        env={**os.environ, "GPUCAP_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        _ready(metrics, proc)
        time.sleep(2)  # the first ticks' lines are out: the daemon is quiet
        drain.pause()
        # Fill what is left of the pipe, through an open file of its own: O_NONBLOCK on the
        # daemon's (shared) one would make the daemon's writes fail instead of block.
        filler = os.open(f"/proc/self/fd/{write_end}", os.O_WRONLY | os.O_NONBLOCK)
        for chunk in (b"#" * 511 + b"\n", b"\n"):  # (a write that does not fit is refused whole)
            try:
                while True:
                    os.write(filler, chunk)
            except BlockingIOError:
                pass
        os.close(filler)
        # SIGHUP: the main thread re-applies the policy and blocks writing its log line,
        # holding the log's lock; SIGTERM lands there, SIGINT during the stop.
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None  # (still blocked: nobody reads its stderr)
        drain.on.set()
        code = proc.wait(timeout=EXIT_WITHIN_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(write_end)
        drain.done.set()
        drain.thread.join(5)
        os.close(read_end)
    log = drain.data.decode(errors="replace")
    assert code == 0, log[-3000:]
    assert '"policy.applied"' in log.split('"daemon.started"')[-1]  # the SIGHUP was served
    assert '"signal": "SIGTERM", "event": "daemon.stopping"' in log
    assert '"daemon.signals_during_stop"' in log and "SIGINT" in log
    assert log.rstrip().endswith("}") and '"daemon.stopped"' in log
