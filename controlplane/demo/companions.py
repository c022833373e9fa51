"""The demo's parts that run beside the daemon (``controlplane.daemon.Companion``): the load
generator pointed at the daemon's own gRPC port, and the local nodes, all stopped with it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from controlplane.demo.loadgen import LoadGenerator
from controlplane.metrics_sources import ModelKey, TrafficShape
from providers.sim.local import LocalNodes

if TYPE_CHECKING:
    from controlplane.daemon import Daemon


class DemoLoad:
    """Requests to the demo's endpoints, counted on the daemon's registry."""

    def __init__(self, shapes: Mapping[ModelKey, TrafficShape]) -> None:
        self.shapes = shapes
        self.generator: LoadGenerator | None = None

    def start(self, daemon: Daemon) -> None:
        g = daemon.config.grpc
        token = Path(g.token_file).read_text().strip() if g.token_file else None
        self.generator = LoadGenerator(
            f"127.0.0.1:{daemon.grpc_port}",
            self.shapes,
            registry=daemon.telemetry.registry,
            token=token,
        )
        self.generator.start()

    def stop(self) -> None:
        if self.generator is not None:
            self.generator.stop()


class LocalNodesRunning:
    """Every local node still running is stopped with the daemon (no process is left)."""

    def __init__(self, nodes: LocalNodes) -> None:
        self.nodes = nodes

    def start(self, daemon: Daemon) -> None:
        pass

    def stop(self) -> None:
        self.nodes.close()
