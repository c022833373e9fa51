"""``gpucap audit``: what the store tracks against what each cloud lists with gpucap's tags,
per account and region (gRPC Audit; the daemon makes one list call per site). Prints the
counts per site, then every finding with the ids on-call needs: account, region, instance,
intent (node or image build id), the state on each side and how old the intent is.

Exit status: 0 when clean; 4 when anything is leaked, lost or duplicated, or a site could
not be listed (then the audit is incomplete); 1/3 as every command (rejected/unreachable)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from controlplane.cli.output import print_data
from controlplane.cli.read import CustomerOption
from controlplane.cli.remote import (
    DEFAULT_ADDR,
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

EXIT_FINDINGS = 4  # distinct from 1 (rejected) and 3 (unreachable): the fleet is not clean
# One list call per (account, region), some retried on throttling: more than a read's 10 s.
AUDIT_TIMEOUT_S = 60.0


def register(app: typer.Typer) -> None:
    app.command(
        "audit",
        help="Compare what the store tracks with what each cloud lists as gpucap's: "
        f"leaked, lost and duplicated instances. Exit {EXIT_FINDINGS} unless clean.",
    )(audit)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def audit(
    account: Annotated[
        str | None,
        typer.Option("--account", help="Only this account (by name).", show_default=False),
    ] = None,
    customer: CustomerOption = None,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = AUDIT_TIMEOUT_S,
) -> None:
    request = pb.AuditRequest(account=account or "", customer=customer or "")
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.AuditResponse = c.stub.Audit(request, timeout=c.timeout)
    if output.structured:
        print_data(resp, output)
    else:
        _print(resp)
    if not resp.clean:
        raise typer.Exit(EXIT_FINDINGS)


def _print(resp: pb.AuditResponse) -> None:
    if not resp.sites:
        typer.echo("no accounts to audit (no policy has one)")
        return
    sites = Table(
        "CLOUD",
        "ACCOUNT",
        "REGION",
        "CUSTOMER",
        "TRACKED",
        "IN CLOUD",
        "STOPPED",
        "SETTLING",
        "LEAKED",
        "LOST",
        "DUPLICATED",
        "ERROR",
    )
    for s in resp.sites:
        sites.add_row(
            s.cloud,
            s.account,
            s.region,
            s.customer or "(all)",
            *(
                str(n)
                for n in (s.tracked, s.in_cloud, s.stopped, s.settling)
                + (s.leaked, s.lost, s.duplicated)
            ),
            s.error or "",
        )
    console().print(sites)
    findings = Table(
        "FINDING",
        "REASON",
        "CUSTOMER",
        "ACCOUNT",
        "REGION",
        "INSTANCE",
        "CLOUD STATE",
        "INTENT",
        "STORE STATE",
        "AGE",
        "IN STATE",
        "DETAIL",
    )
    for s in resp.sites:
        for f in s.findings:
            kind = f" ({f.kind})" if f.kind else ""
            findings.add_row(
                f.category,
                f.reason,
                f.customer or "-",
                f.account,
                f.region,
                "\n".join(i.instance_id for i in f.instances)
                or f"{f.tracked_instance_id or '-'} (gone)",
                "\n".join(i.state for i in f.instances) or "-",
                (f.intent_id or "-") + kind,
                f.node_state or "(no row)",
                _age(f.age_s if f.HasField("age_s") else None),
                _age(f.state_age_s if f.HasField("state_age_s") else None),
                f.detail,
            )
    if findings.row_count:
        # Ids are pasted into cloud consoles and other commands: never cut.
        print_table(console(), findings, ("ACCOUNT", "REGION", "INSTANCE", "INTENT"))
    summary = (
        f"tracked {resp.tracked} (stopped {resp.stopped}), in cloud {resp.in_cloud}, "
        f"settling {resp.settling}, leaked {resp.leaked}, lost {resp.lost}, "
        f"duplicated {resp.duplicated}"
    )
    if resp.unreachable:
        summary += f"; {resp.unreachable} site(s) could not be listed"
    typer.echo(f"{'clean' if resp.clean else 'NOT CLEAN'}: {summary} (grace {resp.grace_s:.0f} s)")
