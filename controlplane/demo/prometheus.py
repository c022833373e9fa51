"""A Prometheus for the demo, as a child process of the daemon: it discovers every ready
engine from the daemon's ``/sd/prometheus`` (HTTP SD, nothing else configured) and scrapes
them every second, listens on a free loopback port and keeps its data in the demo's state
directory. On Linux it ends with the daemon even when the daemon is killed: it runs under
``setpriv --pdeathsig`` (util-linux), which asks for a signal when the thread that started
it ends (the daemon starts it from its main thread). A ``preexec_fn`` would do the same but
make the daemon fork with gRPC's threads running, which gRPC warns about."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

JOB = "gpucap-engines"
SCRAPE_S = 1.0
READY_TIMEOUT_S = 30.0


def config(sd_url: str) -> dict[str, object]:
    job = {
        "job_name": JOB,
        "scrape_interval": f"{SCRAPE_S:g}s",
        "scrape_timeout": f"{SCRAPE_S:g}s",
        "http_sd_configs": [{"url": sd_url, "refresh_interval": f"{SCRAPE_S:g}s"}],
    }
    return {"global": {"scrape_interval": f"{SCRAPE_S:g}s"}, "scrape_configs": [job]}


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _with_parent() -> list[str]:
    """The command prefix that ends the child with its parent (none where unavailable)."""
    setpriv = shutil.which("setpriv") if sys.platform == "linux" else None
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


class PrometheusProcess:
    """``start`` runs it and waits until it is ready (RuntimeError with its log's tail
    otherwise); ``stop`` ends it. Its config, data and log are under ``home``."""

    def __init__(self, binary: str, home: Path, sd_url: str, host: str = "127.0.0.1") -> None:
        self.binary, self.home, self.sd_url, self.host = binary, home, sd_url, host
        self.url: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:
        return self.home / "prometheus.log"

    def start(self) -> str:
        self.home.mkdir(parents=True, exist_ok=True)
        conf = self.home / "prometheus.yml"
        conf.write_text(json.dumps(config(self.sd_url), indent=2))  # (JSON is YAML)
        for _attempt in range(3):  # a port taken between choosing and binding: again
            port = _free_port(self.host)
            with self.log_path.open("ab") as log:
                self._proc = subprocess.Popen(
                    [
                        *_with_parent(),
                        self.binary,
                        f"--config.file={conf}",
                        f"--storage.tsdb.path={self.home / 'data'}",
                        "--storage.tsdb.retention.time=1d",
                        f"--web.listen-address={self.host}:{port}",
                        "--log.level=warn",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            url = f"http://{self.host}:{port}"
            if self._ready(url):
                self.url = url
                return url
            code = self._proc.poll()
            self.stop()
        tail = self.log_path.read_text(errors="replace")[-1500:]
        how = "not ready in time" if code is None else f"exited {code}"
        raise RuntimeError(f"prometheus did not start ({how}): {tail}")

    def _ready(self, url: str) -> bool:
        assert self._proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self._proc.poll() is None and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=1).close()
                return True
            except OSError:
                time.sleep(0.1)
        return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
