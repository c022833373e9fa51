"""Placeholder: the 'db' command group is being built; see the issue that owns it."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    del app  # nothing registered yet
