"""TensorRT-LLM's ``trtllm-serve``.

Sources: image ``nvcr.io/nvidia/tensorrt-llm/release:<version>`` and ``trtllm-serve
<model>`` https://nvidia.github.io/TensorRT-LLM/quick-start-guide.html; flags (``--host``,
``--port`` default 8000, ``--tp_size``, ``--pp_size``) tensorrt_llm/commands/serve.py;
``/health`` (503 with ``x-trtllm-server-state: starting`` while it loads, in newer
releases: tensorrt_llm/serve/readiness.py); Prometheus metrics at ``/prometheus/metrics``
(``/metrics`` is JSON iteration stats), names tensorrt_llm/metrics/collector.py. Multi-node
runs under MPI or Slurm (``trtllm-llmapi-launch``, docs/source/commands/trtllm-serve/
trtllm-serve.rst), with no rank or leader flags, so gpucap does not start its gangs. What
SIGTERM does to in-flight requests is not documented: gpucap's drain waits for them."""

from __future__ import annotations

from runtimes.base import EngineSpec, Gang, Metrics, Parallel
from schema.runtime import Engine


def command(model: str, par: Parallel, port: int, gang: Gang | None) -> list[str]:
    if gang is not None:
        raise ValueError("trtllm-serve runs multi-node under MPI or Slurm only")
    argv = ["trtllm-serve", model, "--host", "0.0.0.0", "--port", str(port)]
    return argv + ["--tp_size", str(par.tensor), "--pp_size", str(par.pipeline)]


ENGINE = EngineSpec(
    engine=Engine.TRTLLM,
    image="nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5",
    port=8000,
    health_path="/health",
    metrics=Metrics(
        path="/prometheus/metrics",
        running="trtllm_num_requests_running",
        waiting="trtllm_num_requests_waiting",
        completions_total="trtllm_request_success_total",
        generation_tokens_total="trtllm_generation_tokens_total",
        ttft_seconds="trtllm_time_to_first_token_seconds",
        e2e_seconds="trtllm_e2e_request_latency_seconds",
    ),
    command=command,
    stop="not documented (gpucap's drain waits for in-flight requests first)",
    multi_node=False,  # (schema.runtime.SINGLE_NODE_ENGINES)
)
