"""Local nodes on a simulated cloud whose state file several daemons share: the companion a
demo daemon runs beside its loop (``controlplane.daemon.Companion``) so that

- its own nodes stop when another daemon stops or terminates their instances,
- the nodes of a daemon that died (SIGKILL) or stopped are taken over: adopted while their
  process trees run, booted again from their disks otherwise
  (:meth:`providers.sim.cloud.SimCloud.sync_local_nodes`), and
- on its stop every node it runs ends and its ownership is given up, so no process is left
  behind and the next daemon to sync boots those instances' nodes again.

Only the process running a node's tree stops it while it lives (it is that tree's parent);
any process ends a tree whose owner is gone."""

from __future__ import annotations

import logging
import threading
from typing import Any

from providers.sim.cloud import SimCloud

log = logging.getLogger(__name__)


class SharedLocalNodes:
    """Syncs ``world``'s local nodes with its state file every ``every_s`` seconds, from
    the daemon's start (before its first tick: a restarted daemon adopts at once)."""

    def __init__(self, world: SimCloud, every_s: float = 1.0) -> None:
        self.world = world
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, daemon: Any = None) -> None:
        self.sync()
        self._thread = threading.Thread(target=self._run, name="sim-local-nodes", daemon=True)
        self._thread.start()

    def sync(self) -> None:
        try:
            self.world.sync_local_nodes()
            self.world.reap()  # (the file would otherwise keep every instance ever made)
        except Exception:  # the next round tries again; a stopped sync would orphan nodes
            log.exception("sim.local_nodes.sync_failed")

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sync()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.world.release_local_nodes()
