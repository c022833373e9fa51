"""The daemon config's ``metrics`` section: defaults, bad input named by file/line/field, and
what ``cloud_wiring`` builds from it (no Prometheus needed: nothing here queries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.daemon import Daemon, cloud_wiring
from controlplane.prometheus_source import Credentials, PrometheusSource, QueryFailed
from schema.daemon_config import IN_FLIGHT, DaemonConfig
from schema.policy_file import PolicyError, parse_yaml_model

CONFIG = """\
provider_mode: sim
metrics:
  source: prometheus
  url: http://prometheus.internal:9090/prom
  timeout_s: 2.5
  max_age_s: 45
  queries:
    arrival_rate: sum by (customer, model) (rate(gateway_requests_total[1m]))
    tokens_per_s: null
"""


def parse(text: str) -> DaemonConfig:
    cfg, _ = parse_yaml_model(text, DaemonConfig, "daemon.yaml")
    return cfg


def test_defaults_keep_no_source():
    cfg = DaemonConfig()
    assert cfg.metrics.source == "none"
    assert cfg.metrics.queries.in_flight == IN_FLIGHT


def test_prometheus_section_builds_the_source_and_shares_the_daemon_metrics(tmp_path: Path):
    cfg = parse(CONFIG).model_copy(update={"database_url": f"sqlite:///{tmp_path / 'g.db'}"})
    wiring = cloud_wiring(cfg, tmp_path)
    source = wiring.metrics_source
    assert isinstance(source, PrometheusSource)
    assert source.url == "http://prometheus.internal:9090/prom"
    assert (source.timeout_s, source.max_age_s) == (2.5, 45)
    assert "gateway_requests_total" in source.queries.arrival_rate
    assert source.queries.in_flight == IN_FLIGHT  # unset queries keep the default (every engine)
    assert source.queries.tokens_per_s is None
    # Its failures are counted on the registry the daemon serves at /metrics.
    assert source.telemetry is wiring.telemetry
    assert Daemon(cfg, wiring).telemetry is wiring.telemetry


def test_source_none_observes_nothing(tmp_path: Path):
    cfg = DaemonConfig(provider_mode="sim", database_url=f"sqlite:///{tmp_path / 'g.db'}")
    source = cloud_wiring(cfg, tmp_path).metrics_source
    assert not isinstance(source, PrometheusSource)
    assert source.collect(0.0, {}) == {}


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("metrics:\n  source: graphite\n", 2, "metrics.source"),
        ("metrics:\n  timeout_s: 0\n", 2, "metrics.timeout_s"),
        ("metrics:\n  url: prometheus:9090\n", 2, "metrics.url"),
        ("metrics:\n  queries:\n    in_flight: ''\n", 3, "metrics.queries.in_flight"),
        ("metrics:\n  queries:\n    latency: x\n", 3, "metrics.queries.latency"),
    ],
)
def test_bad_metrics_config_names_line_and_field(text: str, line: int, field: str):
    with pytest.raises(PolicyError) as exc:
        parse(text)
    (problem,) = exc.value.problems
    assert str(problem).startswith(f"daemon.yaml:{line}:")
    assert field in str(problem)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (  # a password in the URL would be stored, and logged wherever the URL is
            "metrics:\n  url: https://gpucap:hunter2@prom.internal\n",
            "credentials in the URL",
        ),
        (  # basic auth over plain http to another host
            "metrics:\n  url: http://prom.internal:9090\n"
            "  basic_auth: {username: gpucap, password_file: /etc/gpucap/prom-password}\n",
            "would travel in clear text",
        ),
        (
            "metrics:\n  url: https://prom.internal\n  token_file: /t\n"
            "  basic_auth: {username: gpucap, password_file: /p}\n",
            "choose one way to authenticate",
        ),
        ("metrics:\n  url: https://prom.internal\n  tls_cert: /c.pem\n", "set both"),
        ("metrics:\n  basic_auth: {username: gpucap}\n", "password_file"),
    ],
)
def test_credentials_are_references_and_never_travel_in_clear(text: str, says: str):
    with pytest.raises(PolicyError) as exc:
        parse(text)
    (problem,) = exc.value.problems
    assert str(problem).startswith("daemon.yaml:")
    assert "metrics" in str(problem) and says in str(problem)
    assert "hunter2" not in str(problem)


def test_credentials_on_loopback_may_use_http():
    cfg = parse("metrics:\n  url: http://127.0.0.1:9090\n  token_file: /run/prom-token\n")
    assert cfg.metrics.token_file == "/run/prom-token"


def test_tls_files_are_read_beside_the_config_and_named_when_unreadable(tmp_path: Path):
    # Relative paths are the config file's directory's, as the policy files are.
    cfg = parse((CONFIG + "  tls_ca: prom-ca.pem\n").replace("http://", "https://"))
    with pytest.raises(ValueError, match=f"metrics.tls_ca: cannot read {tmp_path}/prom-ca.pem"):
        PrometheusSource.from_config(cfg.metrics, None, tmp_path)
    (tmp_path / "prom-ca.pem").write_text("not a certificate\n")
    with pytest.raises(ValueError, match="metrics.tls_ca: .* is not a PEM CA bundle"):
        PrometheusSource.from_config(cfg.metrics, None, tmp_path)


@pytest.mark.parametrize(
    ("text", "says"),
    [(None, "cannot read"), ("", "is empty"), ("s3cr3t\nvalue", "more than one line")],
)
def test_an_unusable_secret_file_is_a_named_failure_never_an_exception(
    tmp_path: Path, text: str | None, says: str
):
    secret = tmp_path / "token"
    if text is not None:
        secret.write_text(text)
    with pytest.raises(QueryFailed) as exc:
        Credentials(token_file=str(secret)).authorization()
    assert exc.value.reason == "credentials" and says in exc.value.detail
    assert "s3cr3t" not in exc.value.detail  # the secret is never repeated


def test_secrets_are_read_at_every_use(tmp_path: Path):
    secret = tmp_path / "password"
    secret.write_text("one\n")
    basic = Credentials(username="gpucap", password_file=str(secret))
    first = basic.authorization()
    secret.write_text("two")
    assert first == "Basic Z3B1Y2FwOm9uZQ==" and basic.authorization() == "Basic Z3B1Y2FwOnR3bw=="
