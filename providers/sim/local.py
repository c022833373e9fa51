"""Local nodes: the simulated cloud's instances as real processes on this machine, each on a
loopback address of its own (Linux routes all of 127/8 to ``lo``), booting from the same
cloud-init document a real cloud's node gets, so the bootstrap script, its phase reports,
the engine's health and metrics and a killed engine are the real thing, with no cloud.

:meth:`LocalNodes.start` does what cloud-init would: it writes the document's
``write_files`` under the node's folder (``root/<instance id>/`` + each path, with its
permissions) and runs its ``runcmd`` with bash in a process group of its own, logging to
``boot.log``. The host's tools are stand-ins first on the node's PATH
(``providers/sim/standins.py``: ``docker run`` starts ``python -m runtimes.emulator``), and
the bootstrap is told its folder (``GPUCAP_ROOT``) and address (``HEALTH_HOST``)."""

from __future__ import annotations

import base64
import contextlib
import gzip
import ipaddress
import itertools
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import yaml

from providers.sim import standins
from providers.sim.standins import NodeFile, alive, engine_pid, read_env

TOOLS = ("nvidia-smi", "docker", "systemctl", "hostname")
_TOOL = """#!{python}
import runpy, sys
sys.argv.insert(1, __file__)  # (the tool's own path: its node is the folder above bin/)
runpy.run_path({standins!r}, run_name="__main__")
"""
_SCAN = 4096  # addresses tried before giving up


@dataclass
class _Node:
    home: Path
    address: str
    boot: subprocess.Popen[bytes]


class LocalNodes:
    """Nodes under ``root``, on addresses of ``network`` (its first host is skipped: on
    127/8 that is 127.0.0.1, where this machine's own servers listen). ``emulator_args``:
    the engine emulator's service-time options for every node; ``ready_poll_s``: how often
    the bootstrap asks the engine's health while it starts. Thread-safe."""

    def __init__(
        self,
        root: Path,
        *,
        network: str = "127.0.0.0/8",
        emulator_args: Sequence[str] = (),
        ready_poll_s: float = 0.1,
    ) -> None:
        self.root = root
        self.network = ipaddress.ip_network(network)
        self.emulator_args = list(emulator_args)
        self.ready_poll_s = ready_poll_s
        self._nodes: dict[str, _Node] = {}
        self._lock = threading.Lock()

    def start(
        self, instance_id: str, user_data: str, gpus: int, *, gpu_name: str = "NVIDIA H100"
    ) -> str:
        """Boot a node from its cloud-init document; returns its address. Raises ValueError
        for a document that is not ``#cloud-config`` or a node that runs already."""
        doc = _cloud_config(user_data)
        home = self.root / instance_id
        with self._lock:
            if instance_id in self._nodes:
                raise ValueError(f"local node {instance_id} runs already")
            shutil.rmtree(home, ignore_errors=True)  # (a node of an earlier world)
            written = _write_files(home, doc.get("write_files") or [])
            port = int(read_env(home / standins.NODE_ENV).get("PORT", "0"))
            address = self._allocate(port)
            node: NodeFile = {
                "address": address,
                "gpus": gpus,
                "gpu_name": gpu_name,
                "python": sys.executable,
                "emulator_args": self.emulator_args,
            }
            (home / standins.NODE_FILE).write_text(json.dumps(node))
            _install_tools(home / "bin")
            runcmd = home / "runcmd"
            runcmd.write_text(_runcmd(home, written, doc.get("runcmd") or []))
            with open(home / "boot.log", "ab") as log:
                boot = subprocess.Popen(
                    ["bash", str(runcmd)],
                    cwd=home,
                    env=self._env(home, address),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stop ends all of it
                )
            self._nodes[instance_id] = _Node(home, address, boot)
            return address

    def stop(self, instance_id: str) -> None:
        """End the node's bootstrap and engine, its whole process group. Idempotent."""
        with self._lock:
            node = self._nodes.pop(instance_id, None)
        if node is None:
            return
        group = node.boot.pid  # (the group keeps this id while any member lives)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        members = [p for p in (node.boot.pid, engine_pid(node.home)) if p is not None]
        deadline = time.monotonic() + 5
        while any(alive(p) for p in members) and time.monotonic() < deadline:
            time.sleep(0.02)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)  # (whatever did not take the hint)
        node.boot.wait()

    def kill_engine(self, instance_id: str) -> bool:
        """Kill only the node's engine (SIGKILL, as a crash): its health fails from now on.
        False: no such node, or its engine is not running."""
        with self._lock:
            node = self._nodes.get(instance_id)
        return node is not None and standins.stop_engine(node.home, signal.SIGKILL)

    def address_of(self, instance_id: str) -> str | None:
        with self._lock:
            node = self._nodes.get(instance_id)
        return None if node is None else node.address

    def close(self) -> None:
        with self._lock:
            ids = list(self._nodes)
        for instance_id in ids:
            self.stop(instance_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _allocate(self, port: int) -> str:
        """The first address of the network no live node holds where ``port`` is free (a
        node of another process, a test in parallel, may hold one)."""
        taken = {n.address for n in self._nodes.values()}
        for host in itertools.islice(self.network.hosts(), 1, _SCAN):
            address = str(host)
            if address not in taken and _bindable(address, port):
                return address
        raise RuntimeError(f"no free address for a local node in {self.network}")

    def _env(self, home: Path, address: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "GPUCAP_CONF"}
        package_root = str(Path(__file__).resolve().parents[2])  # (runtimes.emulator's)
        return env | {
            "PATH": f"{home / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH")))),
            "GPUCAP_ROOT": str(home),
            "HEALTH_HOST": address,
            "READY_POLL_S": str(self.ready_poll_s),
        }


def _cloud_config(user_data: str) -> dict[str, Any]:
    if not user_data.startswith("#cloud-config"):
        raise ValueError("a local node boots from a #cloud-config document only")
    doc = yaml.safe_load(user_data)
    if not isinstance(doc, dict):
        raise ValueError("the #cloud-config document is not a mapping")
    return doc


def _write_files(home: Path, entries: Sequence[dict[str, Any]]) -> set[str]:
    """cloud-init's write_files under ``home``; returns the paths written (as the document
    names them)."""
    written = set()
    for f in entries:
        encoding = f.get("encoding", "text/plain")
        content = str(f.get("content", "")).encode()
        if encoding == "gz+b64":
            content = gzip.decompress(base64.b64decode(content))
        elif encoding != "text/plain":
            raise ValueError(f"{f['path']}: encoding {encoding} is not supported here")
        path = home / str(f["path"]).lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(int(str(f.get("permissions", "0644")), 8))
        written.add(str(f["path"]))
    return written


def _install_tools(bindir: Path) -> None:
    bindir.mkdir(parents=True, exist_ok=True)
    for name in TOOLS:
        tool = bindir / name
        tool.write_text(_TOOL.format(python=sys.executable, standins=standins.__file__))
        tool.chmod(0o755)


def _runcmd(home: Path, written: set[str], commands: Sequence[str | Sequence[str]]) -> str:
    """cloud-init's runcmd as the script it writes: a list is one command (its words
    quoted), a string a shell line. A command naming a file the document wrote runs the
    node's copy."""
    lines = []
    for cmd in commands:
        if isinstance(cmd, str):
            lines.append(cmd)
            continue
        argv = [str(a) for a in cmd]
        if argv and argv[0] in written:
            argv[0] = str(home / argv[0].lstrip("/"))
        lines.append(shlex.join(argv))
    return "\n".join(lines) + "\n"


def _bindable(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as the emulator binds)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True
