"""Where gpucap keeps its local state and which database it uses.

One place for this so the daemon, ``gpucap db`` and the tests resolve the same paths:

- state directory: ``$GPUCAP_STATE_DIR``, else ``$XDG_STATE_HOME/gpucap``, else
  ``~/.local/state/gpucap`` (the XDG base-directory default for state);
- database URL: an explicit value (``--url``), else ``$GPUCAP_DB_URL``, else a SQLite file
  ``gpucap.db`` in the state directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from controlplane.store.db import default_url

STATE_DIR_ENV = "GPUCAP_STATE_DIR"
DB_URL_ENV = "GPUCAP_DB_URL"


def state_dir() -> Path:
    """The state directory (not created here; see :func:`ensure_state_dir`)."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "gpucap"


def ensure_state_dir() -> Path:
    """The state directory, created owner-only if missing (it holds the database)."""
    path = state_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def database_url(explicit: str | None = None) -> str:
    """The database URL to use: ``explicit``, else ``$GPUCAP_DB_URL``, else SQLite in the
    state directory. The state directory is created in the last case, because SQLite
    cannot create a file in a directory that does not exist."""
    if explicit:
        return explicit
    from_env = os.environ.get(DB_URL_ENV)
    if from_env:
        return from_env
    return default_url(ensure_state_dir())
