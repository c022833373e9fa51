"""What a local node has instead of a GPU host's tools (``providers/sim/local.py``), so the
node runs the real bootstrap script unchanged: ``nvidia-smi`` lists the node's GPUs,
``docker`` runs the engine emulator (``runtimes/emulator.py``) as the engine's container on
the node's own loopback address and port, ``systemctl`` does nothing, ``hostname -I`` gives
the node's address.

Each tool in a node's ``bin/`` is a short script that runs this file as ``standins.py
TOOL_PATH ARGS...``, so it imports only the standard library (a boot calls the tools a dozen
times; importing the package would cost each call a fifth of a second). A tool finds its
node as the folder above its ``bin/``, and there the node's ``local.json``
(:class:`NodeFile`, written by ``LocalNodes.start``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

NODE_FILE = "local.json"
ENGINE_PID = "engine.pid"
ENGINE_LOG = "engine.log"
NODE_ENV = "etc/gpucap/node.env"
# docker run's options that take a value (the rest of the bootstrap's are flags).
_VALUED = {"--name", "--restart", "--gpus", "--network", "--ipc", "--env-file", "-v", "-e"}


class NodeFile(TypedDict):
    """A local node's ``local.json``: what its tools answer with."""

    address: str  # its loopback address
    gpus: int
    gpu_name: str
    python: str  # the interpreter that runs the emulator
    emulator_args: list[str]  # the emulator's service-time options


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an engine reparented to an init that does not
    reap still has a pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def read_env(path: Path) -> dict[str, str]:
    """A ``KEY=value`` file as bash sources it (values shell-quoted, as bootstrap renders)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if words and "=" in words[0]:
            key, value = words[0].split("=", 1)
            out[key] = value
    return out


def engine_pid(home: Path) -> int | None:
    try:
        return int((home / ENGINE_PID).read_text())
    except (OSError, ValueError):
        return None


def stop_engine(home: Path, sig: signal.Signals = signal.SIGTERM, wait_s: float = 5.0) -> bool:
    """Signal the node's engine and wait until it is gone (SIGKILL after ``wait_s``). False:
    no engine was running."""
    pid = engine_pid(home)
    if pid is None or not alive(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = math.inf
            time.sleep(0.02)
    return True


def _docker_run(home: Path, node: NodeFile, args: Sequence[str]) -> int:
    """``run -d --name N [options] IMAGE ARGS...``: the emulator in the background, in the
    bootstrap's process group (stopping the node stops it), its pid in ``engine.pid``."""
    env_file, i = None, 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "--env-file":
            env_file = args[i + 1]
        i += 2 if args[i] in _VALUED else 1
    if i >= len(args):
        print("docker run: no image", file=sys.stderr)
        return 125
    conf = read_env(home / NODE_ENV)
    extra = read_env(Path(env_file)) if env_file else {}
    argv = [node["python"], "-m", "runtimes.emulator", "--engine", conf["ENGINE"]]
    argv += ["--host", node["address"], "--port", conf["PORT"], "--model", conf["MODEL"]]
    argv += node["emulator_args"]
    with open(home / ENGINE_LOG, "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env={**os.environ, **extra}
        )
    (home / ENGINE_PID).write_text(str(proc.pid))
    print(f"{proc.pid:064x}")  # (a container id)
    return 0


def docker(home: Path, node: NodeFile, args: Sequence[str]) -> int:
    verb, rest = (args[0], args[1:]) if args else ("", [])
    if verb in ("info", "pull"):
        return 0
    if verb == "rm":
        stop_engine(home)
        return 0
    if verb == "run":
        return _docker_run(home, node, rest)
    if verb == "image" and rest[:1] == ["inspect"]:  # (only a RepoDigests format is asked)
        image = rest[-1]
        repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
        print(f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}")
        return 0
    pid = engine_pid(home)
    if verb == "inspect":  # (only -f '{{.State.Running}}' is asked)
        if pid is None:
            print("Error: No such object: gpucap-engine", file=sys.stderr)
            return 1
        print("true" if alive(pid) else "false")
        return 0
    if verb == "logs":
        tail = int(rest[rest.index("--tail") + 1]) if "--tail" in rest else None
        try:
            lines = (home / ENGINE_LOG).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        print("\n".join(lines[-tail:] if tail else lines))
        return 0
    print(f"docker {verb}: not emulated on a local node", file=sys.stderr)
    return 1


def main(tool: Path, args: Sequence[str]) -> int:
    home = tool.parent.parent
    node: NodeFile = json.loads((home / NODE_FILE).read_text())
    match tool.name:
        case "nvidia-smi":  # (as --query-gpu=name --format=csv,noheader prints them)
            print("\n".join([node["gpu_name"]] * node["gpus"]))
            return 0
        case "docker":
            return docker(home, node, args)
        case "hostname":
            print(f"{node['address']} " if "-I" in args else home.name)
            return 0
        case "systemctl":
            return 0
    print(f"{tool.name}: no stand-in", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
