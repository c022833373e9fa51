"""The demo's wiring started for real without nodes: a Prometheus that does not start
leaves the demo on the built-in scraper (and nothing of it running), and
`gpucap demo kill-engine` names what it cannot find."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
from controlplane.daemon import Daemon
from controlplane.demo.metrics import BINARY_ENV, DemoMetrics
from controlplane.demo.wiring import DEMO_TUNING, local_wiring
from controlplane.engine_scraper import EngineScraper
from schema.daemon_config import DaemonConfig, GrpcConfig
from tests.policy_texts import engines_policy

# One model at zero replicas: no node starts.
POLICY = engines_policy({"chat": ("vllm", 8000)})


def test_without_a_prometheus_that_starts_the_demo_scrapes_the_engines_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BINARY_ENV, "/bin/false")  # (exits at once: never ready)
    network = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.0/24"
    wiring = local_wiring(tmp_path, ("test", POLICY), DEMO_TUNING, shapes=None, network=network)
    config = DaemonConfig(grpc=GrpcConfig(addr="127.0.0.1:0"), metrics_addr="127.0.0.1:0")
    d = Daemon(config, wiring)
    try:
        d.start()
        metrics = wiring.metrics_source
        assert isinstance(metrics, DemoMetrics)
        assert isinstance(metrics.source, EngineScraper) and metrics.prometheus is None

        addr = f"127.0.0.1:{d.grpc_port}"
        result = CliRunner().invoke(app, ["demo", "kill-engine", "n-nope", "--addr", addr])
        assert result.exit_code == 1 and "no live node n-nope" in result.output
    finally:
        d.stop()
