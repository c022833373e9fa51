"""Inference engines (one module each) and how a policy's runtime becomes what a node runs.
A new engine is one module with an ``ENGINE`` and a line in :data:`ENGINES`."""

from __future__ import annotations

from runtimes import sglang, trtllm, vllm
from runtimes.base import EngineSpec, Gang, Launch, Metrics, Parallel
from schema.catalog import GpuShape
from schema.runtime import RENDEZVOUS_PORT, Engine, Runtime

ENGINES: dict[Engine, EngineSpec] = {
    Engine.VLLM: vllm.ENGINE,
    Engine.SGLANG: sglang.ENGINE,
    Engine.TRTLLM: trtllm.ENGINE,
}


def parallel(rt: Runtime, shape: GpuShape) -> Parallel:
    """Tensor parallel across a node's GPUs, pipeline parallel across a gang's nodes (vLLM's
    parallelism guide; the same split for every engine), unless the policy says."""
    return Parallel(rt.tensor_parallel or shape.gpus, rt.pipeline_parallel or shape.nodes)


def port(rt: Runtime) -> int:
    """Where the engine listens: the policy's port, else the engine's documented one."""
    return rt.port or ENGINES[rt.engine].port


def resolve(
    rt: Runtime,
    shape: GpuShape,
    model_path: str,
    gang: Gang | None = None,
    image: str | None = None,
) -> Launch:
    """The launch of one node of a replica of ``shape``, its weights at ``model_path`` on
    the node. ``image``: a policy's older top-level image, when its runtime names none.
    Raises ValueError for what the engine cannot run (a gang of an engine without multi-node
    flags); the policy check refuses those first (``schema.runtime.runtime_problems``)."""
    spec = ENGINES[rt.engine]
    if shape.nodes > 1 and gang is None:
        raise ValueError(f"{shape.name} is a gang: each node needs its rank and leader")
    if gang is not None and not spec.multi_node:
        raise ValueError(f"{rt.engine.value} cannot start a gang ({spec.stop})")
    par = parallel(rt, shape)
    listen = port(rt)
    return Launch(
        engine=rt.engine,
        image=rt.image or image or spec.image,
        argv=spec.command(model_path, par, listen, gang) + list(rt.args),
        env={**spec.env, **rt.env},
        port=listen,
        health_path=spec.health_path,
        metrics_path=spec.metrics.path,
        parallel=par,
        gang=gang,
    )


__all__ = [
    "ENGINES",
    "RENDEZVOUS_PORT",
    "EngineSpec",
    "Gang",
    "Launch",
    "Metrics",
    "Parallel",
    "parallel",
    "port",
    "resolve",
]
