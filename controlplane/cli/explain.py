"""``gpucap explain MODEL``: where the model's next replica may start and how long it is
expected to take there. Every pool its policy allows, fastest first, with the expected
time-to-ready, where the figure comes from (the model's launches there, the phases learned
from boots reported there, its launches elsewhere, or coldstart.md's defaults for the
pool's cloud and node size), each phase with its own source, and what keeps a pool from
taking a launch now."""

from __future__ import annotations

from datetime import UTC, datetime

import typer
from rich.table import Table

from controlplane.cli.output import print_data
from controlplane.cli.remote import (
    DEFAULT_ADDR,
    DEFAULT_TIMEOUT_S,
    AddrOption,
    CaOption,
    ModelArgument,
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

PHASE_TITLES = {
    "capacity_vm": "CAPACITY+VM",
    "bootstrap": "BOOTSTRAP",
    "image": "IMAGE",
    "fetch": "FETCH",
    "load_init": "LOAD+INIT",
}


def register(app: typer.Typer) -> None:
    app.command(
        "explain", help="Where a model's next replica may start, and its expected cold start."
    )(explain)


def explain(
    model: ModelArgument,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        customer, name = resolve_model(c, model)
        resp: pb.ExplainModelResponse = c.stub.ExplainModel(
            pb.ExplainModelRequest(customer=customer, model=name), timeout=c.timeout
        )
    if output.structured:
        print_data(resp, output)
        return
    table = Table("POOL", "TIER", "$/H", "READY IN", "FROM", *PHASE_TITLES.values(), "NOW")
    for p in resp.pools:
        phases = {ph.name: ph for ph in p.phases}
        table.add_row(
            p.pool_id,
            p.tier,
            f"{p.price_usd_per_hour:.2f}",
            _duration(p.expected_ready_s),
            _source(p),
            *(_phase(phases.get(key)) for key in PHASE_TITLES),
            _now(p),
        )
    console().print(f"{resp.customer}/{resp.model}: {resp.desired_replicas} replicas desired")
    print_table(console(), table, ("POOL",))
    console().print("phases: * learned from boots reported in the pool; others coldstart.md")


def _duration(seconds: float) -> str:
    if seconds >= 90:
        return f"{seconds / 60:.1f}m"
    return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"


def _source(p: pb.PoolEstimate) -> str:
    if p.source in ("launches", "launches elsewhere"):
        return f"{p.source} ({p.launches})"
    return p.source


def _phase(ph: pb.ColdStartPhase | None) -> str:
    if ph is None:
        return "-"
    return _duration(ph.seconds) + ("*" if ph.source == "learned" else "")


def _now(p: pb.PoolEstimate) -> str:
    if p.cordoned:
        return "cordoned"
    if p.HasField("blocked_until"):
        until = p.blocked_until.ToDatetime(tzinfo=UTC)
        left = max(0, int((until - datetime.now(UTC)).total_seconds()))
        return f"blocked {left}s"
    return "open"
