"""Library logs (the stdlib ``logging`` root: botocore, grpc, apscheduler, alembic) go
through structlog: every line JSON, a traceback one field of one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LIBRARY_LOG = """
import logging, warnings
from controlplane.telemetry import configure_logging
configure_logging("info", json=True)
configure_logging("info", json=True)  # (again: still one handler, one line per record)
try:
    raise ValueError("no such bucket")
except ValueError:
    logging.getLogger("botocore.endpoint").error("request failed", exc_info=True)
logging.getLogger("apscheduler.scheduler").info("an APScheduler run line, filtered")
warnings.warn("old call", DeprecationWarning, stacklevel=1)
"""


def test_a_library_log_with_a_traceback_is_one_json_line() -> None:
    """A stdlib logger's record (botocore's, any library's) goes through structlog: one
    JSON line, its traceback in one field; warnings too; APScheduler's INFO runs not."""
    out = subprocess.run(
        [sys.executable, "-W", "always", "-c", LIBRARY_LOG],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 2, out.stderr
    failed, warned = (json.loads(line) for line in lines)
    assert failed["event"] == "request failed"
    assert (failed["level"], failed["logger"]) == ("error", "botocore.endpoint")
    assert failed["exception"].startswith("Traceback (most recent call last):")
    assert failed["exception"].rstrip().endswith("ValueError: no such bucket")
    assert "timestamp" in failed
    assert warned["logger"] == "py.warnings" and "old call" in warned["event"]
