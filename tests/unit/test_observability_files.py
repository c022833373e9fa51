"""The alerting rules and the Grafana dashboard (deploy/): the rules pass ``promtool check
rules`` and their unit tests (``promtool test rules``: each alert fires on the series
that should fire it and not on the others); every dashboard panel's PromQL parses
(``promtool check rules`` on a throwaway recording rule per expression); and both name
only metrics the daemon exports (its registry's families, as /metrics renders them)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.telemetry import Metrics
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/gpucap-rules.yaml"
RULE_TESTS = ROOT / "deploy/prometheus/gpucap-rules.test.yaml"
DASHBOARD = ROOT / "deploy/grafana/gpucap.json"
# Grafana's variables, as a query would see them once Grafana has substituted them.
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$customer": ".*"}
METRIC = re.compile(r"\bgpucap_[a-z0-9_]+\b")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def exported_names() -> set[str]:
    """Every sample name the daemon's /metrics can carry, from its registry."""
    names: set[str] = set()
    for family in Metrics().registry.collect():
        suffixes = {
            "counter": ("_total", "_created"),
            "histogram": ("_bucket", "_sum", "_count", "_created"),
            "gauge": ("",),
        }[family.type]
        names.update(family.name + s for s in suffixes)
    return names


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # (a collapsed row holds its panels)
    return [p for p in out if p["type"] != "row"]


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, expression with Grafana's variables substituted), every target."""
    out = []
    for p in panels(json.loads(DASHBOARD.read_text())):
        for t in p["targets"]:
            expr = t["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            out.append((p["title"], expr))
    return out


def rule_exprs() -> list[tuple[str, str]]:
    doc = yaml.safe_load(RULES.read_text())
    return [(r["alert"], r["expr"]) for g in doc["groups"] for r in g["rules"]]


def test_rules_pass_promtool_check_and_their_unit_tests() -> None:
    promtool = tool("promtool", "prometheus")
    checked = run(promtool, "check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout
    tested = run(promtool, "test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_rule_tests_cover_every_alert_firing_and_not_firing() -> None:
    alerts = {name for name, _ in rule_exprs()}
    fired: set[str] = set()
    quiet: set[str] = set()
    for t in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in t["alert_rule_test"]:
            (fired if case["exp_alerts"] else quiet).add(case["alertname"])
    assert fired == alerts and quiet == alerts


def test_every_dashboard_expression_parses(tmp_path: Path) -> None:
    promtool = tool("promtool", "prometheus")
    exprs = dashboard_exprs()
    rules = [{"record": f"gpucap:dashboard:{i}", "expr": e} for i, (_, e) in enumerate(exprs)]
    path = tmp_path / "dashboard-exprs.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = run(promtool, "check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in checked.stdout


def test_a_bad_expression_fails_the_parse_check(tmp_path: Path) -> None:
    """The check above can fail: promtool rejects a broken recording rule."""
    promtool = tool("promtool", "prometheus")
    path = tmp_path / "bad.yaml"
    bad = {"record": "gpucap:bad", "expr": "sum by (customer (gpucap_usd_per_hour)"}
    path.write_text(yaml.safe_dump({"groups": [{"name": "bad", "rules": [bad]}]}))
    assert run(promtool, "check", "rules", str(path)).returncode != 0


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_only_metrics_the_daemon_exports_are_named(source: str) -> None:
    exported = exported_names()
    exprs = dashboard_exprs() if source == "dashboard" else rule_exprs()
    unknown = {(where, n) for where, e in exprs for n in METRIC.findall(e) if n not in exported}
    assert not unknown, unknown
    assert {n for _, e in exprs for n in METRIC.findall(e)}  # (it did find names)


def test_the_dashboard_has_the_panels_on_call_needs() -> None:
    dash = json.loads(DASHBOARD.read_text())
    named = {n for _, e in dashboard_exprs() for n in METRIC.findall(e)}
    for metric in (
        "gpucap_model_desired_replicas",
        "gpucap_model_ready_replicas",
        "gpucap_node_time_to_ready_seconds_bucket",
        "gpucap_usd_per_hour",
        "gpucap_warm_nodes",
        "gpucap_warm_usd_per_hour",
        "gpucap_provider_errors_total",
        "gpucap_job_last_success_timestamp_seconds",
        "gpucap_staging_progress_ratio",
    ):
        assert metric in named, metric
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert all(
        t["datasource"]["uid"] == "${datasource}" for p in panels(dash) for t in p["targets"]
    )
