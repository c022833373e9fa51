"""``gpucap bootstrap render --policy FILE --model NAME [--pool ID]``: the user data a node of
that model would boot with, as the daemon renders it for a create (``bootstrap.render``).
Runs locally from the policy file; no daemon needed. ``--pool`` picks one of the pools the
policy allows the model (default: the first); ``--rank`` a node of a multi-node replica
(``--leader``: rank 0's address, for the others). Exits 2 on bad input, naming it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from bootstrap import render
from controlplane.api.fit import usable_pools
from controlplane.node_boot import node_boot
from schema.policy_file import PolicyError, load_policy_file

EXIT_BAD_INPUT = 2

bootstrap_app = typer.Typer(
    name="bootstrap", help="What a new node boots with (its user data).", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(bootstrap_app)


def _bad(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


@bootstrap_app.command("render")
def render_cmd(
    policy: Annotated[Path, typer.Option("--policy", help="The customer's policy file.")],
    model: Annotated[str, typer.Option("--model", help="A model of the policy.")],
    pool: Annotated[
        str | None, typer.Option("--pool", help="Pool id (default: the first).")
    ] = None,
    rank: Annotated[int, typer.Option("--rank", help="Node rank in a gang.")] = 0,
    leader: Annotated[str | None, typer.Option("--leader", help="Rank 0's address.")] = None,
    node_id: Annotated[str, typer.Option("--node-id", help="The node's id.")] = "preview",
) -> None:
    """Print the cloud-init user data of a node of MODEL."""
    try:
        loaded = load_policy_file(policy)
    except PolicyError as exc:
        raise _bad(str(exc)) from None
    spec = loaded.policy.model(model)
    if spec is None:
        names = ", ".join(m.name for m in loaded.policy.models) or "none"
        raise _bad(f"{policy}: no model {model!r} (models: {names})")
    pools = usable_pools(loaded.policy, spec)
    if not pools:
        raise _bad(f"{policy}: no pool of the policy may run {model}")
    chosen = pools[0] if pool is None else next((p for p in pools if p.id == pool), None)
    if chosen is None:
        raise _bad(f"pool {pool!r} may not run {model}; pools: {', '.join(p.id for p in pools)}")
    try:
        boot = node_boot(loaded.policy.customer, spec, chosen, node_id, rank=rank, leader=leader)
        text = render(boot)
    except ValueError as exc:
        raise _bad(str(exc)) from None
    sys.stdout.write(text)
