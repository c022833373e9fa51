"""``gpucap get models|nodes|pools``: the kubectl-style spelling of ``gpucap models|nodes|
pools`` (the same commands, options and output)."""

from __future__ import annotations

import typer

from controlplane.cli import read


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        no_args_is_help=True,
        help="List models, nodes or pools (kubectl-style; --watch re-renders on change).",
    )
    group.command("models", help="Models with desired and actual replicas.")(read.models)
    group.command("nodes", help="Cloud nodes and their lifecycle state.")(read.nodes)
    group.command("pools", help="Capacity pools: where replicas may run, tier and price.")(
        read.pools
    )
    app.add_typer(group, name="get")
