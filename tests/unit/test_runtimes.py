"""Runtimes: each engine's launch for a single node and for each rank of a gang (parallel
sizes from the shape unless the policy says, its documented port, health and metrics
paths), the default PromQL as the union of the engines' names, and the policy errors a
runtime can make, each named by file, line and field."""

from __future__ import annotations

import pytest

from runtimes import ENGINES, Gang, resolve
from runtimes.queries import in_flight
from schema.catalog import parse_gpu_shape
from schema.policy_file import PolicyError, parse_policy
from schema.runtime import Engine, Runtime
from tests.policy_texts import edited, example_policy

H100x8 = parse_gpu_shape("8xH100")
GANG = parse_gpu_shape("2x8xH100")
WEIGHTS = "/mnt/weights/llama"


@pytest.mark.parametrize("engine", list(Engine))
def test_a_single_node_launch_has_the_engines_defaults(engine: Engine) -> None:
    spec = ENGINES[engine]
    launch = resolve(Runtime(engine=engine), H100x8, WEIGHTS)
    assert launch.image == spec.image and ":" in launch.image  # a pinned tag
    assert launch.port == spec.port and str(spec.port) in launch.argv
    assert WEIGHTS in launch.argv
    assert (launch.parallel.tensor, launch.parallel.pipeline) == (8, 1)
    assert "8" in launch.argv and "1" in launch.argv
    assert launch.health_path == "/health" and launch.metrics_path == spec.metrics.path
    assert "0.0.0.0" in launch.argv  # reachable by the router and Prometheus


def test_vllm_flags_from_its_docs() -> None:
    argv = resolve(Runtime(), H100x8, WEIGHTS).argv
    assert argv[:1] == [WEIGHTS]  # the image's entrypoint is `vllm serve`
    i = argv.index("--tensor-parallel-size")
    assert argv[i + 1] == "8" and argv[argv.index("--pipeline-parallel-size") + 1] == "1"


@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.SGLANG])
def test_each_rank_of_a_gang_knows_its_rank_and_leader(engine: Engine) -> None:
    launches = [
        resolve(Runtime(engine=engine), GANG, WEIGHTS, Gang(2, rank, "10.0.0.5")) for rank in (0, 1)
    ]
    for rank, launch in enumerate(launches):
        assert (launch.parallel.tensor, launch.parallel.pipeline) == (8, 2)
        argv = launch.argv
        assert argv[argv.index("--nnodes") + 1] == "2"
        assert argv[argv.index("--node-rank") + 1] == str(rank)
        assert any("10.0.0.5" in a for a in argv)
    vllm_worker = launches[1].argv if engine == Engine.VLLM else []
    assert engine != Engine.VLLM or "--headless" in vllm_worker


def test_a_gang_needs_its_rank_and_an_engine_that_can_start_one() -> None:
    with pytest.raises(ValueError, match="rank and leader"):
        resolve(Runtime(), GANG, WEIGHTS)
    with pytest.raises(ValueError, match="trtllm cannot start a gang"):
        resolve(Runtime(engine=Engine.TRTLLM), GANG, WEIGHTS, Gang(2, 0, "10.0.0.5"))


def test_policy_values_override_the_defaults_and_args_come_last() -> None:
    rt = Runtime(
        engine=Engine.SGLANG,
        image="ghcr.io/acme/sglang:1",
        port=9000,
        tensor_parallel=4,
        pipeline_parallel=2,
        args=["--trust-remote-code"],
        env={"HF_HUB_OFFLINE": "1"},
    )
    launch = resolve(rt, H100x8, WEIGHTS)
    assert launch.image == "ghcr.io/acme/sglang:1" and launch.port == 9000
    assert (launch.parallel.tensor, launch.parallel.pipeline) == (4, 2)
    assert launch.argv[-1] == "--trust-remote-code" and "--enable-metrics" in launch.argv
    assert launch.env == {"HF_HUB_OFFLINE": "1"}
    # A policy's older top-level image stands in for runtime.image.
    assert resolve(Runtime(), H100x8, WEIGHTS, image="ghcr.io/acme/vllm:0.11").image == (
        "ghcr.io/acme/vllm:0.11"
    )


def test_the_default_queries_read_every_engine() -> None:
    q = in_flight()
    for spec in ENGINES.values():
        assert f"sum by (customer, model) ({spec.metrics.running})" in q
    assert q.count(" or ") == len(ENGINES) - 1


def test_the_example_policy_names_runtimes() -> None:
    policy = parse_policy(example_policy()).policy
    engines = {m.name: m.runtime.engine for m in policy.models}
    assert engines == {"llama-70b": "vllm", "llama-8b": "vllm", "deepseek-r1": "sglang"}


DEEPSEEK_RUNTIME = "    runtime:\n      engine: sglang "


@pytest.mark.parametrize(
    ("new", "field", "reason"),
    [
        ("    runtime:\n      engine: tgi ", "models[2].runtime.engine", "'vllm', 'sglang'"),
        ("    runtime:\n      port: 22\n      engine: sglang ", "models[2].runtime.port", "ssh"),
        (
            "    runtime:\n      port: 29500\n      engine: sglang ",
            "models[2].runtime.port",
            "rendezvous",
        ),
        (
            "    runtime:\n      tensor_parallel: 16\n      engine: sglang ",
            "models[2].runtime.tensor_parallel",
            "8xH200 has 8",
        ),
        (
            "    runtime:\n      engine: trtllm ",
            "models[2].runtime.engine",
            "MPI or Slurm",
        ),
        (
            "    runtime:\n      env: {HF_TOKEN: abc}\n      engine: sglang ",
            "models[2].runtime.env.HF_TOKEN",
            "looks like a secret",
        ),
        (
            "    image: x/y:1\n    runtime:\n      image: x/z:1\n      engine: sglang ",
            "models[2].image",
            "not both",
        ),
    ],
)
def test_a_bad_runtime_names_file_line_and_field(new: str, field: str, reason: str) -> None:
    text = edited(example_policy(), DEEPSEEK_RUNTIME, new)
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "policy.yaml")
    (problem,) = [p for p in err.value.problems if p.field == field]
    assert reason in problem.reason and problem.file == "policy.yaml"
    assert problem.line is not None and problem.line > 70  # at the model's own lines
