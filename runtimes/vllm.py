"""vLLM's OpenAI-compatible server.

Sources: image and entrypoint https://docs.vllm.ai/en/stable/deployment/docker/ (the
``vllm/vllm-openai`` image, ``ENTRYPOINT ["vllm", "serve"]`` in the repository's
docker/Dockerfile); flags and multi-node (``--nnodes``, ``--node-rank``,
``--master-addr``, ``--headless`` on the workers)
https://docs.vllm.ai/en/latest/serving/parallelism_scaling/; ``--port`` default 8000
(vllm/entrypoints/openai/cli_args.py); ``GET /health`` 200, or 503 once the engine is dead
(vllm/entrypoints/serve/instrumentator/health.py); metric names
https://docs.vllm.ai/en/latest/usage/metrics/ (vllm/v1/metrics/loggers.py); SIGTERM and
``--shutdown-timeout`` (default 0: in-flight requests are aborted)
https://github.com/vllm-project/vllm/pull/36666."""

from __future__ import annotations

from runtimes.base import EngineSpec, Gang, Metrics, Parallel
from schema.runtime import Engine


def command(model: str, par: Parallel, port: int, gang: Gang | None) -> list[str]:
    argv = [model, "--host", "0.0.0.0", "--port", str(port)]
    argv += ["--tensor-parallel-size", str(par.tensor)]
    argv += ["--pipeline-parallel-size", str(par.pipeline)]
    if gang is not None:
        argv += ["--nnodes", str(gang.nodes), "--node-rank", str(gang.rank)]
        argv += ["--master-addr", gang.leader]
        if gang.rank > 0:
            argv.append("--headless")  # workers run no API server
    return argv


ENGINE = EngineSpec(
    engine=Engine.VLLM,
    image="vllm/vllm-openai:v0.11.0",
    port=8000,
    health_path="/health",
    metrics=Metrics(
        path="/metrics",
        running="vllm:num_requests_running",
        waiting="vllm:num_requests_waiting",
        completions_total="vllm:request_success_total",
        generation_tokens_total="vllm:generation_tokens_total",
        ttft_seconds="vllm:time_to_first_token_seconds",
        e2e_seconds="vllm:e2e_request_latency_seconds",
    ),
    command=command,
    stop="SIGTERM aborts in-flight requests unless --shutdown-timeout is set",
)
