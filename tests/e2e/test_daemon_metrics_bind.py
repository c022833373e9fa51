"""A real daemon refuses to serve /metrics off loopback without TLS and a token, as it refuses
the gRPC API (issue 26 item 7), and says which address and what is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_daemon import GPUCAP, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]


def test_refuses_metrics_on_a_public_address_without_tls_and_token(tmp_path: Path) -> None:
    grpc = f"127.0.0.1:{free_port()}"
    out = subprocess.run(
        [*GPUCAP, "daemon", "--demo", "--grpc-addr", grpc, "--metrics-addr", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPUCAP_STATE_DIR": str(tmp_path)},
    )
    assert out.returncode != 0
    said = " ".join(out.stderr.split())  # (the console wraps long lines)
    assert (
        "cannot start: metrics_addr (/metrics): refusing to listen on non-loopback address "
        "'0.0.0.0:0' without TLS (certificate + key) and an API token"
    ) in said
