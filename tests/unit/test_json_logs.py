"""Each JSON log line reaches stderr in one write, newline included. The e2e demo test once
read a log line with the demo banner glued to its end: the line had been written as two
writes (the message, then its newline), and the banner, written by another thread without
the logger's lock, landed between them."""

from __future__ import annotations

import json
import sys

import pytest
import structlog

from controlplane.telemetry import configure_logging


class _Recorder:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_each_log_line_is_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    monkeypatch.setattr(sys, "stderr", recorder)
    configure_logging("info", json=True)
    log = structlog.get_logger("test")
    for i in range(3):
        log.info("tick", i=i)
    assert len(recorder.writes) == 3
    for i, text in enumerate(recorder.writes):
        assert text.endswith("\n") and text.count("\n") == 1
        assert json.loads(text)["i"] == i
