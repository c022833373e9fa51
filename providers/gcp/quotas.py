"""GCP GPU quota headroom: the regional GPU quota metrics (``regions.get`` quotas) and the
project-wide ``GPUS_ALL_REGIONS`` (``projects.get``), as free units per metric. Read by
``offerings`` (a type whose quota has no room for one node is unavailable) and ``check``."""

from __future__ import annotations

from typing import Any

from providers.gcp.session import CALL_TIMEOUT_S, GcpSession

# Regional GPU quota metric each A3 shape consumes (clouds.md §A.1 notes).
QUOTA_METRIC: dict[str, str] = {
    "a3-highgpu-8g": "NVIDIA_H100_GPUS",
    "a3-megagpu-8g": "NVIDIA_H100_MEGA_GPUS",
    "a3-ultragpu-8g": "NVIDIA_H200_GPUS",
}
GLOBAL_GPU_METRIC = "GPUS_ALL_REGIONS"


def quota_headroom(session: GcpSession, region: str) -> dict[str, float]:
    """Free units per GPU quota metric in the region, plus the project-wide GPU quota."""
    info = session.client("RegionsClient").get(
        project=session.project, region=region, retry=None, timeout=CALL_TIMEOUT_S
    )
    free = {m: v for m, v in free_by_metric(info.quotas).items() if m in QUOTA_METRIC.values()}
    glob = global_gpu_free(session)
    if glob is not None:
        free[GLOBAL_GPU_METRIC] = glob
    return free


def global_gpu_free(session: GcpSession) -> float | None:
    """Free units of the project-wide GPU quota, None when the project reports none."""
    project = session.client("ProjectsClient").get(
        project=session.project, retry=None, timeout=CALL_TIMEOUT_S
    )
    return free_by_metric(project.quotas).get(GLOBAL_GPU_METRIC)


def free_by_metric(quotas: Any) -> dict[str, float]:
    return {q.metric: float(q.limit) - float(q.usage) for q in quotas}
