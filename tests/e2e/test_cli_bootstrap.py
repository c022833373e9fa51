"""``gpucap bootstrap render`` end to end: what a node of a model of the example policy would
boot with (valid cloud-config, the model's runtime, a gang's rank), and bad input exits 2
naming what is wrong."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from typer.testing import CliRunner

from controlplane.cli.main import app
from tests.policy_texts import EXAMPLE_POLICY_PATH
from tests.tools import tool


def render(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["bootstrap", "render", "--policy", str(EXAMPLE_POLICY_PATH), *args]
    )
    return result.exit_code, result.stdout, result.stderr


def engine_args(text: str) -> list[str]:
    doc = yaml.safe_load(text)
    (args,) = [f["content"] for f in doc["write_files"] if f["path"].endswith("engine.args")]
    return str(args).splitlines()


def test_a_model_renders_as_valid_cloud_config(tmp_path: Path) -> None:
    code, out, err = render("--model", "llama-70b")
    assert code == 0, err
    path = tmp_path / "user-data"
    path.write_text(out)
    check = subprocess.run([tool("cloud-init"), "schema", "-c", str(path)], capture_output=True)
    assert check.returncode == 0
    assert "IMAGE=ghcr.io/acme/vllm:0.11" in out  # the policy's runtime.image
    args = engine_args(out)
    assert args[args.index("--tensor-parallel-size") + 1] == "8"


def test_a_gangs_worker_renders_with_its_rank_and_leader() -> None:
    code, out, err = render(
        "--model",
        "deepseek-r1",
        "--pool",
        "acme/acme-aws/us-east-1/p5.48xlarge",
        "--rank",
        "1",
        "--leader",
        "10.1.2.3",
    )
    assert code == 0, err
    args = engine_args(out)
    assert args[args.index("--node-rank") + 1] == "1"
    assert "LEADER=10.1.2.3" in out and "RANK=1" in out


def test_bad_input_exits_2_naming_it() -> None:
    code, _, err = render("--model", "nope")
    assert code == 2 and "no model 'nope'" in err and "llama-70b" in err
    code, _, err = render("--model", "llama-8b", "--pool", "acme/ghost")
    assert code == 2 and "pool 'acme/ghost' may not run llama-8b" in err
    code, _, err = render("--model", "deepseek-r1", "--rank", "1")
    assert code == 2 and "leader" in err
    code, _, err = render("--model", "llama-70b", "--rank", "3")
    assert code == 2 and "rank 3" in err
