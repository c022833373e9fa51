"""The ``gpucap`` app imports a command's module only when the command runs: the structure
that keeps ``gpucap --help`` and the read commands fast (the timings are bench/cli_startup.py's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from controlplane.cli.lazy import LazyGroup
from controlplane.cli.main import COMMANDS, app

# What the daemon, the store and the clouds need, and a read command does not.
HEAVY = (
    "sqlalchemy",
    "alembic",
    "boto3",
    "botocore",
    "oci",
    "google.cloud",
    "googleapiclient",
    "numpy",
    "apscheduler",
    "controlplane.api",
    "controlplane.grpc.server",
)


def _imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint('\\n'.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(out.stdout.split())


def test_importing_the_app_imports_no_heavy_module() -> None:
    assert _imported_after("import controlplane.cli.main") == set()


def test_the_read_commands_modules_import_no_heavy_module() -> None:
    code = "import controlplane.cli.main, controlplane.cli.get, controlplane.cli.describe"
    assert _imported_after(code) == set()


def test_help_lists_every_command_without_importing_it() -> None:
    code = (
        "from typer.testing import CliRunner\n"
        "from controlplane.cli.main import app\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0"
    )
    assert _imported_after(code) == set()


def _loaded_group() -> LazyGroup:
    group = typer.main.get_group(app)
    assert isinstance(group, LazyGroup)
    group.load_all()
    return group


def test_the_listed_help_is_what_each_module_registers() -> None:
    group = _loaded_group()
    listed = {name: help for m in COMMANDS for name, help in m.commands.items()}
    registered = {name: (cmd.help or "").split("\n\n")[0] for name, cmd in group.commands.items()}
    assert listed == {name: registered[name] for name in listed}
    # Every command a module registers is listed (none appears only once it is loaded).
    assert set(registered) == set(listed)


def test_a_listed_command_runs_and_a_typo_gets_a_suggestion() -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["get", "--help"])
    assert ok.exit_code == 0 and "models" in ok.stdout and "pools" in ok.stdout
    typo = runner.invoke(app, ["modles"])
    assert typo.exit_code == 2 and "models" in typo.output


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "_GPUCAP_COMPLETE": "complete_bash", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(cword)
    exe = Path(sys.executable).with_name("gpucap")
    out = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=120)
    return out.stdout.split()


def test_shell_completion_reaches_into_a_lazily_loaded_command() -> None:
    assert "describe" in _complete("gpucap des", 1)
    assert _complete("gpucap get ", 2) == ["models", "nodes", "pools"]
    assert "--output" in _complete("gpucap get models --ou", 3)
