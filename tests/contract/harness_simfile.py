"""Contract harness for the simulated cloud on a state file (``providers.sim.open_shared``):
the provider runs on one :class:`SimCloud` and the harness injects faults and reads ground
truth through a second one on the same file, as another process would. Every fault the
provider meets and every instance the harness counts went through the file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from providers.sim import SimProvider, SimTimings
from providers.sim.cloud import open_shared
from schema.types import Cloud
from tests.contract.harness import CONTRACT_RETRY
from tests.contract.harness_sim import SimHarness


@pytest.fixture
def simfile_harness(tmp_path: Path) -> Iterator[SimHarness]:
    timings = SimTimings(boot_s=0.0, serve_s=0.0, terminate_s=0.0, start_s=0.0)
    path = tmp_path / "sim-state.db"
    world, observer = open_shared(path, timings=timings), open_shared(path, timings=timings)
    provider = SimProvider(Cloud.AWS, "contract-sim", world, retry=CONTRACT_RETRY)
    yield SimHarness(world=observer, provider=provider)
