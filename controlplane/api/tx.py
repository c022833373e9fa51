"""The store and clock the writing parts of the API share, and their one write path."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from controlplane.store.db import Store

T = TypeVar("T")


@dataclass
class Tx:
    """Writes are serialised by one lock shared by every module (a daemon has one writer
    process; the lock keeps policy versions gap- and race-free)."""

    store: Store
    clock: Callable[[], datetime]
    _write_lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def write(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn`` in a write transaction; retry when a daemon job updated the same row
        between our read and our write (optimistic version check, StaleDataError)."""
        for attempt in range(3):
            try:
                with self._write_lock, self.store.session() as s:
                    return fn(s)
            except StaleDataError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
