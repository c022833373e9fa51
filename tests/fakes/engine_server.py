"""The engine emulator (``runtimes/emulator.py``) as a test fake: one server on 127.0.0.1 on
an ephemeral port, a completion "running" ``request_s`` (or until :meth:`FakeEngine.release`)
with no limit on how many run at once, so in-flight counts are real.

Controls: ``serving`` (False: /health answers 503), ``in_flight`` and ``waiting`` (settable:
the requests the engine reports beyond the ones it serves), :meth:`kill` (the socket closes:
connections are refused), :meth:`hang` (connections are accepted, never answered: probe
timeouts), :meth:`close`. A context manager; :func:`fake_engines` starts any number and
closes them on exit (a fixture's body).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

from runtimes import ENGINES
from runtimes.emulator import COMPLETIONS_PATH, EngineServer, EngineState, ServiceTime
from schema.runtime import Engine

__all__ = ["COMPLETIONS_PATH", "FakeEngine", "fake_engines"]


class FakeEngine(EngineServer):
    """One emulated engine; starts listening on construction."""

    def __init__(
        self,
        engine: Engine | str = Engine.VLLM,
        *,
        model_name: str = "fake/model",
        request_s: float = 0.05,
        port: int = 0,  # 0: an ephemeral one; a port again: an engine restarted in place
    ) -> None:
        service = ServiceTime(prefill_s=request_s, decode_tokens_per_s=math.inf)
        state = EngineState(ENGINES[Engine(engine)], model_name, service, slots=None)
        super().__init__(state, "127.0.0.1", port)
        self.spec = state.spec
        self.model_name = model_name

    @property
    def serving(self) -> bool:
        return self.state.serving

    @serving.setter
    def serving(self, value: bool) -> None:
        self.state.serving = value

    @property
    def in_flight(self) -> int:
        return self.state.running

    @in_flight.setter
    def in_flight(self, value: int) -> None:
        self.state.held_running = value - self.state.slots.running

    @property
    def waiting(self) -> int:
        return self.state.waiting

    @waiting.setter
    def waiting(self, value: int) -> None:
        self.state.held_waiting = value - self.state.slots.waiting

    def release(self) -> None:
        self.state.release()

    def kill(self) -> None:
        self.close()


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
