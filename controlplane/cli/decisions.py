"""``gpucap decisions``: what the autoscaler and placement decided and why, and
``gpucap decisions replay ID``: re-run the autoscaler on a recorded decision's inputs and
show whether it would decide the same today (the runbook's "why did it do that?")."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated

import typer
from google.protobuf.timestamp_pb2 import Timestamp
from rich.table import Table

from controlplane.cli.output import print_data
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
from controlplane.decider_code import UNKNOWN
from schema.gen.gpucap.v1 import control_plane_pb2 as pb


class Kind(StrEnum):
    AUTOSCALE = "autoscale"
    PLACEMENT = "placement"


_AGO = re.compile(r"^(\d+)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        invoke_without_command=True,
        no_args_is_help=False,
        help="Recorded autoscaler and placement decisions; `replay ID` re-runs one.",
    )
    group.callback()(list_decisions)
    group.command("replay", help="Re-run the autoscaler on a recorded decision and compare.")(
        replay
    )
    app.add_typer(group, name="decisions")


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """``15m``/``2h``/``1d``/``90s`` ago, or an ISO 8601 time (UTC when no zone is given)."""
    m = _AGO.match(value.strip())
    if m:
        ago = timedelta(seconds=int(m.group(1)) * _UNIT_S[m.group(2)])
        return (now or datetime.now(UTC)) - ago
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is neither a duration (90s, 15m, 2h, 1d) nor an ISO 8601 time "
            "(2026-01-31T14:05:00Z)",
            param_hint="--since",
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _at(t: Timestamp) -> str:
    return t.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S")


def list_decisions(
    ctx: typer.Context,
    customer: Annotated[
        str | None, typer.Option("--customer", "-c", help="Only this customer.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Only this model (model or customer/model)."),
    ] = None,
    kind: Annotated[Kind | None, typer.Option("--kind", "-k", help="Only this kind.")] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="From this time on: a duration ago (15m, 2h, 1d) or ISO 8601."
        ),
    ] = None,
    since_id: Annotated[
        int, typer.Option("--since-id", min=0, help="Only decisions after this id.")
    ] = 0,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 50,
    inputs: Annotated[
        bool,
        typer.Option("--inputs", help="Include each decision's recorded inputs (JSON output)."),
    ] = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    # The group's callback: lists unless a subcommand (replay) was given.
    if ctx.invoked_subcommand is not None:
        return
    if model and "/" in model and not customer:
        customer, model = model.split("/", 1)
    request = pb.ListDecisionsRequest(
        customer=customer or "",
        model=model or "",
        kind=kind.value if kind else "",
        since_id=since_id,
        limit=limit,
        include_inputs=inputs,
    )
    if since:
        request.since.FromDatetime(parse_since(since))
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.ListDecisionsResponse = c.stub.ListDecisions(request, timeout=c.timeout)
    if output.structured:
        print_data(resp, output)
        return
    table = Table("ID", "WHEN (UTC)", "CUSTOMER", "MODEL", "KIND", "DESIRED", "REASON", "DETAIL")
    for d in resp.decisions:
        table.add_row(
            str(d.id),
            _at(d.at),
            d.customer,
            d.model,
            d.kind,
            str(d.desired) if d.HasField("desired") else "-",
            d.reason,
            d.detail or "-",
            style="yellow" if d.reason in ("pinned", "paused", "unplaced") else None,
        )
    print_table(console(), table, ("ID", "MODEL"))


def replay(
    decision_id: Annotated[int, typer.Argument(min=1, help="Decision id (see gpucap decisions).")],
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    """Exit 0 whether or not the replay matches; ``matches`` in the JSON says which."""
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.ReplayDecisionResponse = c.stub.ReplayDecision(
            pb.ReplayDecisionRequest(id=decision_id), timeout=c.timeout
        )
    if output.structured:
        print_data(resp, output)
        return
    d = resp.decision
    out = console()
    verdict = "[green]same decision[/]" if resp.matches else "[red]DIFFERENT decision[/]"
    out.print(
        f"decision {d.id}: {d.kind} of {d.customer}/{d.model} at {_at(d.at)} UTC; "
        f"autoscaler {resp.autoscaler!r} replayed on the recorded inputs: {verdict}"
    )
    table = Table("", "DESIRED", "REASON", "DETAIL")
    for label, o in (("recorded", resp.recorded), ("replayed", resp.replayed)):
        table.add_row(label, str(o.desired), o.reason, o.detail or "-")
    out.print(table)
    out.print(_code_verdict(resp))


def _code_verdict(resp: pb.ReplayDecisionResponse) -> str:
    """Whether the decider code changed since the decision: what a difference means."""
    now = f"{resp.autoscaler} {resp.running_code}"
    if not resp.HasField("same_code"):
        if not resp.recorded_code and resp.running_code != UNKNOWN:
            return f"decider code: not recorded with this decision (older record); running {now}"
        return "decider code: cannot be compared (a source that could not be read)"
    if not resp.same_code:
        then = f"{resp.recorded_decider or resp.autoscaler} {resp.recorded_code}"
        return f"decider code: changed since the decision (recorded {then}, running {now})" + (
            "; a different decision can come from that" if not resp.matches else ""
        )
    return f"decider code: the same as at the decision ({now})" + (
        "" if resp.matches else "; deciders are pure, so a different decision is a bug"
    )
