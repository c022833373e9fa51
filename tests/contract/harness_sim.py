"""Contract harness for the simulated cloud (``providers.sim``): the in-process world is the
emulator, and its own fault injection stands in for the HTTP-level one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest

from providers.sim import SimCloud, SimProvider, SimTimings
from schema.types import Cloud
from tests.contract.harness import CONTRACT_RETRY, Fault


@dataclass
class SimHarness:
    world: SimCloud
    provider: SimProvider
    region: str = "us-east-1"
    zone: str = "us-east-1a"
    instance_type: str = "p5.48xlarge"
    retry_budget: int = CONTRACT_RETRY.max_attempts
    unknown_instance_id: str = "sim-aws-999999"
    has_placement_objects: bool = True

    def inject(self, fault: Fault, *, count: int = 1, zone: str | None = None) -> None:
        self.world.inject(self.provider.cloud, self.provider.account, fault, count, zone)

    def inject_start(self, fault: Fault, *, count: int = 1) -> None:
        self.world.inject(self.provider.cloud, self.provider.account, fault, count)

    def create_requests(self) -> int:
        return self.world.create_calls

    def instances_with_intent(self, intent_id: str) -> int:
        return self.world.live_instances_with_intent(intent_id)

    def user_data_of(self, instance_id: str) -> str:
        inst = self.world.instances.get(instance_id)
        return inst.user_data if inst is not None else ""

    def placement_of(self, instance_id: str) -> str | None:
        inst = self.world.instances.get(instance_id)
        return inst.placement_group if inst is not None else None

    def placement_objects(self) -> Mapping[str, Mapping[str, str]]:
        return {
            name: dict(tags)
            for (account, _, name), tags in self.world.placement_groups.items()
            if account == self.provider.account
        }

    def drop_next_placement_create(self) -> bool:
        return False

    def crash_after_create(self) -> None:
        self.world.inject(self.provider.cloud, self.provider.account, "crash_after_create")

    def object_uri(self, key: str) -> str:
        return f"s3://gpucap-contract/{key}"

    def put_object(self, uri: str, data: bytes) -> None:
        self.world.put_object(uri, len(data), data)

    def get_object(self, uri: str) -> bytes | None:
        if uri not in self.world.objects:
            return None
        return self.world.object_data.get(uri)


@pytest.fixture
def sim_harness() -> Iterator[SimHarness]:
    # Zero timings: instances are running at once (after a start too) and gone (or stopped)
    # at once after terminate (or stop), so the contract sees the end states without waiting
    # on the simulated clock.
    world = SimCloud(timings=SimTimings(boot_s=0.0, serve_s=0.0, terminate_s=0.0, start_s=0.0))
    provider = SimProvider(Cloud.AWS, "contract-sim", world, retry=CONTRACT_RETRY)
    yield SimHarness(world=world, provider=provider)
