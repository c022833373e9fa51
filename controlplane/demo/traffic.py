"""The demo's traffic, defined once: each model's bursty shape, which the load generator
sends as real requests (``controlplane/demo/loadgen.py``) and
:class:`~controlplane.metrics_sources.SyntheticTraffic` can generate as numbers. A request
asks for the shape's tokens; the emulated engines decode :data:`DECODE_TOKENS_PER_S` per
request, so a request holds its slot for the shape's service time."""

from __future__ import annotations

from controlplane.metrics_sources import ModelKey, TrafficShape

DECODE_TOKENS_PER_S = 100.0
PREFILL_S = 0.05


def _shape(base_rps: float, tokens: int, **kw: float) -> TrafficShape:
    service_s = PREFILL_S + tokens / DECODE_TOKENS_PER_S
    return TrafficShape(base_rps, service_s, tokens_per_request=tokens, **kw)


# Sized against the demo policy's slots (local-policy.yaml): one replica of each at the base
# rate, three or four of chat-8b and llama-70b in a burst, two of coder-32b.
DEMO_SHAPES: dict[ModelKey, TrafficShape] = {
    ("demo", "chat-8b"): _shape(3.0, 150, burst_factor=4.0),
    ("demo", "llama-70b"): _shape(2.5, 300, burst_factor=4.0, burst_every_s=80.0),
    ("demo", "coder-32b"): _shape(
        1.5, 400, burst_factor=3.0, burst_every_s=70.0, first_burst_s=20.0
    ),
}

# The engines' service-time options (``python -m runtimes.emulator``), for every local node.
EMULATOR_ARGS = [
    "--max-concurrency=32",
    f"--prefill-s={PREFILL_S:g}",
    f"--decode-tps={DECODE_TOKENS_PER_S:g}",
]
