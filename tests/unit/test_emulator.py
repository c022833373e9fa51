"""The engine emulator (runtimes/emulator.py): a request holds a slot for its prefill plus
its tokens at the decode rate; past the slots requests wait first come first served and
count as waiting; the latency histograms observe the queueing as well as the service; the
metrics page carries every name the default PromQL (runtimes/queries.py) reads, under each
engine's own names; completions and chat completions answer in the OpenAI shape; and
``python -m runtimes.emulator`` serves at the engine's paths."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtimes import ENGINES, queries
from runtimes.emulator import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    MODELS_PATH,
    EngineServer,
    EngineState,
    ServiceTime,
)
from schema.runtime import Engine

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def emulator() -> Iterator[Callable[..., EngineServer]]:
    started: list[EngineServer] = []

    def start(
        engine: Engine = Engine.VLLM, service: ServiceTime | None = None, slots: int | None = 4
    ) -> EngineServer:
        state = EngineState(ENGINES[engine], "org/m-7b", service or ServiceTime(), slots)
        started.append(EngineServer(state))
        return started[-1]

    yield start
    for s in started:
        s.close()


def call(server: EngineServer, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            status = r.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    return status, json.loads(raw) if raw.startswith((b"{", b"[")) else raw.decode()


def samples(server: EngineServer) -> Samples:
    status, text = call(server, server.state.spec.metrics.path)
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(server: EngineServer, name: str) -> float:
    return samples(server)[(name, (("model_name", "org/m-7b"),))]


def until(what: str, ok: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not ok():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_service_time_is_prefill_plus_tokens_at_the_decode_rate() -> None:
    st = ServiceTime(prefill_s=0.05, decode_tokens_per_s=200)
    assert st.of(100) == pytest.approx(0.55)
    assert ServiceTime(0.1, float("inf")).of(1000) == 0.1
    with pytest.raises(ValueError):
        ServiceTime(decode_tokens_per_s=0)


def test_past_the_slots_requests_wait_in_order_and_their_wait_is_observed(
    emulator: Callable[..., EngineServer],
) -> None:
    """One slot, 0.2 s a request (0.1 s prefill, 10 tokens at 100/s), three arrive in turn:
    one runs, two wait; they finish in arrival order, the last after 0.6 s."""
    server = emulator(service=ServiceTime(0.1, 100), slots=1)
    m = server.state.spec.metrics
    done: list[int] = []

    def send(n: int) -> None:
        status, _ = call(server, COMPLETIONS_PATH, {"prompt": "hi", "max_tokens": 10 + n})
        assert status == 200
        done.append(n)

    slots, threads, seen = server.state.slots, [], []  # seen: when each had arrived
    first = time.monotonic()
    for n in range(3):
        threads.append(threading.Thread(target=send, args=(n,)))
        threads[-1].start()
        until(f"request {n} arrived", lambda n=n: slots.running + slots.waiting == n + 1)
        seen.append(time.monotonic())
    assert (value(server, m.running), value(server, m.waiting)) == (1.0, 2.0)
    for t in threads:
        t.join(10)
    assert done == [0, 1, 2]
    assert (value(server, m.running), value(server, m.waiting)) == (0.0, 0.0)
    assert value(server, m.completions_total) == 3.0
    assert value(server, m.generation_tokens_total) == 10 + 11 + 12
    assert m.ttft_seconds is not None and m.e2e_seconds is not None
    # Request n started once those before it had run (0.2, 0.21 s: 10 tokens and more at
    # 100/s, after 0.1 s of prefill), no sooner than the first arrived; it had arrived by
    # seen[n]. So the observed latencies are at least these, queueing included:
    service = [0.1 + (10 + n) / 100 for n in range(3)]
    e2e = sum(first + sum(service[: n + 1]) - seen[n] for n in range(3))
    ttft = sum(first + sum(service[:n]) + 0.1 - seen[n] for n in range(3))
    assert e2e > sum(service) + 0.4  # (the wait behind the others counts)
    assert value(server, f"{m.e2e_seconds}_sum") >= e2e
    assert value(server, f"{m.ttft_seconds}_sum") >= ttft
    assert value(server, f"{m.e2e_seconds}_count") == 3.0


@pytest.mark.parametrize("kind", list(Engine))
def test_the_page_has_every_name_the_default_queries_read(
    kind: Engine, emulator: Callable[..., EngineServer]
) -> None:
    server = emulator(kind)
    m = server.state.spec.metrics
    page = samples(server)
    names = {name for name, _ in page}
    read = " ".join(
        [
            queries.completion_rate(engines=[m]),
            queries.arrival_rate(engines=[m]),
            queries.in_flight([m]),
            queries.queue_depth([m]),
            queries.tokens_per_s(engines=[m]),
            queries.freshness([m]),
        ]
    )
    # (Every engine's names start with its own: vllm:, sglang:, trtllm_.)
    tokens = re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", read)
    wanted = {t for t in tokens if t.startswith(kind.value)}
    assert wanted and wanted <= names
    assert {f"{m.ttft_seconds}_bucket", f"{m.e2e_seconds}_bucket"} <= names
    assert all(labels == (("model_name", "org/m-7b"),) for n, labels in page if "bucket" not in n)


def test_completions_answer_in_the_openai_shape(emulator: Callable[..., EngineServer]) -> None:
    server = emulator(service=ServiceTime(0.0, float("inf")))
    status, text = call(server, COMPLETIONS_PATH, {"model": "org/m-7b", "prompt": "a b c"})
    assert status == 200 and text["object"] == "text_completion"
    assert text["usage"] == {"prompt_tokens": 3, "completion_tokens": 16, "total_tokens": 19}
    assert text["choices"][0]["finish_reason"] == "length"
    body = {"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 2}
    status, chat = call(server, CHAT_PATH, body)
    assert status == 200 and chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["usage"]["total_tokens"] == 4
    assert call(server, MODELS_PATH)[1]["data"][0]["id"] == "org/m-7b"
    assert call(server, COMPLETIONS_PATH, {"model": "other", "prompt": "x"})[0] == 404
    assert call(server, COMPLETIONS_PATH, ["not", "an", "object"])[0] == 400
    server.state.serving = False
    assert call(server, COMPLETIONS_PATH, {"prompt": "x"})[0] == 503
    assert call(server, server.state.spec.health_path)[0] == 503


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_module_serves_an_engine_from_its_command_line() -> None:
    spec, port = ENGINES[Engine.TRTLLM], _free_port()
    argv = [sys.executable, "-m", "runtimes.emulator", "--engine", "trtllm", "--port", str(port)]
    proc = subprocess.Popen([*argv, "--model", "m", "--max-concurrency", "2"])
    try:
        base = f"http://127.0.0.1:{port}"

        def health() -> bool:
            try:
                with urllib.request.urlopen(base + spec.health_path, timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False

        until("the emulator serves", health)
        with urllib.request.urlopen(base + spec.metrics.path, timeout=5) as r:
            assert spec.metrics.running in r.read().decode()
    finally:
        proc.terminate()
        proc.wait(10)
