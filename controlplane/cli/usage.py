"""``gpucap usage``: GPU-hours, node-hours and cost per customer, and per model, capacity
tier or cloud with ``--by`` (gRPC GetUsage), over ``--since``/``--until`` (a duration ago
such as 24h, or an ISO 8601 time). A table for people; JSON, YAML or CSV for scripts and
spreadsheets, numbers as numbers."""

from __future__ import annotations

import csv
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table

from controlplane.cli.decisions import parse_since
from controlplane.cli.output import Output, print_data
from controlplane.cli.read import CustomerOption
from controlplane.cli.remote import (
    DEFAULT_ADDR,
    DEFAULT_TIMEOUT_S,
    AddrOption,
    CaOption,
    TimeoutOption,
    TokenOption,
    console,
    daemon,
)
from controlplane.cli.tables import print_table
from schema.gen.gpucap.v1 import control_plane_pb2 as pb


class UsageOutput(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"
    CSV = "csv"


class GroupBy(StrEnum):
    MODEL = "model"
    TIER = "tier"
    CLOUD = "cloud"


_NUMBERS = ("nodes", "gpu_hours", "node_hours", "cost_usd")


def register(app: typer.Typer) -> None:
    app.command(
        "usage",
        help="GPU-hours, node-hours and cost per customer (--by model, tier or cloud), "
        "from each node's request to its release, less warm-pool stops.",
    )(usage)


def _time(value: str | None, option: str, now: datetime) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_since(value, now)
    except typer.BadParameter as exc:
        exc.param_hint = option
        raise


def usage(
    customer: CustomerOption = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="From this time: a duration ago (90s, 15m, 24h, 7d) or ISO 8601 "
            "(UTC unless it says). Default: from the first node.",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="Up to this time (same forms), not included. Default: now.",
            show_default=False,
        ),
    ] = None,
    by: Annotated[
        list[GroupBy] | None,
        typer.Option("--by", help="Group by this too (repeat for several).", show_default=False),
    ] = None,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: Annotated[
        UsageOutput,
        typer.Option("--output", "-o", help="Human table; JSON, YAML or CSV for machines."),
    ] = UsageOutput.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    now = datetime.now(UTC)  # (both relative times count back from one now)
    keys = [g.value for g in dict.fromkeys(by or ())]
    request = pb.GetUsageRequest(customer=customer or "", group_by=keys)
    for field, value in (
        ("since", _time(since, "--since", now)),
        ("until", _time(until, "--until", now)),
    ):
        if value is not None:
            getattr(request, field).FromDatetime(value)
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.GetUsageResponse = c.stub.GetUsage(request, timeout=c.timeout)
    if output in (UsageOutput.JSON, UsageOutput.YAML):
        print_data(resp, Output(output.value))
    elif output == UsageOutput.CSV:
        _csv(resp, keys)
    else:
        _table(resp, keys)


def _csv(resp: pb.GetUsageResponse, keys: list[str]) -> None:
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["customer", *keys, *_NUMBERS])
    for r in resp.rows:
        out.writerow(
            [r.customer, *(getattr(r, k) for k in keys), *(getattr(r, n) for n in _NUMBERS)]
        )


def _at(resp: pb.GetUsageResponse, field: str) -> str:
    at: datetime = getattr(resp, field).ToDatetime(tzinfo=UTC)
    return "the first node" if at.timestamp() == 0 else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(resp: pb.GetUsageResponse, keys: list[str]) -> None:
    table = Table(
        "CUSTOMER", *(k.upper() for k in keys), "NODES", "GPU-HOURS", "NODE-HOURS", "COST USD"
    )
    for column in table.columns[1 + len(keys) :]:
        column.justify = "right"
    for r in resp.rows:
        table.add_row(
            r.customer,
            *(getattr(r, k) for k in keys),
            str(r.nodes),
            f"{r.gpu_hours:,.2f}",
            f"{r.node_hours:,.2f}",
            f"{r.cost_usd:,.2f}",
        )
    if resp.rows:  # (names are pasted into other commands: never cut)
        print_table(console(), table, ("CUSTOMER", "MODEL"))
    typer.echo(
        f"from {_at(resp, 'since')} to {_at(resp, 'until')}: {resp.gpu_hours:,.2f} GPU-hours, "
        f"{resp.node_hours:,.2f} node-hours, ${resp.cost_usd:,.2f}"
    )
