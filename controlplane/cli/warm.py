"""``gpucap warm [MODEL]``: each model's warm pool. Per model and pool: the policy's mode and
bound, the nodes waiting and what they cost an hour while they wait (stopped: their boot
volumes; ready: the running nodes); then every warm replica with its state (filling,
stopping, stopped, resuming, ready), nodes, since when and cost; then the totals.
``customer/model`` or a model name (with ``--customer`` when several have it)."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

import typer
from rich.table import Table

from controlplane.cli.output import print_data
from controlplane.cli.pages import merge, pages
from controlplane.cli.read import CustomerOption, _when
from controlplane.cli.remote import (
    DEFAULT_ADDR,
    DEFAULT_TIMEOUT_S,
    AddrOption,
    CaOption,
    Output,
    OutputOption,
    TimeoutOption,
    TokenOption,
    console,
    daemon,
)
from controlplane.cli.tables import print_table
from schema.gen.gpucap.v1 import control_plane_pb2 as pb


def register(app: typer.Typer) -> None:
    app.command("warm", help="Warm pools: replicas waiting to be resumed, and their cost.")(warm)


def warm(
    model: Annotated[
        str | None, typer.Argument(help="Only this model (customer/model, or model).")
    ] = None,
    customer: CustomerOption = None,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    name = model or ""
    if "/" in name:
        customer, name = name.split("/", 1)
    # The daemon resolves the name (NOT_FOUND for an unknown one); a name several customers
    # use lists each one's, as a filter should.
    request = pb.ListWarmPoolsRequest(customer=customer or "", model=name)
    with daemon(addr, token, ca, timeout) as c:
        got = pages(c.stub.ListWarmPools, request, timeout=c.timeout)
    resp: pb.ListWarmPoolsResponse = merge(got)  # the totals: over every page
    resp.nodes = sum(p.nodes for p in got)
    resp.usd_per_hour = sum(p.usd_per_hour for p in got)
    if output.structured:
        print_data(resp, output)
        return
    if not resp.pools:
        typer.echo("no warm pools (no model's policy has warm_pool)")
        return
    pools = Table("MODEL", "POOL", "MODE", "MAX NODES", "NODES", "REPLICAS", "$/HOUR")
    replicas = Table("MODEL", "POOL", "REPLICA", "STATE", "NODES", "SINCE", "$/HOUR")
    # Ids are pasted into other commands (`gpucap explain`, `nodes --pool`, `cordon`): a
    # narrow terminal squeezes the other columns, never these.
    for table, ids in ((pools, (0, 1)), (replicas, (0, 1, 2))):
        for i in ids:
            table.columns[i].no_wrap = True
    for p in resp.pools:
        where = p.pool_id or "(none yet)"
        counts = Counter(r.state for r in p.replicas)
        pools.add_row(
            f"{p.customer}/{p.model}",
            where,
            p.mode or "(not in policy)",
            str(p.max_nodes) if p.max_nodes else "-",
            str(p.nodes),
            " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "-",
            f"{p.usd_per_hour:.4f}",
        )
        for r in p.replicas:
            replicas.add_row(
                f"{p.customer}/{p.model}",
                where,
                r.id,
                r.state,
                str(r.nodes),
                _when(r.since),
                f"{r.usd_per_hour:.4f}",
            )
    print_table(console(), pools, ("MODEL", "POOL"))
    if replicas.row_count:
        print_table(console(), replicas, ("MODEL", "POOL", "REPLICA"))
    typer.echo(f"total: {resp.nodes} warm nodes, ${resp.usd_per_hour:.4f}/hour")
