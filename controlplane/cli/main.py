"""Entry point of the ``gpucap`` console script. Each command group lives in its own module
and registers itself on the shared Typer app here."""

from __future__ import annotations

import typer

from controlplane.cli import (
    account,
    audit,
    bootstrap,
    daemon,
    db,
    decisions,
    demo,
    explain,
    images,
    oncall,
    policy,
    read,
    simulate,
    staging,
    usage,
    warm,
)

app = typer.Typer(
    name="gpucap",
    help="Multi-cloud GPU capacity scheduler and autoscaling control plane.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

daemon.register(app)
read.register(app)
oncall.register(app)
explain.register(app)
decisions.register(app)
policy.register(app)
db.register(app)
simulate.register(app)
account.register(app)
bootstrap.register(app)
demo.register(app)
staging.register(app)
images.register(app)
warm.register(app)
audit.register(app)
usage.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
