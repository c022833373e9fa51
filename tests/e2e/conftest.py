"""A running API server (real gRPC on a free loopback port, real SQLite store) for the CLI
tests, and a runner that invokes the ``gpucap`` Typer app against it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog.testing
from click.testing import Result
from typer.testing import CliRunner

from controlplane.api import ControlPlaneService
from controlplane.cli.main import app
from controlplane.grpc.server import GrpcServer, serve
from controlplane.jobticks import JobTicks
from controlplane.store.db import Store
from controlplane.store.migrate import upgrade


@dataclass
class Daemon:
    service: ControlPlaneService
    store: Store
    server: GrpcServer
    job_ticks: JobTicks  # what a daemon's scheduler would record

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Daemon]:
    url = f"sqlite:///{tmp_path / 'gpucap.db'}"
    upgrade(url)
    store = Store.from_url(url)
    job_ticks = JobTicks()
    service = ControlPlaneService(store, job_ticks=job_ticks)
    # The server shares this process with CliRunner, which captures stdout: keep the
    # server's log lines out of the command output the tests read.
    with structlog.testing.capture_logs():
        server = serve(service, "127.0.0.1:0")
        yield Daemon(service, store, server, job_ticks)
        server.stop(grace=0)
    store.close()


class Gpucap:
    """``gpucap ...`` in-process, pointed at the test daemon through ``GPUCAP_ADDR``."""

    def __init__(self, addr: str) -> None:
        self.runner = CliRunner()
        self.env = {"GPUCAP_ADDR": addr, "GPUCAP_TOKEN": "", "COLUMNS": "250"}

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return self.runner.invoke(app, list(args), env=self.env, input=input)


@pytest.fixture
def gpucap(api: Daemon) -> Gpucap:
    return Gpucap(api.addr)
