"""What one inference engine is, as gpucap drives it: its container image, the command
that starts its OpenAI-compatible server with the model's parallel sizes (and, in a gang,
its rank and the leader's address), its health endpoint, its Prometheus metrics and how
it stops. Each engine is one module of facts from its own documentation
(``runtimes/vllm.py``, ``sglang.py``, ``trtllm.py``); :func:`runtimes.resolve` turns a
policy's runtime into the :class:`Launch` a node boots with. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from schema.runtime import Engine


@dataclass(frozen=True)
class Metrics:
    """The engine's Prometheus names for what the autoscaler reads (None: it has none)."""

    path: str  # scraped on the engine's port
    running: str  # gauge: requests being served
    waiting: str  # gauge: requests queued
    completions_total: str  # counter: requests finished
    generation_tokens_total: str  # counter: output tokens
    ttft_seconds: str | None = None  # histogram: time to first token
    e2e_seconds: str | None = None  # histogram: a request's end-to-end latency


@dataclass(frozen=True)
class Gang:
    """A node's place in a multi-node replica."""

    nodes: int
    rank: int  # 0: the leader, which serves
    leader: str  # the leader's address (its private IP)


@dataclass(frozen=True)
class Parallel:
    tensor: int
    pipeline: int


@dataclass(frozen=True)
class EngineSpec:
    engine: Engine
    image: str  # pinned default tag
    port: int  # the engine's documented default
    health_path: str  # 200 once serving; anything else (or no answer) is not ready
    metrics: Metrics
    # argv after the image: (model path, parallel sizes, port, gang or None) -> argv
    command: Callable[[str, Parallel, int, Gang | None], list[str]]
    stop: str  # what SIGTERM does, from the docs (gpucap drains before it signals)
    multi_node: bool = True  # whether gpucap can start its gangs (rank + leader flags)
    env: Mapping[str, str] = field(default_factory=dict)  # always set


@dataclass(frozen=True)
class Launch:
    """What one node of a replica runs."""

    engine: Engine
    image: str
    argv: list[str]  # the container's command
    env: dict[str, str]
    port: int
    health_path: str
    metrics_path: str
    parallel: Parallel
    gang: Gang | None
