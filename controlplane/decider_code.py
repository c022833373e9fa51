"""Which decider code made a decision. Every autoscale record carries the decider's name and a
fingerprint of the ``autoscaler`` package's source, so a replay that disagrees with its record
can tell on-call whether the code changed since (a different answer can be expected) or not
(the deciders are pure functions of the recorded inputs: that is a bug)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import autoscaler

UNKNOWN = "unknown"


def fingerprint(root: Path) -> str:
    """12 hex digits of SHA-256 over every ``*.py`` under ``root`` (each one's relative path,
    length and bytes, in path order). Any edit counts, a comment too: a fingerprint cannot
    know what a change affects."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


@functools.cache
def decider_code() -> str:
    """The running decider package's fingerprint (read once per process), or ``unknown`` where
    its source cannot be read."""
    try:
        return fingerprint(Path(autoscaler.__file__).resolve().parent)
    except OSError:
        return UNKNOWN
