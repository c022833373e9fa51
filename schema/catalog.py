"""The GPU shape catalog: which clouds, regions and instance types gpucap knows.

Facts come from ``../shared/reference/clouds.md`` §A.1 (shapes) and §A.2 (on-demand list
prices, USD per node-hour, dated 2025-2026). Prices are *defaults*: an account file may
override them, because list prices move (the reference recommends a refreshable catalog).

A model never names an instance type. It names a *GPU shape* such as ``8xH100`` or
``2x8xH100`` (a gang of two 8-GPU nodes), and the catalog maps each GPU shape to the
instance types that provide it on each cloud.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from schema.types import Cloud


@dataclass(frozen=True)
class InstanceType:
    cloud: Cloud
    name: str
    gpu: str  # "H100" | "H200"
    gpus: int
    gpu_memory_gb: int
    vcpus: int
    memory_gb: int
    local_nvme_tb: float
    network_gbps: int
    list_price_usd_per_hour: float
    on_demand: bool = True  # False: sold only as Spot / Flex-start / capacity blocks


# clouds.md §A.1 and §A.2.
INSTANCE_TYPES: tuple[InstanceType, ...] = (
    InstanceType(Cloud.AWS, "p5.48xlarge", "H100", 8, 80, 192, 2048, 30.4, 3200, 55.04),
    InstanceType(Cloud.AWS, "p5.4xlarge", "H100", 1, 80, 16, 256, 3.8, 100, 6.88),
    InstanceType(Cloud.AWS, "p5e.48xlarge", "H200", 8, 141, 192, 2048, 30.4, 3200, 39.80),
    InstanceType(Cloud.AWS, "p5en.48xlarge", "H200", 8, 141, 192, 2048, 30.4, 3200, 63.296),
    InstanceType(Cloud.GCP, "a3-highgpu-8g", "H100", 8, 80, 208, 1872, 6.0, 1000, 88.49),
    InstanceType(Cloud.GCP, "a3-megagpu-8g", "H100", 8, 80, 208, 1872, 6.0, 1800, 93.40),
    InstanceType(Cloud.GCP, "a3-ultragpu-8g", "H200", 8, 141, 224, 2952, 12.0, 3600, 84.81),
    InstanceType(Cloud.OCI, "BM.GPU.H100.8", "H100", 8, 80, 224, 2048, 61.4, 3300, 80.0),
    InstanceType(Cloud.OCI, "BM.GPU.H200.8", "H200", 8, 141, 224, 3072, 30.7, 3400, 80.0),
)
# p5.4xlarge price: not in the reference; pro-rated 1/8 of p5.48xlarge as a placeholder default.

INSTANCE_TYPES_BY_NAME: dict[str, InstanceType] = {t.name: t for t in INSTANCE_TYPES}

# Regions offering H100/H200 shapes that the catalog accepts in policy files. A region not
# listed here is rejected at validation time (it is far likelier a typo than a new region).
REGIONS: dict[Cloud, tuple[str, ...]] = {
    Cloud.AWS: (
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "ca-central-1",
        "eu-west-1",
        "eu-west-2",
        "eu-central-1",
        "eu-north-1",
        "ap-northeast-1",
        "ap-south-1",
        "ap-southeast-2",
        "sa-east-1",
    ),
    Cloud.GCP: (
        "us-central1",
        "us-east1",
        "us-east4",
        "us-east5",
        "us-west1",
        "us-west4",
        "us-south1",
        "europe-west1",
        "europe-west4",
        "europe-west9",
        "asia-northeast1",
        "asia-southeast1",
    ),
    Cloud.OCI: (
        "us-ashburn-1",
        "us-phoenix-1",
        "us-chicago-1",
        "us-sanjose-1",
        "uk-london-1",
        "eu-frankfurt-1",
        "ap-tokyo-1",
        "ap-osaka-1",
        "ca-toronto-1",
        "sa-saopaulo-1",
    ),
}

GPU_KINDS = ("H100", "H200")

_GPU_SHAPE = re.compile(r"^(?:(?P<nodes>[1-9]\d*)x)?(?P<gpus>[1-9]\d*)x(?P<gpu>H100|H200)$")


@dataclass(frozen=True)
class GpuShape:
    """A replica's hardware: ``nodes`` nodes of ``gpus`` GPUs of kind ``gpu`` each.

    Written ``8xH100`` (one node) or ``2x8xH100`` (a gang of two nodes)."""

    gpu: str
    gpus: int
    nodes: int = 1

    @property
    def name(self) -> str:
        base = f"{self.gpus}x{self.gpu}"
        return base if self.nodes == 1 else f"{self.nodes}x{base}"

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.nodes

    @property
    def gpu_memory_gb(self) -> int:
        per = max(t.gpu_memory_gb for t in INSTANCE_TYPES if t.gpu == self.gpu)
        return per * self.total_gpus

    def instance_types(self, cloud: Cloud | None = None) -> list[InstanceType]:
        """Instance types that provide one node of this shape, cheapest first."""
        found = [
            t
            for t in INSTANCE_TYPES
            if t.gpu == self.gpu and t.gpus == self.gpus and (cloud is None or t.cloud == cloud)
        ]
        return sorted(found, key=lambda t: (t.list_price_usd_per_hour, t.name))


# Placement asks for the same few shapes once per pool per launch considered (about 100
# times per model and plan, measured by bench/placement_milp.py): parsed once each. The
# result is frozen, so sharing it is safe; the bound keeps arbitrary input from growing it.
@functools.lru_cache(maxsize=4096)
def parse_gpu_shape(text: str) -> GpuShape:
    """Parse ``8xH100`` / ``2x8xH200``; raise ValueError naming what is wrong."""
    m = _GPU_SHAPE.match(text.strip())
    if not m:
        raise ValueError(
            f"unknown GPU shape {text!r}: expected GPUSxGPU or NODESxGPUSxGPU with GPU one of "
            f"{', '.join(GPU_KINDS)} (e.g. 8xH100, 2x8xH100)"
        )
    shape = GpuShape(gpu=m["gpu"], gpus=int(m["gpus"]), nodes=int(m["nodes"] or 1))
    if not shape.instance_types():
        offered = sorted({t.gpus for t in INSTANCE_TYPES if t.gpu == shape.gpu})
        raise ValueError(
            f"GPU shape {text!r} does not exist: no cloud offers a node with {shape.gpus} "
            f"{shape.gpu} GPUs (offered: {', '.join(f'{n}x{shape.gpu}' for n in offered)})"
        )
    return shape
