"""A model's inference runtime, as its policy names it: the engine, and what the customer
changes of the engine's defaults (image, extra arguments, environment, port, parallel
sizes). Unset values are the engine's own (``runtimes/``, from each engine's documentation);
this module only checks what is written, so a policy error can name its field."""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from schema.catalog import GpuShape

# The gang rendezvous port: every rank of a multi-node replica starts with the leader's
# address and this port (``runtimes``).
RENDEZVOUS_PORT = 29500
# Ports a node keeps for itself, which a model's engine may not take.
RESERVED_PORTS = {22: "ssh", RENDEZVOUS_PORT: "the gang rendezvous"}
# Engines whose multi-node mode has no rank and leader flags (it runs under MPI or Slurm),
# so gpucap cannot start their gangs (``runtimes/trtllm.py``).
SINGLE_NODE_ENGINES = {"trtllm"}
# Environment names that would carry a secret into a node's user data, which the cloud
# stores in clear and shows to anyone who may describe the instance. A node fetches its
# secrets with its own identity instead (README, "How a node becomes a serving replica").
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|API_?KEY)", re.I)
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
# One line each: a node reads its engine's arguments one per line, and its environment as a
# docker env file (no multi-line values).
OneLine = Annotated[str, Field(max_length=1000, pattern=r"^[^\n\r\x00]*$")]


class Engine(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Runtime(_Strict):
    engine: Engine = Engine.VLLM
    image: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    # (each bounded, as every list a caller sends is: issue 26; a node's user data has to
    # hold them, and EC2's is at most 16 KB, so 256 lines is already more than fits)
    args: Annotated[list[OneLine], Field(max_length=256)] = []  # appended to the engine's own
    env: Annotated[
        dict[Annotated[EnvName, Field(max_length=256)], OneLine], Field(max_length=256)
    ] = {}
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    # default: GPUs per node (the bound only keeps a number sane: runtime_problems checks it)
    tensor_parallel: Annotated[int, Field(ge=1, le=1024)] | None = None
    pipeline_parallel: Annotated[int, Field(ge=1, le=1024)] | None = None  # default: nodes


def runtime_problems(
    rt: Runtime, shapes: list[GpuShape]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(path under the runtime, reason) for what the runtime asks that its model's shapes
    or a node cannot hold. Pure."""
    if rt.port is not None and rt.port in RESERVED_PORTS:
        yield ("port",), f"port {rt.port} is {RESERVED_PORTS[rt.port]}'s on every node"
    for name in rt.env:
        if _SECRET_NAME.search(name):
            yield (
                ("env", name),
                "looks like a secret: user data is stored in clear by the cloud; the node "
                "fetches secrets with its own identity (instance profile, service account, "
                "instance principal)",
            )
    gang = next((x for x in shapes if x.nodes > 1), None)
    if gang is not None and rt.engine.value in SINGLE_NODE_ENGINES:
        yield (
            ("engine",),
            f"{rt.engine.value} runs multi-node under MPI or Slurm only; gpucap starts gangs "
            f"({gang.name}) with vllm or sglang",
        )

    def gpus(x: GpuShape) -> int:
        return (rt.tensor_parallel or x.gpus) * (rt.pipeline_parallel or x.nodes)

    short = next((x for x in shapes if gpus(x) > x.total_gpus), None)  # one is reason enough
    if short is not None:
        tp, pp = rt.tensor_parallel or short.gpus, rt.pipeline_parallel or short.nodes
        yield (
            ("tensor_parallel" if rt.tensor_parallel else "pipeline_parallel",),
            f"tensor_parallel {tp} x pipeline_parallel {pp} = {tp * pp} GPUs, but "
            f"{short.name} has {short.total_gpus}",
        )
