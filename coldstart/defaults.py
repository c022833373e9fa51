"""The phase model's defaults for one pool, by cloud and node size, before any node has
reported from it (``../shared/reference/coldstart.md``; each figure cites its row).

Only the capacity + VM phase differs by cloud and size in the reference; the others are a
property of the image, the weights and the engine, and keep ``coldstart.model.Phases``'
defaults (the "typical" column of coldstart.md §5)."""

from __future__ import annotations

from dataclasses import replace

from coldstart.model import Phases
from schema.types import Cloud

# §1.1: "GPU VM provision + boot 80–120 s" (Tensorfuse, GPU type unspecified): a one-GPU VM
# is no host-sized allocation; the high end.
SMALL_VM_CAPACITY_S = 120.0
# §1.1: "GKE autoscaler GPU node provisioning 3–8 min" [2nd]: the high end.
GCP_8GPU_CAPACITY_S = 480.0
# §1.1: OCI's GPU shapes are bare metal, "sometimes >10 min to provision (dstack had to raise
# its wait)" (dstack PR #1362, #1630): beyond the 10 min 8×H100 typical.
OCI_BARE_METAL_CAPACITY_S = 900.0


TYPICAL = Phases()


def phases_for(cloud: Cloud | str, gpus_per_node: int, base: Phases = TYPICAL) -> Phases:
    """``base`` with the capacity + VM time of a node of ``gpus_per_node`` GPUs on ``cloud``
    (AWS 8-GPU: ``base``'s own, the 10 min typical of §5)."""
    if gpus_per_node < 8:
        return replace(base, capacity_vm_s=min(base.capacity_vm_s, SMALL_VM_CAPACITY_S))
    if Cloud(cloud) == Cloud.GCP:
        return replace(base, capacity_vm_s=GCP_8GPU_CAPACITY_S)
    if Cloud(cloud) == Cloud.OCI:
        return replace(base, capacity_vm_s=OCI_BARE_METAL_CAPACITY_S)
    return base
