"""``gpucap staging [MODEL]``: what weights are staged where, with progress. Each copy (its
site, state, bytes copied of its total, why it is there, its storage cost and its last
error) and each site (an account's staging bucket in one region) with its budget, what is
used and what that costs a month. ``customer/model`` or an unambiguous model name."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from controlplane.cli.output import print_data
from controlplane.cli.pages import all_pages
from controlplane.cli.read import CustomerOption
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
    resolve_model,
)
from controlplane.cli.tables import print_table
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

GB = 10**9


def register(app: typer.Typer) -> None:
    app.command("staging", help="Staged copies of model weights: what is where, with progress.")(
        staging
    )


def staging(
    model: Annotated[str | None, typer.Argument(help="Only this model (customer/model).")] = None,
    customer: CustomerOption = None,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        name = ""
        if model:
            customer, name = resolve_model(c, model)
        request = pb.ListStagingRequest(customer=customer or "", model=name)
        resp: pb.ListStagingResponse = all_pages(c.stub.ListStaging, request, timeout=c.timeout)
    if output.structured:
        print_data(resp, output)
        return
    copies = Table("MODEL", "SITE", "STATE", "PROGRESS", "GB", "$/MONTH", "WHY", "LAST ERROR")
    for x in resp.copies:
        copies.add_row(
            f"{x.customer}/{x.model}",
            f"{x.account}/{x.region}",
            x.state,
            f"{x.progress:.0%} ({x.objects_done}/{x.objects} objects)",
            f"{x.bytes_total / GB:.1f}",
            f"{x.usd_per_month:.2f}",
            x.reason,
            x.error[:60],
        )
    sites = Table("SITE", "BUCKET", "USED GB", "BUDGET GB", "$/GB-MONTH", "$/MONTH")
    for s in resp.sites:
        sites.add_row(
            f"{s.customer}/{s.account}/{s.region}",
            s.prefix_uri,
            f"{s.used_bytes / GB:.1f}",
            f"{s.budget_bytes / GB:.0f}",
            f"{s.usd_per_gb_month:.4f}",
            f"{s.usd_per_month:.2f}",
        )
    print_table(console(), copies, ("MODEL", "SITE"))
    print_table(console(), sites, ("SITE", "BUCKET"))
