"""SGLang's server.

Sources: image ``lmsysorg/sglang`` and the launch command ``python3 -m
sglang.launch_server`` https://docs.sglang.ai/get_started/install.html; flags
(``--model-path``, ``--port`` default 30000, ``--tp-size``, ``--pp-size``, multi-node
``--nnodes``, ``--node-rank``, ``--dist-init-addr host:port``) the repository's
docs/advanced_features/server_arguments.md; ``/health`` answers 503 while the server
starts and while it shuts down (python/sglang/srt/entrypoints/http_server.py); metrics need
``--enable-metrics``, names https://docs.sglang.ai/references/production_metrics.html
(``sglang:num_requests_total``: requests processed); SIGTERM drains until no request is
left, with no time limit (python/sglang/srt/managers/tokenizer_manager.py,
``sigterm_watchdog``)."""

from __future__ import annotations

from runtimes.base import EngineSpec, Gang, Metrics, Parallel
from schema.runtime import RENDEZVOUS_PORT, Engine


def command(model: str, par: Parallel, port: int, gang: Gang | None) -> list[str]:
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", model]
    argv += ["--host", "0.0.0.0", "--port", str(port), "--enable-metrics"]
    argv += ["--tp-size", str(par.tensor), "--pp-size", str(par.pipeline)]
    if gang is not None:
        argv += ["--nnodes", str(gang.nodes), "--node-rank", str(gang.rank)]
        argv += ["--dist-init-addr", f"{gang.leader}:{RENDEZVOUS_PORT}"]
    return argv


ENGINE = EngineSpec(
    engine=Engine.SGLANG,
    image="lmsysorg/sglang:latest",
    port=30000,
    health_path="/health",
    metrics=Metrics(
        path="/metrics",
        running="sglang:num_running_reqs",
        waiting="sglang:num_queue_reqs",
        completions_total="sglang:num_requests_total",
        generation_tokens_total="sglang:generation_tokens_total",
        ttft_seconds="sglang:time_to_first_token_seconds",
        e2e_seconds="sglang:e2e_request_latency_seconds",
    ),
    command=command,
    stop="SIGTERM drains every in-flight request, with no time limit",
)
