"""Read commands of the admin CLI: ``gpucap status|models|nodes|pools|endpoints|events``.
Each asks the running daemon over gRPC and prints a rich table, or JSON with ``--output
json``; ``events --follow`` and ``endpoints --watch`` stream until Ctrl-C."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import grpc
import typer
from google.protobuf.timestamp_pb2 import Timestamp
from rich.table import Table

from controlplane.cli.listing import DEFAULT_INTERVAL_S, IntervalOption, WatchOption, show_list
from controlplane.cli.output import print_data, print_item
from controlplane.cli.pages import all_pages
from controlplane.cli.remote import (
    DEFAULT_ADDR,
    DEFAULT_TIMEOUT_S,
    EXIT_UNREACHABLE,
    AddrOption,
    CaOption,
    Output,
    OutputOption,
    TimeoutOption,
    TokenOption,
    console,
    daemon,
    fail,
)
from controlplane.cli.tables import print_table
from controlplane.grpc.client import ControlPlaneClient
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

CustomerOption = Annotated[
    str | None, typer.Option("--customer", "-c", help="Only this customer.", show_default=False)
]


def register(app: typer.Typer) -> None:
    app.command("status", help="Daemon version, uptime, counts and the last tick of each job.")(
        status
    )
    app.command("models", help="Models with desired and actual replicas.")(models)
    app.command("nodes", help="Cloud nodes and their lifecycle state.")(nodes)
    app.command("pools", help="Capacity pools: where replicas may run, tier and price.")(pools)
    app.command("endpoints", help="Where each model is served: its ready replicas.")(endpoints)
    app.command("events", help="Recent events; --follow streams new ones.")(events)


# --------------------------------------------------------------------------- formatting


def _when(t: Timestamp, now: datetime | None = None) -> str:
    """``12s ago`` style age of a timestamp; ``-`` when unset (proto default)."""
    if t.seconds == 0 and t.nanos == 0:
        return "-"
    at = t.ToDatetime(tzinfo=UTC)
    secs = int(((now or datetime.now(UTC)) - at).total_seconds())
    if secs < 0:
        return at.strftime("%Y-%m-%d %H:%M:%S")
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def _by_state(counts: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "-"


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


# --------------------------------------------------------------------------- commands


def status(
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        st: pb.Status = c.stub.GetStatus(pb.GetStatusRequest(), timeout=c.timeout)
    if output.structured:
        print_data(st, output)
        return
    out = console()
    out.print(
        f"gpucap {st.version} at {addr}: up {_duration(st.uptime_s)}, "
        f"{st.customers} customers, {st.models} models, {st.pools} pools, "
        f"nodes: {_by_state(st.nodes_by_state)}"
    )
    if st.HasField("lease"):
        out.print(_lease_line(st.lease))
    table = Table("JOB", "LAST TICK", "DURATION", "RUNS", "FAILURES", "LAST ERROR")
    for j in st.jobs:
        table.add_row(
            j.job,
            _when(j.last_started_at),
            f"{j.last_duration_s * 1000:.0f} ms",
            str(j.runs),
            str(j.failures),
            j.last_error or "-",
            style="red" if j.last_error else None,
        )
    if not st.jobs:
        table.add_row("(no job has ticked yet)", "", "", "", "", "")
    out.print(table)


def _lease_line(lease: pb.LeaseStatus) -> str:
    """One line on leadership: the role, and what it holds or whom it follows."""
    held = ", ".join(str(s) for s in lease.held_shards) or "none"
    line = f"lease: {lease.role} ({lease.holder}), shards held {held} of {lease.shards}"
    if lease.following:
        others = sorted(set(lease.following.values()))
        line += f", following {', '.join(others)}"
    if lease.error:
        line += f"; last round failed: {lease.error}"
    return line


def models(
    customer: CustomerOption = None,
    include_deleted: Annotated[
        bool, typer.Option("--all", "-a", help="Include deleted models (still draining).")
    ] = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    watch: WatchOption = False,
    interval: IntervalOption = DEFAULT_INTERVAL_S,
) -> None:
    request = pb.ListModelsRequest(customer=customer or "", include_deleted=include_deleted)

    def fetch(c: ControlPlaneClient) -> pb.ListModelsResponse:
        resp: pb.ListModelsResponse = all_pages(c.stub.ListModels, request, timeout=c.timeout)
        return resp

    show_list(
        fetch,
        models_table,
        ("CUSTOMER", "MODEL"),
        addr=addr,
        token=token,
        ca=ca,
        timeout=timeout,
        output=output,
        watch=watch,
        interval=interval,
    )


def models_table(resp: pb.ListModelsResponse, wide: bool = False) -> Table:
    several = any(len(m.spec.shapes) > 1 for m in resp.models)
    table = Table(
        "CUSTOMER",
        "MODEL",
        "OWNER",  # (Model.source: "policy" or "api", docs/policy.md)
        "DESIRED",
        "READY",
        "STARTING",
        "PROVISIONING",
        "DRAINING",
        "MIN..MAX",
        "OVERRIDE",
        "REASON",
        caption=(
            "DESIRED counts replicas of a model's first shape; a replica of a shape that "
            "serves more counts for more"
            if several
            else None
        ),
    )
    if wide:
        table.add_column("SHAPES")
        table.add_column("UPDATED")
    for m in resp.models:
        override = []
        if m.HasField("pinned_replicas"):
            override.append(f"pinned={m.pinned_replicas}")
        if m.paused:
            override.append("paused")
        if m.HasField("deleted_at"):
            override.append("deleted")
        table.add_row(
            m.customer,
            m.name,
            m.source,
            str(m.desired_replicas),
            str(m.ready_replicas),
            str(m.starting_replicas),
            str(m.provisioning_replicas),
            str(m.draining_replicas),
            f"{m.spec.min_replicas}..{m.spec.max_replicas}",
            " ".join(override) or "-",
            m.reason or "-",
            *([" ".join(sh.shape for sh in m.spec.shapes), _when(m.updated_at)] if wide else []),
        )
    return table


def _node_state(n: pb.Node) -> str:
    """The state, with what on-call must see beside it: leaving surge-first, failing probes."""
    notes = ["retiring"] if n.HasField("retiring_at") else []
    if n.probe_failures:
        notes.append(f"{n.probe_failures} failed probe{'s' if n.probe_failures > 1 else ''}")
    return f"{n.state} ({', '.join(notes)})" if notes else n.state


def nodes(
    customer: CustomerOption = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only this model.")] = None,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help="Only nodes in this state (repeatable)."),
    ] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="Only this pool id.")] = None,
    include_terminal: Annotated[
        bool, typer.Option("--all", "-a", help="Include terminated and failed nodes.")
    ] = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    watch: WatchOption = False,
    interval: IntervalOption = DEFAULT_INTERVAL_S,
) -> None:
    request = pb.ListNodesRequest(
        customer=customer or "",
        model=model or "",
        states=state or [],
        pool_id=pool or "",
        include_terminal=include_terminal,
    )

    def fetch(c: ControlPlaneClient) -> pb.ListNodesResponse:
        resp: pb.ListNodesResponse = all_pages(c.stub.ListNodes, request, timeout=c.timeout)
        return resp

    show_list(
        fetch,
        nodes_table,
        ("NODE", "MODEL", "INSTANCE ID"),
        addr=addr,
        token=token,
        ca=ca,
        timeout=timeout,
        output=output,
        watch=watch,
        interval=interval,
    )


def nodes_table(resp: pb.ListNodesResponse, wide: bool = False) -> Table:
    now = datetime.now(UTC)
    table = Table(
        "NODE",
        "CUSTOMER",
        "MODEL",
        "CLOUD",
        "REGION",
        "ZONE",
        "INSTANCE TYPE",
        "INSTANCE ID",
        "STATE",
        "SINCE",
        "BOOT",
        "ERROR",
    )
    if wide:
        for header in ("ACCOUNT", "POOL", "REPLICA", "PRIVATE IP", "ATTEMPTS"):
            table.add_column(header)
    for n in resp.nodes:
        since = getattr(n, f"{n.state}_at", None) if n.state else None
        table.add_row(
            n.id,
            n.customer,
            n.model or "-",
            n.cloud,
            n.region,
            n.zone or "-",
            n.instance_type,
            n.instance_id or "-",
            _node_state(n),
            _when(since, now) if isinstance(since, Timestamp) else "-",
            n.phases[-1].phase if n.phases else "-",
            n.error or "-",
            *(
                [n.account, n.pool_id, n.replica_id or "-", n.private_ip or "-", str(n.attempts)]
                if wide
                else []
            ),
            style="red" if n.state == "failed" else None,
        )
    return table


def pools(
    customer: CustomerOption = None,
    cloud: Annotated[str | None, typer.Option("--cloud", help="Only aws, gcp or oci.")] = None,
    include_inactive: Annotated[
        bool, typer.Option("--all", "-a", help="Include pools the policy no longer allows.")
    ] = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    watch: WatchOption = False,
    interval: IntervalOption = DEFAULT_INTERVAL_S,
) -> None:
    request = pb.ListPoolsRequest(
        customer=customer or "", cloud=cloud or "", include_inactive=include_inactive
    )

    def fetch(c: ControlPlaneClient) -> pb.ListPoolsResponse:
        resp: pb.ListPoolsResponse = all_pages(c.stub.ListPools, request, timeout=c.timeout)
        return resp

    show_list(
        fetch,
        pools_table,
        ("POOL",),
        addr=addr,
        token=token,
        ca=ca,
        timeout=timeout,
        output=output,
        watch=watch,
        interval=interval,
    )


def pools_table(resp: pb.ListPoolsResponse, wide: bool = False) -> Table:
    table = Table(
        "POOL",
        "CLOUD",
        "REGION",
        "INSTANCE TYPE",
        "SHAPE",
        "TIER",
        "$/NODE-H",
        "COMMITTED",
        "STATUS",
        "NODES",
    )
    if wide:
        for header in ("ACCOUNT", "OWNER", "ZONES", "RESERVATION"):
            table.add_column(header)
    now = datetime.now(UTC)
    for p in resp.pools:
        flags = []
        if p.cordoned:
            flags.append("cordoned")
        if p.HasField("unavailable_until") and p.unavailable_until.ToDatetime(tzinfo=UTC) > now:
            until = p.unavailable_until.ToDatetime(tzinfo=UTC).strftime("%H:%M:%S")
            flags.append(f"unavailable until {until}: {p.unavailable_reason}")
        for b in p.zone_blocks:
            if b.until.ToDatetime(tzinfo=UTC) > now:
                until = b.until.ToDatetime(tzinfo=UTC).strftime("%H:%M:%S")
                flags.append(f"{b.zone} unavailable until {until}: {b.reason}")
        if not p.active:
            flags.append("inactive")
        table.add_row(
            p.id,
            p.cloud,
            p.region,
            p.instance_type,
            p.gpu_shape,
            p.tier,
            f"{p.price_usd_per_hour:.2f}",
            str(p.committed),
            ", ".join(flags) or "ok",
            _by_state(p.nodes_by_state),
            *([p.account, p.owner, " ".join(p.zones) or "-", p.reservation or "-"] if wide else []),
            style="yellow" if flags else None,
        )
    return table


def events(
    customer: CustomerOption = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only this model.")] = None,
    since: Annotated[
        int, typer.Option("--since", min=0, help="Only events after this event id.")
    ] = 0,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 50,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming new events (Ctrl-C stops).")
    ] = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    if follow:
        _follow(customer, model, since, limit, addr, token, ca, output, timeout)
        return
    request = pb.ListEventsRequest(
        since_id=since, limit=limit, customer=customer or "", model=model or ""
    )
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.ListEventsResponse = c.stub.ListEvents(request, timeout=c.timeout)
    if output.structured:
        print_data(resp, output)
        return
    table = Table("ID", "TIME", "SEVERITY", "KIND", "CUSTOMER", "MODEL", "MESSAGE")
    for e in resp.events:
        table.add_row(*_event_row(e), style=_SEVERITY_STYLE.get(e.severity))
    print_table(console(), table, ("ID", "MODEL"))


_SEVERITY_STYLE = {"warning": "yellow", "error": "red"}


def _event_row(e: pb.Event) -> tuple[str, ...]:
    at = e.at.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S")
    return (str(e.id), at, e.severity, e.kind, e.customer or "-", e.model or "-", e.message)


def _follow(
    customer: str | None,
    model: str | None,
    since: int,
    limit: int,
    addr: str,
    token: str | None,
    ca: Path | None,
    output: Output,
    timeout: float,
) -> None:
    """One line per event (JSON Lines with ``--output json``) as they happen."""
    request = pb.StreamEventsRequest(
        since_id=since, tail=0 if since else limit, customer=customer or "", model=model or ""
    )
    out = console()
    with _streaming(addr, token, ca, timeout) as c:
        for e in c.stream_events(request):
            if output.structured:
                print_item(e, output)
            else:
                out.print(
                    "  ".join(_event_row(e)),
                    style=_SEVERITY_STYLE.get(e.severity),
                    markup=False,
                    highlight=False,
                )


@contextmanager
def _streaming(
    addr: str, token: str | None, ca: Path | None, timeout: float
) -> Iterator[ControlPlaneClient]:
    """A client for a stream that runs until Ctrl-C (which exits 0)."""
    try:
        with daemon(addr, token, ca, timeout) as c:
            # Fail fast when the daemon is down, instead of waiting on the stream forever.
            grpc.channel_ready_future(c.channel).result(timeout=timeout)
            yield c
    except grpc.FutureTimeoutError:
        fail(
            f"cannot reach the gpucap daemon at {addr}: is `gpucap daemon` running?",
            EXIT_UNREACHABLE,
        )
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def endpoints(
    model: Annotated[str | None, typer.Argument(help="Only this model.")] = None,
    customer: CustomerOption = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", "-w", help="Print the whole list again each time it changes (Ctrl-C stops)."
        ),
    ] = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    if watch:
        _watch_endpoints(model, customer, addr, token, ca, output, timeout)
        return
    request = pb.ListEndpointsRequest(customer=customer or "", model=model or "")
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.ListEndpointsResponse = all_pages(c.stub.ListEndpoints, request, timeout=c.timeout)
    if output.structured:
        print_data(resp, output)
        return
    print_table(console(), _endpoints_table(resp.endpoints), _ENDPOINT_IDS)


def _watch_endpoints(
    model: str | None,
    customer: str | None,
    addr: str,
    token: str | None,
    ca: Path | None,
    output: Output,
    timeout: float,
) -> None:
    """Each snapshot as it comes: a table under its revision, or one JSON document a line."""
    request = pb.WatchEndpointsRequest(customer=customer or "", model=model or "")
    out = console()
    with _streaming(addr, token, ca, timeout) as c:
        for snap in c.watch_endpoints(request):
            if output.structured:
                print_item(snap, output)
                continue
            change = (
                f" (+{len(snap.added)} -{len(snap.removed)})" if snap.added or snap.removed else ""
            )
            n = len(snap.endpoints)
            out.print(f"revision {snap.revision}: {n} endpoint{'s' if n != 1 else ''}{change}")
            print_table(out, _endpoints_table(snap.endpoints), _ENDPOINT_IDS)


_ENDPOINT_IDS = ("MODEL", "ADDRESS", "REPLICA", "NODE", "POOL")


def _endpoints_table(endpoints: Sequence[pb.Endpoint]) -> Table:
    table = Table("CUSTOMER", "MODEL", "ADDRESS", "ENGINE", "REPLICA", "NODE", "POOL")
    for e in endpoints:
        table.add_row(
            e.customer,
            e.model,
            f"{e.address}:{e.port}",
            e.engine,
            e.replica_id,
            e.node_id,
            e.pool_id,
        )
    return table
