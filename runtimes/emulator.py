"""An inference engine emulated on the wire: where a real node runs the engine's container, a
local node of the simulated cloud runs this (``providers/sim/local.py``), and the tests'
fake engine is this server with test controls (``tests/fakes/engine_server.py``), so the
HTTP surface and the metric exposition exist once.

It answers what a control plane and a router touch, from the engine's
:class:`runtimes.base.EngineSpec`: the health path (200 while serving), OpenAI-compatible
``POST /v1/completions`` and ``/v1/chat/completions`` (with ``usage``), ``GET /v1/models``,
and Prometheus text at the engine's metrics path under the engine's own names (so the
default PromQL of ``runtimes/queries.py`` reads it), each series labelled ``model_name`` as
the engines label them.

Load follows a service-time model (:class:`ServiceTime`): ``slots`` requests run at once,
each for its prefill plus its ``max_tokens`` at the decode rate; the rest wait in FIFO order
and count as waiting; the latency histograms observe the real queueing plus service time.

``python -m runtimes.emulator --engine vllm --host H --port P --model NAME`` runs one. The one
module of ``runtimes/`` that does I/O: nothing pure imports it."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from runtimes import ENGINES
from runtimes.base import EngineSpec
from schema.runtime import Engine

COMPLETIONS_PATH = "/v1/completions"
CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
DEFAULT_MAX_TOKENS = 16  # vLLM's default for a completion that names none
# vLLM's buckets (vllm/v1/metrics/loggers.py), the low ends.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0)


@dataclass(frozen=True)
class ServiceTime:
    """How long one request holds its slot: a fixed prefill, then its output tokens at the
    decode rate (per request, as a batch slot decodes). ``inf``: no decode time."""

    prefill_s: float = 0.02
    decode_tokens_per_s: float = 100.0

    def __post_init__(self) -> None:
        if self.prefill_s < 0 or self.decode_tokens_per_s <= 0:
            raise ValueError(f"{self}: prefill must be >= 0 s and decode > 0 tokens/s")

    def decode_s(self, tokens: int) -> float:
        return tokens / self.decode_tokens_per_s

    def of(self, tokens: int) -> float:
        return self.prefill_s + self.decode_s(tokens)


class Stopped(Exception):
    """The engine stopped while a request waited or ran: it gets no answer."""


class Slots:
    """``n`` requests run at once (None: any number); the rest wait their turn, first come
    first served."""

    def __init__(self, n: int | None) -> None:
        if n is not None and n < 1:
            raise ValueError(f"slots must be at least 1, not {n}")
        self.n = n
        self.running = 0
        self._queue: deque[int] = deque()
        self._tickets = itertools.count()
        self._cond = threading.Condition()
        self._closed = False

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def acquire(self) -> None:
        """Block until this request's turn and a free slot. Raises :class:`Stopped`."""
        with self._cond:
            ticket = next(self._tickets)
            self._queue.append(ticket)
            try:
                while not self._closed and not (
                    self._queue[0] == ticket and (self.n is None or self.running < self.n)
                ):
                    self._cond.wait()
                if self._closed:
                    raise Stopped
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()
            self.running += 1

    def release(self) -> None:
        with self._cond:
            self.running -= 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Histogram:
    """Cumulative bucket counts and a sum, as Prometheus keeps a histogram."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = (*bounds, math.inf)
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.sum += value
        for i, le in enumerate(self.bounds):
            if value <= le:
                self.counts[i] += 1

    def family(self, name: str, labels: dict[str, str]) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, f"{name} (emulated)", labels=list(labels))
        buckets = [
            ("+Inf" if math.isinf(le) else repr(le), float(n))
            for le, n in zip(self.bounds, self.counts, strict=True)
        ]
        fam.add_metric(list(labels.values()), buckets, self.sum)
        return fam


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


class EngineState(Collector):
    """One engine's load and what it has served; a Prometheus collector of its own names.
    ``held_running`` and ``held_waiting`` are requests it reports beyond the ones it serves
    (a loaded engine without the traffic, for tests and demos)."""

    def __init__(
        self,
        spec: EngineSpec,
        model_name: str,
        service: ServiceTime,
        slots: int | None,
    ) -> None:
        self.spec = spec
        self.model_name = model_name
        self.service = service
        self.slots = Slots(slots)
        self.serving = True  # False: health answers 503, completions too (a dead engine)
        self.held_running = 0
        self.held_waiting = 0
        self.completions = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.lock = threading.Lock()
        self._gate = threading.Event()  # set: the requests running now finish at once
        self.stopped = False
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    @property
    def running(self) -> int:
        return self.slots.running + self.held_running

    @property
    def waiting(self) -> int:
        return self.slots.waiting + self.held_waiting

    def complete(self, usage: Usage) -> None:
        """Serve one request: wait for a slot, prefill, decode. Raises :class:`Stopped`."""
        arrived = time.monotonic()
        self.slots.acquire()
        try:
            gate = self._gate
            gate.wait(self.service.prefill_s)
            first_token = time.monotonic()
            gate.wait(self.service.decode_s(usage.completion_tokens))
        finally:
            self.slots.release()
        if self.stopped:
            raise Stopped
        with self.lock:
            self.completions += 1
            self.prompt_tokens += usage.prompt_tokens
            self.generation_tokens += usage.completion_tokens
            self.ttft.observe(first_token - arrived)
            self.e2e.observe(time.monotonic() - arrived)

    def release(self) -> None:
        """Finish every request running now (later ones take their service time again)."""
        with self.lock:
            gate, self._gate = self._gate, threading.Event()
        gate.set()

    def stop(self) -> None:
        self.stopped = True
        self.slots.close()
        self._gate.set()

    def collect(self) -> Iterator[Metric]:
        m, labels = self.spec.metrics, {"model_name": self.model_name}
        with self.lock:
            for name, value in ((m.running, self.running), (m.waiting, self.waiting)):
                gauge = GaugeMetricFamily(name, f"{name} (emulated)", labels=list(labels))
                gauge.add_metric([self.model_name], value)
                yield gauge
            for name, value in (
                (m.completions_total, self.completions),
                (m.generation_tokens_total, self.generation_tokens),
            ):
                counter = CounterMetricFamily(name, f"{name} (emulated)", labels=list(labels))
                counter.add_metric([self.model_name], value)
                yield counter
            for hname, hist in ((m.ttft_seconds, self.ttft), (m.e2e_seconds, self.e2e)):
                if hname is not None:
                    yield hist.family(hname, labels)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _tokens(text: str) -> int:
    """A prompt's tokens, roughly (one a word): the emulator has no tokenizer."""
    return max(1, len(text.split()))


def _prompt_text(path: str, body: dict[str, Any]) -> str:
    if path == CHAT_PATH:
        messages = body.get("messages") or []
        return " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    prompt = body.get("prompt", "")
    return " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)


def _answer(path: str, model: str, n: int, usage: Usage) -> dict[str, Any]:
    """The OpenAI response shape of a completion that stopped at its length."""
    text = " ok" * usage.completion_tokens
    chat = path == CHAT_PATH
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice |= {"text": text, "logprobs": None}
    return {
        "id": f"{'chatcmpl' if chat else 'cmpl'}-emu-{n}",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        },
    }


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a router's timeout, a load generator
        stopping) is the client's business, not a traceback on the engine's log."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class EngineServer:
    """One emulated engine listening on ``host:port`` (port 0: an ephemeral one), from
    construction until :meth:`close`. :meth:`hang` makes it accept connections and never
    answer (a wedged engine: probe timeouts)."""

    def __init__(self, state: EngineState, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = state
        self.host = host
        self._hung = False
        self._requests = itertools.count(1)
        self._server = _Server((host, port), _handler(self))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"emulated-{state.spec.engine}", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def hang(self) -> None:
        self._hung = True

    def wait(self) -> None:
        """Until :meth:`close` (from another thread or a signal)."""
        self._thread.join()

    def close(self) -> None:
        """Stop: requests waiting or running end unanswered, the socket closes (connections
        are refused). Idempotent."""
        if self.state.stopped:
            return
        self.state.stop()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def held(self) -> bool:
        """Hung: hold the connection unanswered until the engine stops (then True)."""
        while self._hung and not self.state.stopped:
            time.sleep(0.05)
        return self._hung or self.state.stopped

    def complete(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Status and body of a completion. Raises :class:`Stopped`."""
        state = self.state
        if not state.serving:
            return 503, {"error": {"message": "the engine is dead", "code": 503}}
        model = body.get("model")
        if model is not None and model != state.model_name:
            message = f"The model `{model}` does not exist."
            return 404, {"error": {"message": message, "type": "NotFoundError", "code": 404}}
        asked = body.get("max_tokens", body.get("max_completion_tokens"))
        usage = Usage(_tokens(_prompt_text(path, body)), int(asked or DEFAULT_MAX_TOKENS))
        state.complete(usage)
        return 200, _answer(path, state.model_name, next(self._requests), usage)


def _handler(server: EngineServer) -> type[BaseHTTPRequestHandler]:
    state = server.state

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if server.held():
                return
            if self.path == state.spec.health_path:
                self._send(200 if state.serving else 503, b"", "application/json")
            elif self.path == state.spec.metrics.path:
                self._send(200, state.exposition(), CONTENT_TYPE_LATEST)
            elif self.path == MODELS_PATH:
                card = {"id": state.model_name, "object": "model", "owned_by": "gpucap"}
                self._json(200, {"object": "list", "data": [card]})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size) if size > 0 else b"{}"
            if server.held():
                return
            if self.path not in (COMPLETIONS_PATH, CHAT_PATH):
                self._json(404, {"detail": "Not Found"})
                return
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError("not an object")
                status, answer = server.complete(self.path, body)
            except (ValueError, TypeError) as exc:
                self._json(400, {"error": {"message": f"bad request: {exc}", "code": 400}})
                return
            except Stopped:
                return  # (the connection closes unanswered, as a killed engine's)
            self._json(status, answer)

        def _json(self, status: int, body: object) -> None:
            self._send(status, json.dumps(body).encode(), "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
            pass

    return Handler


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m runtimes.emulator", description=__doc__)
    p.add_argument("--engine", choices=[e.value for e in Engine], default=Engine.VLLM.value)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default: the engine's own")
    p.add_argument("--model", default="emulated/model", help="the served model's name")
    p.add_argument("--max-concurrency", type=int, default=16, help="requests run at once")
    p.add_argument("--prefill-s", type=float, default=ServiceTime.prefill_s)
    p.add_argument("--decode-tps", type=float, default=ServiceTime.decode_tokens_per_s)
    p.add_argument("--load-s", type=float, default=0.0, help="seconds before it listens")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spec = ENGINES[Engine(args.engine)]
    time.sleep(args.load_s)  # (loading its weights: nothing listens yet, as vLLM's server)
    state = EngineState(
        spec, args.model, ServiceTime(args.prefill_s, args.decode_tps), args.max_concurrency
    )
    server = EngineServer(state, args.host, spec.port if args.port is None else args.port)
    print(f"emulated {spec.engine.value} serving {args.model} at {server.url}", flush=True)
    # SIGTERM stops it as the engine stops (spec.stop): requests in flight end unanswered,
    # which is why gpucap drains a node before terminating it.
    signal.signal(signal.SIGTERM, lambda *_: server.close())
    try:
        server.wait()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
