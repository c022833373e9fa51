"""A real daemon process and its SIGHUP reload (issue 26 item 7): a half-written policy file
that still parses but lost a model is refused, logged and recorded as an event, and the last
good policy stays active; a change applied through the API (``gpucap policy apply``) is not
undone by the next SIGHUP while the file is unchanged."""

from __future__ import annotations

import json
import signal
import time
from importlib import resources
from pathlib import Path

import pytest

from tests.e2e.test_daemon import cli, start

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("daemon")]


def _until_logged(log: Path, event: str, after: int) -> list[dict[str, object]]:
    """The daemon's JSON log lines of ``event`` past line ``after`` (waits up to 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        lines = [json.loads(x) for x in log.read_text().splitlines()[after:] if x.startswith("{")]
        found = [x for x in lines if x.get("event") == event and "file" in x]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def test_sighup_refuses_a_file_that_lost_a_model_and_keeps_an_api_change(tmp_path: Path):
    good = resources.files("controlplane.demo").joinpath("policy.yaml").read_text()
    policy = tmp_path / "demo.yaml"
    policy.write_text(good)
    config = tmp_path / "daemon.yaml"
    config.write_text(
        "apiVersion: gpucap.dev/v1\nkind: DaemonConfig\n"
        "provider_mode: sim\n"
        f"database_url: sqlite:///{tmp_path / 'db.sqlite'}\n"
        "policies: [demo.yaml]\n"
        "intervals: {collect_s: 1, decide_s: 1, place_s: 1, reconcile_s: 1}\n"
    )
    d = start(tmp_path, "--config", str(config), "--log-format", "json")
    try:
        before = cli(d.addr, "policy", "show", "demo")
        # A save cut short: the last model's entry and everything after it are gone.
        policy.write_text(good[: good.index("  - name: coder-32b")])
        seen = len(d.log.read_text().splitlines())
        d.proc.send_signal(signal.SIGHUP)
        (refused,) = _until_logged(d.log, "policy.refused", seen)
        assert refused["file"] == str(policy.resolve())
        problems = refused["problems"]
        assert isinstance(problems, list)
        assert any("would delete model coder-32b" in str(p) for p in problems)
        assert cli(d.addr, "policy", "show", "demo") == before
        models = {m["name"]: m for m in cli(d.addr, "models")["models"]}
        assert "coder-32b" in models and "deleted_at" not in models["coder-32b"]
        kinds = [e["kind"] for e in cli(d.addr, "events")["events"]]
        assert "policy.refused" in kinds

        # On-call raises a bound through the API; the file is put back as it was.
        policy.write_text(good)
        changed = tmp_path / "changed.yaml"
        changed.write_text(good.replace("max_replicas: 12", "max_replicas: 14"))
        applied = cli(d.addr, "policy", "apply", str(changed), "--as", "oncall@ops")
        assert applied["policy"]["version"] == before["version"] + 1
        seen = len(d.log.read_text().splitlines())
        d.proc.send_signal(signal.SIGHUP)
        (kept,) = _until_logged(d.log, "policy.kept", seen)
        assert "applied through the API by oncall@ops, stays active" in str(kept["detail"])
        active = cli(d.addr, "policy", "show", "demo")
        assert (active["version"], active["applied_by"]) == (before["version"] + 1, "oncall@ops")
    finally:
        assert d.stop() == 0
