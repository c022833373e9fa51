"""Printing a list from the daemon once, or with ``--watch`` again each time it changes.

Watching polls the list RPC every ``--interval`` seconds: the daemon streams endpoints and
events but not models, nodes or pools, and a node's phases or a pool's block change without
an event. A snapshot is printed only when it differs from the last one printed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from google.protobuf.message import Message
from rich.table import Table

from controlplane.cli.output import Output, print_data, print_item
from controlplane.cli.remote import console, daemon
from controlplane.cli.tables import print_table
from controlplane.grpc.client import ControlPlaneClient

M = TypeVar("M", bound=Message)

WatchOption = Annotated[
    bool,
    typer.Option("--watch", "-w", help="Print the list again each time it changes (Ctrl-C stops)."),
]
IntervalOption = Annotated[
    float, typer.Option("--interval", min=0.2, help="Seconds between looks with --watch.")
]
DEFAULT_INTERVAL_S = 2.0


def poll(
    fetch: Callable[[], M],
    show: Callable[[M], None],
    interval: float,
    wait: Callable[[float], bool],
) -> None:
    """Show ``fetch()`` now, then again whenever it differs from the last one shown, until
    ``wait(interval)`` returns False."""
    last: M | None = None
    while True:
        current = fetch()
        if current != last:
            show(current)
            last = current
        if not wait(interval):
            return


def _sleep(seconds: float) -> bool:
    threading.Event().wait(seconds)
    return True


def show_list(
    fetch: Callable[[ControlPlaneClient], M],
    table: Callable[[M, bool], Table],
    ids: Collection[str],
    *,
    addr: str,
    token: str | None,
    ca: Path | None,
    timeout: float,
    output: Output,
    watch: bool = False,
    interval: float = DEFAULT_INTERVAL_S,
) -> None:
    """The list as ``output``; ``table(resp, wide)`` builds the table, whose ``ids`` columns
    stay whole. With ``watch``: a table under the time it was read, or one JSON document a
    line (YAML: one document each), per change."""

    def show(resp: M) -> None:
        if output.structured and watch:
            print_item(resp, output)
        elif output.structured:
            print_data(resp, output)
        else:
            out = console()
            if watch:
                out.print(datetime.now(UTC).strftime("%H:%M:%S UTC"), highlight=False)
            print_table(out, table(resp, output == Output.WIDE), ids)

    with daemon(addr, token, ca, timeout) as c:
        if not watch:
            show(fetch(c))
            return
        try:
            poll(lambda: fetch(c), show, interval, _sleep)
        except KeyboardInterrupt:
            raise typer.Exit(0) from None
