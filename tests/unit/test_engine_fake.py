"""The fake inference engine (tests/fakes/engine_server.py) answers as the engines do: its
metrics page parses with prometheus_client's own parser under each engine's names, a
completion counts in flight while it runs, and gpucap's HTTP health probe reads it as
serving, dead (503), hung (timeout) and killed (connection refused)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtimes import ENGINES
from schema.runtime import Engine
from tests.fakes.engine_server import COMPLETIONS_PATH, FakeEngine, fake_engines


@pytest.fixture
def fake_engine() -> Iterator[Callable[..., FakeEngine]]:
    with fake_engines() as start:
        yield start


def get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def samples(engine: FakeEngine) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The engine's metrics page as prometheus_client parses it: (name, labels) -> value."""
    status, body = get(engine.url + engine.spec.metrics.path)
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def complete(engine: FakeEngine, max_tokens: int) -> dict[str, Any]:
    data = json.dumps({"model": engine.model_name, "prompt": "hi", "max_tokens": max_tokens})
    req = urllib.request.Request(
        engine.url + COMPLETIONS_PATH, data.encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        answer: dict[str, Any] = json.loads(r.read())
        return answer


@pytest.mark.parametrize("kind", list(Engine))
def test_metrics_carry_the_engines_own_names(
    kind: Engine, fake_engine: Callable[..., FakeEngine]
) -> None:
    engine = fake_engine(kind, model_name="org/m-7b")
    engine.in_flight, engine.waiting = 3, 2
    m = ENGINES[kind].metrics
    label = (("model_name", "org/m-7b"),)
    got = samples(engine)
    assert got[(m.running, label)] == 3.0
    assert got[(m.waiting, label)] == 2.0
    assert got[(m.completions_total, label)] == 0.0
    assert got[(m.generation_tokens_total, label)] == 0.0
    assert m.ttft_seconds is not None and got[(f"{m.ttft_seconds}_count", label)] == 0.0
    if m.path != "/metrics":  # (trtllm: /metrics is not the Prometheus page)
        assert get(engine.url + "/metrics")[0] == 404


def test_a_completion_is_in_flight_while_it_runs(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine(request_s=30.0)
    m, label = engine.spec.metrics, (("model_name", engine.model_name),)
    answers: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda n=n: answers.append(complete(engine, n))) for n in (4, 5, 6)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while samples(engine)[(m.running, label)] != 3.0:
        assert time.monotonic() < deadline, "three completions never showed in flight"
        time.sleep(0.02)
    engine.release()
    for t in threads:
        t.join(10)
    assert sorted(a["usage"]["completion_tokens"] for a in answers) == [4, 5, 6]
    got = samples(engine)
    assert got[(m.running, label)] == 0.0
    assert got[(m.completions_total, label)] == 3.0
    assert got[(m.generation_tokens_total, label)] == 15.0
    assert got[(f"{m.ttft_seconds}_count", label)] == 3.0
    assert got[(f"{m.ttft_seconds}_bucket", (("le", "+Inf"), *label))] == 3.0


def test_health_reads_serving_dead_hung_and_killed(fake_engine: Callable[..., FakeEngine]) -> None:
    engine = fake_engine()
    health = engine.url + engine.spec.health_path
    assert get(health)[0] == 200
    engine.serving = False  # the engine died; the server still answers
    assert get(health)[0] == 503
    engine.serving = True
    engine.hang()
    started = time.monotonic()
    with pytest.raises(TimeoutError):  # accepted, never answered
        urllib.request.urlopen(health, timeout=0.5)
    assert time.monotonic() - started >= 0.45
    engine.kill()
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(health, timeout=2)
    assert isinstance(err.value.reason, ConnectionRefusedError)
