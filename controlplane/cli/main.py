"""Entry point of the ``gpucap`` console script. Each command group lives in its own module
with a ``register(app)``; the modules are listed here with the commands they register and
imported only when one of those runs (``controlplane.cli.lazy``), so ``gpucap --help`` and
a read command start without the daemon's dependencies."""

from __future__ import annotations

from typing import Annotated

import typer

from controlplane.cli.lazy import LazyModule, lazy_group


def _m(module: str, **commands: str) -> LazyModule:
    return LazyModule(f"controlplane.cli.{module}", commands)


# Each command's first paragraph of help, as its module registers it (a test compares).
COMMANDS = (
    _m(
        "daemon",
        daemon="Run the daemon: metrics -> autoscaler -> placement -> reconciler -> providers.",
    ),
    _m("get", get="List models, nodes or pools (kubectl-style; --watch re-renders on change)."),
    _m("describe", describe="Everything about one model or node, in one page."),
    _m(
        "read",
        status="Daemon version, uptime, counts and the last tick of each job.",
        models="Models with desired and actual replicas.",
        nodes="Cloud nodes and their lifecycle state.",
        pools="Capacity pools: where replicas may run, tier and price.",
        endpoints="Where each model is served: its ready replicas.",
        events="Recent events; --follow streams new ones.",
    ),
    _m(
        "oncall",
        pin="Pin a model's replica count (the autoscaler stops deciding).",
        unpin="Remove a pin; the autoscaler decides again.",
        pause="Pause the autoscaler for a model (holds its replicas).",
        resume="Resume the autoscaler for a model.",
        cordon="Place no new replicas in a pool, or in every pool a selector matches (e.g. "
        "--cloud aws --region us-east-1). Replicas already there keep running: drain them "
        "with `gpucap drain`.",
        uncordon="Allow placement in a pool (or selected pools) again.",
        drain="Drain a node: it (and the rest of its replica) is terminated and placement "
        "replaces the replica elsewhere or in the same pool.",
    ),
    _m("explain", explain="Where a model's next replica may start, and its expected cold start."),
    _m(
        "simulate",
        simulate="Replay request traces against a fleet under gpucap's autoscaler, the peer "
        "baselines (knative, skyserve, rayserve, hpa) and a clairvoyant oracle, side by side.",
    ),
    _m("staging", staging="Staged copies of model weights: what is where, with progress."),
    _m("images", images="Baked machine images: what new nodes boot from, per region."),
    _m("warm", warm="Warm pools: replicas waiting to be resumed, and their cost."),
    _m(
        "audit",
        audit="Compare what the store tracks with what each cloud lists as gpucap's: leaked, "
        "lost and duplicated instances. Exit 4 unless clean.",
    ),
    _m(
        "usage",
        usage="GPU-hours, node-hours and cost per customer (--by model, tier or cloud), from "
        "each node's request to its release, less warm-pool stops.",
    ),
    _m(
        "decisions",
        decisions="Recorded autoscaler and placement decisions; `replay ID` re-runs one.",
    ),
    _m("policy", policy="Customer policy files: validate, apply, show, schema."),
    _m("db", db="Create, inspect and migrate the gpucap database schema."),
    _m("account", account="Cloud accounts: preflight checks."),
    _m("bootstrap", bootstrap="What a new node boots with (its user data)."),
    _m("demo", demo="Act on the running demo (`gpucap daemon --demo`)."),
    _m(
        "token",
        token="API tokens: create (the secret is shown once), list, revoke. Works on the database.",
    ),
)

app = typer.Typer(
    cls=lazy_group(COMMANDS),
    name="gpucap",
    help="Multi-cloud GPU capacity scheduler and autoscaling control plane.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if not value:
        return
    from controlplane.telemetry import build_info  # (only --version pays for it)

    version, commit, python = build_info()
    typer.echo(f"gpucap {version} (commit {commit}, python {python})")
    raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print the version and build (commit, python) and exit.",
        ),
    ] = False,
) -> None:
    pass


def main() -> None:
    app()


if __name__ == "__main__":
    main()
