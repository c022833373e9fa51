"""Node bootstrap: the rendered user data for every engine x cloud x single node and gang is
valid cloud-config by cloud-init's own schema validator; the script passes shellcheck; the
node's files read back as rendered (bash sources node.env, the engine's arguments one per
line); nothing secret of the policy goes in; and the script itself, run on this machine with
stand-ins for the GPU driver and docker, reports its phases to a real HTTP endpoint, or
reports the failure and exits non-zero."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from bootstrap import NodeBoot, UserDataTooLarge, render
from bootstrap.render import script
from controlplane.api.fit import usable_pools
from controlplane.node_boot import node_boot
from runtimes import Gang, resolve
from schema.catalog import parse_gpu_shape
from schema.policy_file import parse_policy
from schema.runtime import Engine, Runtime
from schema.types import Cloud, NodePhase
from tests.policy_texts import example_policy
from tests.tools import tool


def boot(engine: Engine, cloud: Cloud, shape: str, rank: int = 0) -> NodeBoot:
    s = parse_gpu_shape(shape)
    gang = Gang(s.nodes, rank, "@GPUCAP_LEADER@") if s.nodes > 1 else None
    return NodeBoot(
        node_id="n-1",
        customer="acme",
        model="llama",
        cloud=cloud,
        gpus=s.gpus,
        launch=resolve(Runtime(engine=engine), s, "/mnt/gpucap/weights", gang),
        weights_uri="s3://acme-models/llama/",
        report_url="https://gpucap.example:8443/v1/node-phases",
        token="single-use-token",
        leader="10.0.0.5" if rank else None,
    )


CASES = [
    (engine, cloud, shape, rank)
    for engine in Engine
    for cloud in Cloud
    for shape, rank in (("8xH100", 0), ("2x8xH100", 0), ("2x8xH100", 1))
    if engine != Engine.TRTLLM or shape == "8xH100"
]


@pytest.mark.parametrize(("engine", "cloud", "shape", "rank"), CASES)
def test_every_rendered_document_is_valid_cloud_config(
    tmp_path: Path, engine: Engine, cloud: Cloud, shape: str, rank: int
) -> None:
    path = tmp_path / "user-data"
    path.write_text(render(boot(engine, cloud, shape, rank)))
    out = subprocess.run(
        [tool("cloud-init"), "schema", "-c", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Valid cloud-config" in out.stdout


def test_the_validator_refuses_a_broken_document(tmp_path: Path) -> None:
    """(The check above can fail: a document cloud-init would reject is rejected.)"""
    path = tmp_path / "user-data"
    path.write_text("#cloud-config\nwrite_files: 3\nruncmd: {a: 1}\n")
    out = subprocess.run([tool("cloud-init"), "schema", "-c", str(path)], capture_output=True)
    assert out.returncode != 0


def test_the_bootstrap_script_passes_shellcheck(tmp_path: Path) -> None:
    path = tmp_path / "node.sh"
    path.write_text(script())
    out = subprocess.run([tool("shellcheck"), str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def files_of(text: str) -> dict[str, str]:
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert doc["runcmd"] == [["/opt/gpucap/bootstrap.sh"]]
    return {f["path"]: f["content"] for f in doc["write_files"]}


def test_the_nodes_files_read_back_as_rendered(tmp_path: Path) -> None:
    b = boot(Engine.SGLANG, Cloud.GCP, "2x8xH100", rank=1)
    files = files_of(render(b))
    assert files["/opt/gpucap/bootstrap.sh"] == script()
    assert files["/etc/gpucap/engine.args"].splitlines() == b.launch.argv
    assert files["/etc/gpucap/node.token"] == "single-use-token"
    env = tmp_path / "node.env"
    env.write_text(files["/etc/gpucap/node.env"])
    out = subprocess.run(
        ["bash", "-c", f'. "{env}"; printf "%s|" "$IMAGE" "$WEIGHTS_URI" "$RANK" "$LEADER"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "lmsysorg/sglang:latest|s3://acme-models/llama/|1|10.0.0.5|"


def test_a_worker_needs_its_leader_and_user_data_has_a_size_limit() -> None:
    b = boot(Engine.VLLM, Cloud.AWS, "2x8xH100", rank=1)
    with pytest.raises(ValueError, match="leader"):
        render(NodeBoot(**{**b.__dict__, "leader": None}))
    big = Runtime(args=["x" * 900] * 20)
    launch = resolve(big, parse_gpu_shape("8xH100"), "/m")
    with pytest.raises(UserDataTooLarge, match="16384"):
        render(NodeBoot(**{**boot(Engine.VLLM, Cloud.AWS, "8xH100").__dict__, "launch": launch}))


def test_the_example_policys_nodes_carry_no_credential() -> None:
    policy = parse_policy(example_policy()).policy
    for model in policy.models:
        for pool in usable_pools(policy, model):
            text = render(node_boot(policy.customer, model, pool, "n-1"))
            for acct in policy.accounts:
                for ref in acct.credentials.model_dump(exclude_none=True).values():
                    assert str(ref) not in text, (model.name, pool.id, ref)
            assert "arn:aws:iam" not in text


# ------------------------------------------------------------------ the script, run here


class _Reports(BaseHTTPRequestHandler):
    got: list[dict[str, object]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Reports.got.append({**json.loads(body), "auth": self.headers["Authorization"]})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stub(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_node(
    tmp_path: Path, gpus_seen: int, report_url: str, token: str, node_id: str = "n-1"
) -> tuple[int, str]:
    """node.sh with this machine's bash and curl, reporting to ``report_url``; nvidia-smi,
    systemctl and docker are stand-ins (no GPU, no container runtime here): ``docker run``
    starts a real HTTP server on the engine's port that answers its health path."""
    port = _free_port()
    conf, bindir, www = tmp_path / "conf", tmp_path / "bin", tmp_path / "www"
    for d in (conf, bindir, www):
        d.mkdir()
    (www / "health").write_text("ok")
    b = NodeBoot(
        **{
            **boot(Engine.VLLM, Cloud.AWS, "8xH100").__dict__,
            "node_id": node_id,
            "token": token,
            "weights_uri": None,
            "report_url": report_url,
            "launch": resolve(Runtime(port=port), parse_gpu_shape("8xH100"), "/m"),
            "ready_timeout_s": 60,
        }
    )
    for path, content in files_of(render(b)).items():
        (conf / Path(path).name).write_text(content)
    _stub(bindir, "nvidia-smi", f'for i in $(seq {gpus_seen}); do echo "NVIDIA H100"; done\n')
    _stub(bindir, "systemctl", "exit 0\n")
    _stub(
        bindir,
        "docker",
        f"""case $1 in
  info|pull|rm) exit 0 ;;
  run) nohup python3 -m http.server {port} --bind 127.0.0.1 --directory {www} \\
         >/dev/null 2>&1 & echo $! > {tmp_path}/engine.pid; echo engine ;;
  inspect) echo true ;;
  logs) echo "engine log" ;;
esac
""",
    )
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "GPUCAP_CONF": str(conf)}
    try:
        out = subprocess.run(
            ["bash", str(conf / "bootstrap.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        pid = tmp_path / "engine.pid"
        if pid.exists():
            subprocess.run(["kill", pid.read_text().strip()], check=False)
    return out.returncode, out.stderr


def run_script(tmp_path: Path, gpus_seen: int) -> tuple[int, list[str], str]:
    """:func:`run_node` reporting to a plain HTTP endpoint that keeps what it got."""
    reports = HTTPServer(("127.0.0.1", 0), _Reports)
    threading.Thread(target=reports.serve_forever, daemon=True).start()
    _Reports.got = []
    try:
        url = f"http://127.0.0.1:{reports.server_port}/v1/node-phases"
        code, err = run_node(tmp_path, gpus_seen, url, "single-use-token")
    finally:
        reports.shutdown()
    assert all(r["auth"] == "Bearer single-use-token" for r in _Reports.got)
    assert all(r["node_id"] == "n-1" for r in _Reports.got)
    return code, [str(r["phase"]) for r in _Reports.got], err


def test_the_script_reports_each_phase_until_the_engine_serves(tmp_path: Path) -> None:
    code, phases, err = run_script(tmp_path, gpus_seen=8)
    assert code == 0, err
    assert phases == [
        "booted",
        "driver_ok",
        "image_pulled",
        "weights_fetched",
        "engine_started",
        "ready",
    ]


def test_a_node_missing_gpus_reports_failed_and_exits(tmp_path: Path) -> None:
    code, phases, err = run_script(tmp_path, gpus_seen=4)
    assert code == 1 and phases == ["booted", "failed"]
    assert "sees 4 GPUs, the shape has 8" in err


def test_every_phase_the_script_reports_is_one_the_daemon_takes() -> None:
    sent = set(re.findall(r"^\s*(?:report|fail\(\) \{ report) (\w+)", script(), re.M))
    assert sent == {p.value for p in NodePhase}
