"""Local nodes: the simulated cloud's instances as real processes on this machine, each on a
loopback address of its own (Linux routes all of 127/8 to ``lo``), booting from the same
cloud-init document a real cloud's node gets, so the bootstrap script, its phase reports,
the engine's health and metrics and a killed engine are the real thing, with no cloud.

:meth:`LocalNodes.start` does what cloud-init would. On an instance's first boot it writes
the document's ``write_files`` under the node's folder (``root/<instance id>/`` + each
path, with its permissions); on every boot it runs, with bash in a process group of its
own and logging to ``boot.log``, the executables of cloud-init's per-boot scripts directory
(``scripts_per_boot``, where the bootstrap is), then on the first boot only the document's
``runcmd`` (``scripts_user``). A stop keeps the folder, as an instance's disk, but its
instance store (``mnt/``, where the weights are) is wiped before the next boot, as EC2's
NVMe instance store is (coldstart.md §4). The host's tools are stand-ins first on the
node's PATH (``providers/sim/standins.py``: ``docker run`` starts ``python -m
runtimes.emulator``), and the bootstrap is told its folder (``GPUCAP_ROOT``) and address
(``HEALTH_HOST``).

A node's process tree belongs to the process that booted it (or adopted it: :meth:`LocalNodes.
adopt`, a daemon restarted on a shared state file taking over a tree its dead predecessor
booted); :func:`process_identity` names that owner in the state file, and :func:`group_alive`
tells a node's live tree from a process id the system has since handed to someone else."""

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
from collections.abc import Collection, Sequence
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
PER_BOOT = "var/lib/cloud/scripts/per-boot"  # cloud-init's, under the node's folder
INSTANCE_STORE = "mnt"  # what a stop wipes (bootstrap.render.WEIGHTS_DIR is under it)


@dataclass
class _Node:
    home: Path
    address: str
    group: int  # its process group (the bootstrap's pid)
    boot: subprocess.Popen[bytes] | None  # None: adopted, another process's child


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_identity(pid: int | None = None) -> str:
    """``pid:start time``: a process id alone may be handed out again once it exits."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}"


def owner_alive(identity: str | None) -> bool:
    """The process :func:`process_identity` named still runs (not a later one on its pid)."""
    if not identity:
        return False
    pid, _, started = identity.partition(":")
    return started == str(_start_time(int(pid))) and alive(int(pid))


def group_alive(group: int, home: Path) -> bool:
    """A member of the node's process group still runs: the bootstrap (the group's leader)
    or the engine, each checked to be this node's (its environment names ``home``), so a
    recycled pid is never taken for the node."""
    mark = f"GPUCAP_ROOT={home}".encode()
    for pid in (group, engine_pid(home)):
        if pid is None or not alive(pid):
            continue
        try:
            if os.getpgid(pid) == group and mark in Path(f"/proc/{pid}/environ").read_bytes():
                return True
        except OSError:
            continue
    return False


def kill_group(group: int, home: Path, wait_s: float = 5.0) -> None:
    """End a node's process group that no :class:`LocalNodes` here holds (its owner is
    gone): SIGTERM, then SIGKILL what is left after ``wait_s``."""
    if not group_alive(group, home):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while group_alive(group, home) and time.monotonic() < deadline:
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


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
        # Instances booted before (their folders are their disks), and where they were.
        self._booted: dict[str, str] = {}
        self._lock = threading.Lock()

    def start(
        self,
        instance_id: str,
        user_data: str,
        gpus: int,
        *,
        gpu_name: str = "NVIDIA H100",
        again: bool | None = None,
        before: str | None = None,
        avoid: Collection[str] = (),
    ) -> str:
        """Boot a node from its cloud-init document; returns its address. An instance
        started again after a stop boots from its disk as cloud-init would: only the
        per-boot scripts run, on an empty instance store. Raises ValueError for a document
        that is not ``#cloud-config`` or a node that runs already.

        ``again``/``before``: whether it booted before and where (None: as this object
        remembers; a shared state file remembers for every process). ``avoid``: addresses
        held by nodes of other processes that may not answer yet."""
        doc = _cloud_config(user_data)
        home = self.root / instance_id
        with self._lock:
            if instance_id in self._nodes:
                raise ValueError(f"local node {instance_id} runs already")
            if again is None:
                again = instance_id in self._booted
            if before is None:
                before = self._booted.get(instance_id)
            if again:
                shutil.rmtree(home / INSTANCE_STORE, ignore_errors=True)
                runcmd: Sequence[str | Sequence[str]] = []
            else:
                shutil.rmtree(home, ignore_errors=True)  # (a node of an earlier world)
                _write_files(home, doc.get("write_files") or [])
                runcmd = doc.get("runcmd") or []
            port = int(read_env(home / standins.NODE_ENV).get("PORT", "0"))
            address = self._allocate(port, before, avoid)
            node: NodeFile = {
                "address": address,
                "gpus": gpus,
                "gpu_name": gpu_name,
                "python": sys.executable,
                "emulator_args": self.emulator_args,
            }
            (home / standins.NODE_FILE).write_text(json.dumps(node))
            _install_tools(home / "bin")
            final = home / "cloud-final.sh"  # (what cloud-init's final stage runs)
            final.write_text(_final_stage(home, runcmd))
            with open(home / "boot.log", "ab") as log:
                boot = subprocess.Popen(
                    ["bash", str(final)],
                    cwd=home,
                    env=self._env(home, address),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stop ends all of it
                )
            self._nodes[instance_id] = _Node(home, address, boot.pid, boot)
            self._booted[instance_id] = address
            return address

    def adopt(self, instance_id: str, address: str, group: int) -> bool:
        """Take over a node another process booted and left running (it exited): stopping
        it and :meth:`close` end it from now on. False: its process group is gone."""
        home = self.root / instance_id
        if not group_alive(group, home):
            return False
        with self._lock:
            self._nodes.setdefault(instance_id, _Node(home, address, group, None))
            self._booted[instance_id] = address
        return True

    def owns(self, instance_id: str) -> bool:
        with self._lock:
            return instance_id in self._nodes

    def group_of(self, instance_id: str) -> int | None:
        with self._lock:
            node = self._nodes.get(instance_id)
        return None if node is None else node.group

    def home_of(self, instance_id: str) -> Path:
        return self.root / instance_id

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._nodes)

    def stop(self, instance_id: str) -> None:
        """End the node's bootstrap and engine, its whole process group. Idempotent."""
        with self._lock:
            node = self._nodes.pop(instance_id, None)
        if node is None:
            return
        if node.boot is None:  # (adopted: not our child, nothing to reap)
            kill_group(node.group, node.home)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.group, signal.SIGTERM)
        members = [p for p in (node.group, engine_pid(node.home)) if p is not None]
        deadline = time.monotonic() + 5
        while any(alive(p) for p in members) and time.monotonic() < deadline:
            time.sleep(0.02)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.group, signal.SIGKILL)  # (whatever did not take the hint)
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

    def _allocate(self, port: int, before: str | None = None, avoid: Collection[str] = ()) -> str:
        """``before`` (the node's address at its previous boot: a cloud keeps a stopped
        instance's private address) if it is free, else the first address of the network
        no live node holds where ``port`` is free (a node of another process, a test in
        parallel, may hold one)."""
        taken = {n.address for n in self._nodes.values()} | set(avoid)
        hosts = (str(h) for h in itertools.islice(self.network.hosts(), 1, _SCAN))
        for address in itertools.chain([before] if before else [], hosts):
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


def _write_files(home: Path, entries: Sequence[dict[str, Any]]) -> None:
    """cloud-init's write_files under ``home``."""
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


def _install_tools(bindir: Path) -> None:
    bindir.mkdir(parents=True, exist_ok=True)
    for name in TOOLS:
        tool = bindir / name
        tool.write_text(_TOOL.format(python=sys.executable, standins=standins.__file__))
        tool.chmod(0o755)


def _final_stage(home: Path, runcmd: Sequence[str | Sequence[str]]) -> str:
    """What cloud-init's final stage runs, as one script: each executable of the per-boot
    directory in name order (``scripts_per_boot``; one failing does not stop the next),
    then ``runcmd`` (``scripts_user``: a list is one command, its words quoted, a string a
    shell line). A command naming a file on the node runs the node's copy."""
    per_boot = home / PER_BOOT
    scripts = sorted(per_boot.iterdir()) if per_boot.is_dir() else []
    lines = [shlex.quote(str(p)) for p in scripts if p.is_file() and os.access(p, os.X_OK)]
    for cmd in runcmd:
        if isinstance(cmd, str):
            lines.append(cmd)
            continue
        argv = [str(a) for a in cmd]
        if argv and argv[0].startswith("/") and (home / argv[0].lstrip("/")).is_file():
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
