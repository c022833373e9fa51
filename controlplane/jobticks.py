"""What the daemon last saw of each periodic job: the daemon records every APScheduler
tick here, and the API's status read is given this object to show them (``gpucap status``).
A standby's jobs fire but do not act: they beat (``/readyz`` reads the beats) without
recording a tick.

Kept in memory: a restarted daemon has none, which is the truth (no tick has run in this
process yet)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta


@dataclass
class JobTick:
    job: str
    last_started_at: datetime | None = None
    last_duration_s: float = 0.0
    last_error: str = ""
    last_succeeded_at: datetime | None = None  # when the last tick without an error ended
    runs: int = 0
    failures: int = 0


class JobTicks:
    """Thread-safe: ticks are recorded from the scheduler's worker threads and read from
    the gRPC server's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ticks: dict[str, JobTick] = {}
        self._beats: dict[str, float] = {}

    def beat(self, job: str, at: float) -> None:
        """The scheduler fired ``job`` at ``at`` (monotonic seconds), whether it then acted
        or stood by: what ``/readyz`` reads to tell a live scheduler from a stalled job."""
        with self._lock:
            self._beats[job] = at

    def beats(self) -> dict[str, float]:
        with self._lock:
            return dict(self._beats)

    def record(
        self, job: str, started_at: datetime, duration_s: float, error: str | None = None
    ) -> JobTick:
        """Returns a copy of the job's tick as recorded."""
        with self._lock:
            tick = self._ticks.setdefault(job, JobTick(job))
            tick.last_started_at, tick.last_duration_s = started_at, duration_s
            tick.last_error = error or ""
            tick.runs += 1
            tick.failures += 1 if error else 0
            if not error:
                tick.last_succeeded_at = started_at + timedelta(seconds=duration_s)
            return replace(tick)

    def snapshot(self) -> list[JobTick]:
        """Copies, by job name (a reader never sees a tick change under it)."""
        with self._lock:
            return [replace(t) for _, t in sorted(self._ticks.items())]
