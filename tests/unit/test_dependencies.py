"""Dependency hygiene: the lower bounds in pyproject.toml admit no version older than the one
the committed generated code was built with (it refuses an older runtime at import), and the
shell scripts the Makefile runs pass shellcheck."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests import extras
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "schema" / "gen" / "gpucap" / "v1"


def _lower_bound(requirement: str) -> Version:
    bounds = [Version(s.version) for s in Requirement(requirement).specifier if s.operator == ">="]
    assert bounds, f"{requirement}: no lower bound"
    return max(bounds)


def _declared() -> dict[str, str]:
    project = extras.pyproject()["project"]
    out: dict[str, str] = {}
    for req in project["dependencies"] + project["optional-dependencies"]["dev"]:
        out[Requirement(req).name.lower()] = req
    return out


def _generated(pattern: str, path: Path) -> Version:
    found = re.search(pattern, path.read_text())
    assert found, f"{path.name}: no version header matching {pattern!r}"
    return Version(found.group(1))


@pytest.mark.parametrize(
    "distribution",
    ["grpcio", "grpcio-health-checking", "grpcio-reflection", "grpcio-status", "grpcio-tools"],
)
def test_the_grpc_lower_bounds_are_the_generated_codes_version(distribution: str) -> None:
    built_with = _generated(
        r"GRPC_GENERATED_VERSION = '([0-9.]+)'", GEN / "control_plane_pb2_grpc.py"
    )
    assert _lower_bound(_declared()[distribution]) >= built_with


def test_the_protobuf_lower_bound_is_the_generated_codes_version() -> None:
    built_with = _generated(r"Protobuf Python Version: ([0-9.]+)", GEN / "control_plane_pb2.py")
    assert _lower_bound(_declared()["protobuf"]) >= built_with


@pytest.mark.parametrize("script", sorted((ROOT / "scripts").iterdir()), ids=lambda p: p.name)
def test_the_scripts_pass_shellcheck(script: Path) -> None:
    done = subprocess.run([tool("shellcheck"), str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def _gpucap(extras_: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        extras.command("controlplane.cli.main", *args),
        env=extras.env_with(extras_),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_the_simulator_is_an_extra_the_cli_names_when_it_is_missing() -> None:
    project = extras.pyproject()["project"]
    core = {Requirement(r).name for r in project["dependencies"]}
    assert not core & {"numpy", "matplotlib"}  # the daemon and its image carry neither
    assert {Requirement(r).name for r in project["optional-dependencies"]["sim"]} == {
        "numpy",
        "matplotlib",
    }
    without = _gpucap([], "simulate", "--help")
    assert without.returncode != 0
    assert "pip install 'gpucap[sim]'" in without.stderr
    assert "Traceback" not in without.stderr
    assert _gpucap([], "--help").returncode == 0  # everything else is there
    withsim = _gpucap(["sim"], "simulate", "--help")
    assert withsim.returncode == 0, withsim.stderr
