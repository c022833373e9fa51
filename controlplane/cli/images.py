"""``gpucap images``: the baked machine images, one row per build of each key (customer,
account, region, runtime image): the cloud's image id, state, version, the digest the
builder pulled, its age, whether new nodes boot from it or a newer one superseded it, and
its last error. Deleted builds are not listed."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from controlplane.cli.output import print_data
from controlplane.cli.pages import all_pages
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

CloudOption = Annotated[
    str | None, typer.Option("--cloud", help="Only this cloud (aws, gcp, oci).", show_default=False)
]
RegionOption = Annotated[
    str | None, typer.Option("--region", help="Only this region.", show_default=False)
]


def register(app: typer.Typer) -> None:
    app.command("images", help="Baked machine images: what new nodes boot from, per region.")(
        images
    )


def images(
    customer: CustomerOption = None,
    cloud: CloudOption = None,
    region: RegionOption = None,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        request = pb.ListImagesRequest(
            customer=customer or "", cloud=cloud or "", region=region or ""
        )
        resp: pb.ListImagesResponse = all_pages(c.stub.ListImages, request, timeout=c.timeout)
    if output.structured:
        print_data(resp, output)
        return
    table = Table(
        "KEY", "RUNTIME IMAGE", "IMAGE", "STATE", "V", "READY", "USE", "DIGEST", "LAST ERROR"
    )
    for x in resp.images:
        use = "in use" if x.in_use else "-"
        if x.superseded_by:
            use = f"superseded by {x.superseded_by}"
        table.add_row(
            f"{x.customer}/{x.account}/{x.cloud}:{x.region}",
            x.runtime_image,
            x.image_id or "-",
            x.state,
            str(x.version),
            _when(x.ready_at),
            use,
            x.source_digest.rsplit("@", 1)[-1][:19] or "-",
            x.error[:60],
        )
    print_table(console(), table, ("KEY", "RUNTIME IMAGE", "IMAGE"))
