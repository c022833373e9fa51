"""Node bootstrap: the rendered user data for every engine x cloud x single node and gang is
valid cloud-config by cloud-init's own schema validator, stays under EC2's 16 KB with the
most weight sources a node gets, and runs the script from the directory cloud-init's own
modules run on every boot (and not from runcmd too); the script passes shellcheck; the
node's files read back as rendered (bash sources node.env, the engine's arguments and the
weight sources one per line); nothing secret of the policy goes in; and the script itself,
run on this machine with stand-ins for the GPU driver and docker, reports its phases to a
real HTTP endpoint, or reports the failure and exits non-zero; run again (a node's next
boot) it restarts the engine and keeps weights still on disk, fetches them again once
wiped, and takes them from the next source when one fails."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from bootstrap import NodeBoot, UserDataTooLarge, render
from bootstrap.render import MAX_USER_DATA_BYTES, MAX_WEIGHT_SOURCES, SCRIPT_PATH, script
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


@pytest.mark.parametrize(
    "text", [script(), (Path(__file__).parents[2] / "bootstrap/node.sh").read_text()]
)
def test_the_bootstrap_script_passes_shellcheck(tmp_path: Path, text: str) -> None:
    """As a node gets it (without its comment lines) and as written."""
    path = tmp_path / "node.sh"
    path.write_text(text)
    out = subprocess.run([tool("shellcheck"), str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def files_of(text: str) -> dict[str, str]:
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert "runcmd" not in doc  # (the per-boot script runs on the first boot too)
    return {f["path"]: f["content"] for f in doc["write_files"]}


def test_the_nodes_files_read_back_as_rendered(tmp_path: Path) -> None:
    b = NodeBoot(
        **{
            **boot(Engine.SGLANG, Cloud.GCP, "2x8xH100", rank=1).__dict__,
            "weights_fallbacks": ("gs://acme-weights-us-east1/llama/", "s3://acme-models/llama/"),
        }
    )
    files = files_of(render(b))
    assert files[SCRIPT_PATH] == script()
    assert files["/etc/gpucap/engine.args"].splitlines() == b.launch.argv
    assert files["/etc/gpucap/node.token"] == "single-use-token"
    # (in order, a repeated one once)
    assert files["/etc/gpucap/weights.sources"].splitlines() == [
        "s3://acme-models/llama/",
        "gs://acme-weights-us-east1/llama/",
    ]
    env = tmp_path / "node.env"
    env.write_text(files["/etc/gpucap/node.env"])
    out = subprocess.run(
        ["bash", "-c", f'. "{env}"; printf "%s|" "$IMAGE" "$RANK" "$LEADER"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "lmsysorg/sglang:latest|1|10.0.0.5|"


# What cloud-init itself says (its own modules and its distribution config, as installed
# with the tool): write_files runs once per instance in the init stage, scripts_per_boot
# on every boot in the final stage, over <cloud_dir>/scripts/per-boot.
_CLOUD_INIT_FACTS = """
import json, yaml
from cloudinit import settings
from cloudinit.config import cc_scripts_per_boot as per_boot, cc_write_files as write_files
cfg = yaml.safe_load(open("/etc/cloud/cloud.cfg"))
cloud_dir = settings.CFG_BUILTIN["system_info"]["paths"]["cloud_dir"]
print(json.dumps({
    "per_boot_dir": "/".join([cloud_dir.rstrip("/"), "scripts", per_boot.SCRIPT_SUBDIR]),
    "per_boot_frequency": per_boot.frequency,
    "write_files_frequency": write_files.meta["frequency"],
    "init": [m.replace("-", "_") for m in cfg["cloud_init_modules"]],
    "final": [m.replace("-", "_") for m in cfg["cloud_final_modules"]],
}))
"""


def test_the_script_is_where_cloud_init_runs_scripts_on_every_boot() -> None:
    """The document writes the script (executable) into the directory cloud-init's
    scripts_per_boot module runs, which cloud-init runs on every boot after write_files:
    the first boot runs it once (there is no runcmd), every later boot again."""
    cloud_init = Path(tool("cloud-init"))
    python = cloud_init.read_text().splitlines()[0].removeprefix("#!").split()
    out = subprocess.run([*python, "-c", _CLOUD_INIT_FACTS], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert (facts["per_boot_frequency"], facts["write_files_frequency"]) == (
        "always",
        "once-per-instance",
    )
    assert "write_files" in facts["init"] and "scripts_per_boot" in facts["final"]
    doc = yaml.safe_load(render(boot(Engine.VLLM, Cloud.OCI, "8xH100")))
    [entry] = [f for f in doc["write_files"] if f["content"] == script()]
    assert Path(entry["path"]).parent == Path(facts["per_boot_dir"])
    assert int(entry["permissions"], 8) & 0o111 == 0o111
    assert not {"runcmd", "bootcmd"} & set(doc)


def test_the_largest_document_stays_under_ec2s_limit() -> None:
    """Every engine x cloud x rank with the most weight sources a node gets, each a long
    URI: 1 KB is left for a policy's own engine arguments and environment (as much as
    before nodes had more than one source)."""
    uri = "s3://acme-weights-ap-southeast-2-0123456789/gpucap-weights/acme/llama-3-70b-instruct/"
    sources = tuple(uri.replace("acme/", f"acme{i}/") for i in range(MAX_WEIGHT_SOURCES))
    sizes = [
        len(
            render(
                NodeBoot(
                    **{
                        **boot(*case).__dict__,
                        "weights_uri": sources[0],
                        "weights_fallbacks": sources[1:],
                    }
                )
            ).encode()
        )
        for case in CASES
    ]
    assert max(sizes) <= MAX_USER_DATA_BYTES - 1024, max(sizes)
    with pytest.raises(ValueError, match=f"at most {MAX_WEIGHT_SOURCES}"):
        render(
            NodeBoot(
                **{
                    **boot(Engine.VLLM, Cloud.AWS, "8xH100").__dict__,
                    "weights_fallbacks": (*sources, "s3://one-more/"),
                }
            )
        )


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


@contextmanager
def reports_endpoint() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A plain HTTP endpoint that keeps every report it got: (its URL, the reports)."""
    server = HTTPServer(("127.0.0.1", 0), _Reports)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Reports.got = []
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1/node-phases", _Reports.got
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stub(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def write_files(root: Path, text: str) -> None:
    """cloud-init's write_files of a rendered document, under ``root``."""
    for f in yaml.safe_load(text)["write_files"]:
        content = f["content"].encode()
        if f.get("encoding") == "gz+b64":
            content = gzip.decompress(base64.b64decode(content))
        path = root / f["path"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(int(f["permissions"], 8))


class ScriptNode:
    """A node's rendered files under ``tmp_path/node`` (its GPUCAP_ROOT: the script finds
    its configuration, fetch.py and weights folder there) and node.sh run from them with
    this machine's bash, curl and python3, as often as a node boots. nvidia-smi, systemctl
    and docker are stand-ins (no GPU, no container runtime here): ``docker run`` starts a
    real HTTP server on the engine's port that answers its health path; every docker verb
    is logged to ``docker.log``."""

    def __init__(
        self,
        tmp_path: Path,
        gpus_seen: int,
        report_url: str,
        token: str,
        node_id: str = "n-1",
        sources: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.tmp = tmp_path
        self.root = tmp_path / "node"
        self.weights = self.root / "mnt/gpucap/weights"
        self.env = dict(env or {})
        port = _free_port()
        bindir, www = tmp_path / "bin", tmp_path / "www"
        for d in (bindir, www):
            d.mkdir()
        (www / "health").write_text("ok")
        b = NodeBoot(
            **{
                **boot(Engine.VLLM, Cloud.AWS, "8xH100").__dict__,
                "node_id": node_id,
                "token": token,
                "weights_uri": sources[0] if sources else None,
                "weights_fallbacks": tuple(sources[1:]),
                "report_url": report_url,
                "launch": resolve(Runtime(port=port), parse_gpu_shape("8xH100"), "/m"),
                "ready_timeout_s": 60,
            }
        )
        write_files(self.root, render(b))
        _stub(bindir, "nvidia-smi", f'for i in $(seq {gpus_seen}); do echo "NVIDIA H100"; done\n')
        _stub(bindir, "systemctl", "exit 0\n")
        _stub(
            bindir,
            "docker",
            f"""echo "$1" >> {tmp_path}/docker.log
case $1 in
  info|pull|rm) exit 0 ;;
  run) nohup python3 -m http.server {port} --bind 127.0.0.1 --directory {www} \\
         >/dev/null 2>&1 & echo $! > {tmp_path}/engine.pid; echo engine ;;
  inspect) echo true ;;
  logs) echo "engine log" ;;
esac
""",
        )
        self.path = f"{bindir}:{os.environ['PATH']}"

    def docker(self) -> list[str]:
        """The docker verbs the script ran, in order, over every boot."""
        return (self.tmp / "docker.log").read_text().split()

    def run(self) -> tuple[int, str]:
        """One boot: (the script's exit code, what it logged)."""
        env = {**os.environ, **self.env, "PATH": self.path, "GPUCAP_ROOT": str(self.root)}
        env.pop("GPUCAP_CONF", None)
        try:
            out = subprocess.run(
                ["bash", str(self.root / SCRIPT_PATH.lstrip("/"))],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            pid = self.tmp / "engine.pid"
            if pid.exists():
                subprocess.run(["kill", pid.read_text().strip()], check=False)
                pid.unlink()
        return out.returncode, out.stderr


def run_node(
    tmp_path: Path, gpus_seen: int, report_url: str, token: str, node_id: str = "n-1"
) -> tuple[int, str]:
    """One boot of a :class:`ScriptNode` without weights, reporting to ``report_url``."""
    return ScriptNode(tmp_path, gpus_seen, report_url, token, node_id).run()


def run_script(tmp_path: Path, gpus_seen: int) -> tuple[int, list[str], str]:
    """:func:`run_node` reporting to a plain HTTP endpoint that keeps what it got."""
    with reports_endpoint() as (url, got):
        code, err = run_node(tmp_path, gpus_seen, url, "single-use-token")
    assert all(r["auth"] == "Bearer single-use-token" for r in got)
    assert all(r["node_id"] == "n-1" for r in got)
    return code, [str(r["phase"]) for r in got], err


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


def test_a_node_booting_again_restarts_its_engine_and_fetches_only_wiped_weights(
    tmp_path: Path,
) -> None:
    """Three boots of one node: the first fetches from the second source (the first is
    missing), the next (a reboot) finds them on disk as they were fetched, the last (a
    start after a stop: its instance store wiped) fetches them again. Each boot reports
    every phase, the source in weights_fetched, and replaces the engine container."""
    share = tmp_path / "nfs" / "llama"
    (share / "sub").mkdir(parents=True)
    (share / "model.safetensors").write_bytes(b"w" * 4096)
    (share / "sub" / "config.json").write_text("{}")
    sources = [f"file://{tmp_path}/gone", f"file://{share}"]
    with reports_endpoint() as (url, got):
        node = ScriptNode(tmp_path, 8, url, "single-use-token", sources=sources)
        boots = []
        for wipe in (False, False, True):
            if wipe:
                shutil.rmtree(node.weights)
            got.clear()
            code, err = node.run()
            assert code == 0, err
            boots.append(([r["phase"] for r in got], got[3]["detail"], err))
    phases = ["booted", "driver_ok", "image_pulled", "weights_fetched", "engine_started", "ready"]
    assert [b[0] for b in boots] == [phases] * 3
    assert [b[1] for b in boots] == [
        f"file://{share}",
        f"on disk already, from file://{share}",
        f"file://{share}",
    ]
    assert f"weights not fetched from file://{tmp_path}/gone" in boots[0][2]
    assert f"file://{tmp_path}/gone" not in boots[1][2]  # (kept: nothing was fetched)
    assert (node.weights / "model.safetensors").read_bytes() == b"w" * 4096
    assert (node.weights / "sub" / "config.json").read_text() == "{}"
    # Each boot removes the previous boot's engine before anything else, then runs its own.
    assert [v for v in node.docker() if v in ("rm", "pull", "run")] == ["rm", "pull", "run"] * 3


def test_weights_changed_on_disk_since_they_were_fetched_are_fetched_again(
    tmp_path: Path,
) -> None:
    share = tmp_path / "nfs"
    share.mkdir()
    (share / "model.safetensors").write_bytes(b"w" * 4096)
    with reports_endpoint() as (url, got):
        node = ScriptNode(tmp_path, 8, url, "t", sources=[f"file://{share}"])
        assert node.run()[0] == 0
        (node.weights / "model.safetensors").write_bytes(b"w" * 100)  # (a torn write)
        got.clear()
        code, err = node.run()
    assert code == 0, err
    assert got[3]["detail"] == f"file://{share}"
    assert (node.weights / "model.safetensors").read_bytes() == b"w" * 4096


def test_a_node_no_source_serves_reports_failed(tmp_path: Path) -> None:
    with reports_endpoint() as (url, got):
        node = ScriptNode(tmp_path, 8, url, "t", sources=[f"file://{tmp_path}/a", "ftp://b/"])
        code, err = node.run()
    assert code == 1
    assert [r["phase"] for r in got] == ["booted", "driver_ok", "image_pulled", "failed"]
    assert got[-1]["detail"] == f"no source served the weights (tried file://{tmp_path}/a ftp://b/)"
    assert "cannot fetch weights from ftp://b/" in err
