"""The daemon of an AWS-only install (``gpucap[aws]``): a real process that sees none of the
GCP or OCI SDKs (``tests/extras.py``), on real clouds' adapters pointed at a closed port.
It starts, gets ready, runs its AWS account's jobs through boto3, and says once, naming the
extra to install, that its GCP account cannot be served; then it stops cleanly."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests import extras

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]

POLICY = """\
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    owner: customer
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap-provisioner
  - name: acme-gcp
    cloud: gcp
    owner: customer
    regions: [us-central1]
    credentials:
      project: acme-inference
      service_account: gpucap@acme-inference.iam.gserviceaccount.com
models:
  - name: llama-8b
    shapes:
      - shape: 1xH100
        max_concurrency: 32
    min_replicas: 0
    max_replicas: 2
    latency_slo_ms: 1500
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def events(log: Path) -> list[dict]:
    out = []
    for line in log.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def test_an_aws_only_install_runs_its_aws_account_and_names_the_gcp_extra(tmp_path: Path):
    (tmp_path / "acme.yaml").write_text(POLICY)
    closed = free_port()  # nothing listens there: every cloud call fails to connect
    config = tmp_path / "daemon.yaml"
    config.write_text(
        "policies: [acme.yaml]\n"
        f"endpoints: {{aws: 'http://127.0.0.1:{closed}', gcp: 'http://127.0.0.1:{closed}'}}\n"
        "intervals: {collect_s: 1, decide_s: 1, place_s: 1, reconcile_s: 1, offerings_s: 1}\n"
    )
    metrics = free_port()
    env = extras.env_with(["aws"])
    env.update(
        GPUCAP_STATE_DIR=str(tmp_path / "state"),
        GPUCAP_DB_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_EC2_METADATA_DISABLED="true",
    )
    log = tmp_path / "daemon.log"
    argv = extras.command(
        "controlplane.cli.main",
        *("daemon", "--config", str(config)),
        *("--grpc-addr", f"127.0.0.1:{free_port()}", "--metrics-addr", f"127.0.0.1:{metrics}"),
    )
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        ready = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz", timeout=2) as r:
                    ready = json.loads(r.read())
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        assert ready is not None and ready["ready"], log.read_text()[-3000:]

        def unavailable() -> list[dict]:
            return [e for e in events(log) if e.get("event") == "provider.unavailable"]

        while time.monotonic() < deadline and not unavailable():
            time.sleep(0.5)
        # A few more ticks: the GCP account is reported once, not every tick.
        time.sleep(3)
        said = unavailable()
        assert [(e["account"], e["cloud"]) for e in said] == [("acme-gcp", "gcp")], said
        assert "pip install 'gpucap[gcp]'" in said[0]["error"]
        # The AWS account ran through boto3: its calls reached the (closed) endpoint.
        text = log.read_text()
        assert "EndpointConnectionError" in text
        assert "No module named" not in text
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0, log.read_text()[-3000:]
