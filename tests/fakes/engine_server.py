"""A wire-level stand-in for an inference engine's OpenAI-compatible server, for what a
control plane touches: ``GET /health`` (200 while serving, 503 once told the engine is
dead), Prometheus text exposition at the engine's metrics path with the engine's own names
(taken from its :class:`runtimes.base.EngineSpec`, each series labelled ``model_name`` as
vLLM labels it), and ``POST /v1/completions``, which counts a request in flight while it
"runs" (``request_s``, or until :meth:`FakeEngine.release`), so in-flight counts are real.

One :class:`FakeEngine` is one server on 127.0.0.1 on an ephemeral port. Controls:
``serving`` (False: /health answers 503), ``in_flight`` and ``waiting`` (settable),
:meth:`kill` (the socket closes: connections are refused), :meth:`hang` (connections are
accepted, never answered: probe timeouts), :meth:`close`. A context manager;
:func:`fake_engines` starts any number and closes them on exit (a fixture's body).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from runtimes import ENGINES
from runtimes.base import EngineSpec
from schema.runtime import Engine

COMPLETIONS_PATH = "/v1/completions"
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
# vLLM's time-to-first-token buckets, the low end (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class FakeEngine:
    """One engine server; starts listening on construction."""

    def __init__(
        self,
        engine: Engine | str = Engine.VLLM,
        *,
        model_name: str = "fake/model",
        request_s: float = 0.05,
        port: int = 0,  # 0: an ephemeral one; a port again: an engine restarted in place
    ) -> None:
        self.spec: EngineSpec = ENGINES[Engine(engine)]
        self.model_name = model_name
        self.request_s = request_s  # how long a completion "runs"
        self.serving = True
        self.in_flight = 0  # requests running (completions add themselves while they run)
        self.waiting = 0
        self.completions = 0
        self.generation_tokens = 0
        self.ttft: list[float] = []  # observations, seconds
        self.lock = threading.Lock()
        self._gate = threading.Event()  # set: the requests running now finish
        self._hung = False
        self._stopped = False
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"fake-{self.spec.engine}", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    # ------------------------------------------------------------------ controls
    def release(self) -> None:
        """Finish every completion running now (later ones run ``request_s`` again)."""
        with self.lock:
            gate, self._gate = self._gate, threading.Event()
        gate.set()

    def hang(self) -> None:
        """Accept connections and read requests, never answer (until :meth:`close`)."""
        self._hung = True

    def kill(self) -> None:
        """Stop answering: the listening socket closes, so connections are refused."""
        if self._stopped:
            return
        self._stopped = True
        self._gate.set()  # requests in flight end without an answer
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def close(self) -> None:
        self.kill()

    def __enter__(self) -> FakeEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ wire
    def exposition(self) -> str:
        """The metrics page, in Prometheus' text format (what ``GET <metrics path>`` sends)."""
        m = self.spec.metrics
        labels = f'model_name="{_label(self.model_name)}"'
        with self.lock:
            gauges = ((m.running, self.in_flight), (m.waiting, self.waiting))
            counters = (
                (m.completions_total, self.completions),
                (m.generation_tokens_total, self.generation_tokens),
            )
            ttft = list(self.ttft)
        lines: list[str] = []
        for kind, series in (("gauge", gauges), ("counter", counters)):
            for name, value in series:
                lines += [f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]
        if m.ttft_seconds is not None:
            name = m.ttft_seconds
            lines.append(f"# TYPE {name} histogram")
            for le in (*TTFT_BUCKETS, float("inf")):
                bound = "+Inf" if le == float("inf") else repr(le)
                n = sum(1 for x in ttft if x <= le)
                lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(n)}')
            lines.append(f"{name}_sum{{{labels}}} {float(sum(ttft))}")
            lines.append(f"{name}_count{{{labels}}} {float(len(ttft))}")
        return "\n".join(lines) + "\n"

    def _complete(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Run one completion; None when the engine stopped while it ran."""
        max_tokens = int(body.get("max_tokens") or 16)
        started = time.monotonic()
        with self.lock:
            self.in_flight += 1
            gate = self._gate
        try:
            gate.wait(self.request_s)
        finally:
            with self.lock:
                self.in_flight -= 1
        if self._stopped:
            return None
        with self.lock:
            self.completions += 1
            self.generation_tokens += max_tokens
            self.ttft.append(time.monotonic() - started)
        return {
            "id": f"cmpl-fake-{self.completions}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "text": " ok" * max_tokens, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": max_tokens},
        }

    def _held(self) -> bool:
        """Hung: hold the connection unanswered until the engine stops."""
        while self._hung and not self._stopped:
            time.sleep(0.05)
        return self._hung or self._stopped


def _handler(engine: FakeEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if engine._held():
                return
            if self.path == engine.spec.health_path:
                self._answer(200 if engine.serving else 503, b"", "application/json")
            elif self.path == engine.spec.metrics.path:
                self._answer(200, engine.exposition().encode(), TEXT_FORMAT)
            else:
                self._answer(404, b'{"detail":"Not Found"}', "application/json")

        def do_POST(self) -> None:  # noqa: N802
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size) if size > 0 else b"{}"
            if engine._held():
                return
            if self.path != COMPLETIONS_PATH:
                self._answer(404, b'{"detail":"Not Found"}', "application/json")
                return
            if not engine.serving:
                self._answer(503, b'{"error":"engine dead"}', "application/json")
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._answer(400, b'{"error":"bad JSON"}', "application/json")
                return
            answer = engine._complete(body if isinstance(body, dict) else {})
            if answer is not None:
                self._answer(200, json.dumps(answer).encode(), "application/json")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


@contextlib.contextmanager
def fake_engines() -> Iterator[Callable[..., FakeEngine]]:
    """A factory of fake engines (``start("sglang", model_name=...)``), all closed on exit;
    a test module's fixture wraps it (``with fake_engines() as start: yield start``)."""
    started: list[FakeEngine] = []

    def start(engine: Engine | str = Engine.VLLM, **kw: Any) -> FakeEngine:
        started.append(FakeEngine(engine, **kw))
        return started[-1]

    try:
        yield start
    finally:
        for e in started:
            e.close()
