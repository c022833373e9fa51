"""``gpucap describe model|node NAME``: everything on-call asks about one object, on one page,
from the same reads as the list commands (GetModel, ListNodes, ListDecisions, ExplainModel,
ListPools, ListEvents). ``-o json|yaml`` gives the same reads as one document."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Console
from rich.table import Table

from controlplane.cli.output import print_data, to_data
from controlplane.cli.pages import all_pages
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
    fail,
    resolve_model,
)
from controlplane.cli.tables import print_table
from controlplane.cli.why import (
    exclusion_words,
    expected_ready,
    node_history,
    reason_words,
    replica_sum,
    span,
)
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

DecisionsOption = Annotated[
    int, typer.Option("--decisions", "-n", min=1, max=100, help="How many latest decisions.")
]


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        no_args_is_help=True, help="Everything about one model or node, in one page."
    )
    group.command(
        "model",
        help="A model's spec, replicas by state, latest decisions and why, where its next "
        "replica may start (or why not, pool by pool) and its expected time-to-ready.",
    )(model)
    group.command(
        "node", help="A node's state history, boot phases, pool, instance, health and events."
    )(node)
    app.add_typer(group, name="describe")


def _at(t: Timestamp) -> str:
    return t.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S") if t.seconds else "-"


def _fields(out: Console, rows: Sequence[tuple[str, str]]) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for k, v in rows:
        grid.add_row(k, v)
    out.print(grid)


def _spec(m: pb.Model) -> str:
    s = m.spec
    shapes = ", ".join(f"{sh.shape} ({sh.max_concurrency} concurrent)" for sh in s.shapes)
    target = s.target.metric or "concurrency"
    util = f" at {s.target.utilization:g}" if s.target.HasField("utilization") else ""
    where = f"clouds {', '.join(s.clouds) or 'any'}; regions {', '.join(s.regions) or 'any'}"
    return (
        f"shapes {shapes or '-'}; replicas {s.min_replicas}..{s.max_replicas}; "
        f"target {target}{util}; {where}"
    )


def _override(m: pb.Model) -> str:
    if m.HasField("deleted_at"):
        return f"deleted at {_at(m.deleted_at)} (its replicas drain)"
    if m.HasField("pinned_replicas"):
        return f"pinned to {m.pinned_replicas} by on-call (the autoscaler does not decide)"
    if m.paused:
        return "paused by on-call (the replica count is held)"
    return "autoscaling"


def model(
    name: ModelArgument,
    decisions: DecisionsOption = 5,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        customer, short = resolve_model(c, name)
        t = c.timeout
        m: pb.Model = c.stub.GetModel(pb.GetModelRequest(customer=customer, name=short), timeout=t)
        nodes: pb.ListNodesResponse = all_pages(
            c.stub.ListNodes, pb.ListNodesRequest(customer=customer, model=short), timeout=t
        )
        decided: pb.ListDecisionsResponse = c.stub.ListDecisions(
            pb.ListDecisionsRequest(customer=customer, model=short, limit=decisions), timeout=t
        )
        explained: pb.ExplainModelResponse | None = None
        if not m.HasField("deleted_at"):  # (a deleted model places nothing)
            explained = c.stub.ExplainModel(
                pb.ExplainModelRequest(customer=customer, model=short), timeout=t
            )
        pools: pb.ListPoolsResponse = all_pages(
            c.stub.ListPools, pb.ListPoolsRequest(customer=customer), timeout=t
        )
    by_id = {p.id: p for p in pools.pools}
    excluded = [
        {
            "pool_id": x.pool_id,
            "filter": x.filter,
            "why": exclusion_words(x.filter, m.spec, by_id.get(x.pool_id)),
        }
        for x in (explained.excluded if explained else [])
    ]
    if output.structured:
        doc: dict[str, Any] = {
            "model": to_data(m),
            "nodes": to_data(nodes).get("nodes", []),
            "decisions": to_data(decided).get("decisions", []),
            "placement": to_data(explained) if explained else None,
            "excluded_pools": excluded,
        }
        print_data(doc, output)
        return
    out = console()
    by_state = dict(sorted(m.replicas_by_state.items()))
    _fields(
        out,
        [
            ("Model", f"{m.customer}/{m.name}"),
            ("Owner", m.source or "-"),
            ("Created", f"{_at(m.created_at)} UTC, updated {_at(m.updated_at)} UTC"),
            ("Spec", _spec(m)),
            ("Autoscaler", _override(m)),
            ("Replicas", replica_sum(m)),
            (
                "By state",
                " ".join(f"{k}={v}" for k, v in by_state.items())
                + f" (total {sum(by_state.values())})"
                if by_state
                else "none",
            ),
            ("Expected ready", expected_ready(explained) if explained else "-"),
        ],
    )
    out.print("\nLatest decisions (oldest first):")
    dt = Table("ID", "WHEN (UTC)", "KIND", "DESIRED", "WHY", "NUMBERS")
    for d in decided.decisions:
        dt.add_row(
            str(d.id),
            _at(d.at),
            d.kind,
            str(d.desired) if d.HasField("desired") else "-",
            reason_words(d.reason),
            d.detail or "-",
        )
    if not decided.decisions:
        dt.add_row("-", "-", "-", "-", "no decision recorded yet", "-")
    print_table(out, dt, ("ID",))
    if explained:
        out.print("\nWhere a new replica may start (fastest first):")
        pt = Table("POOL", "TIER", "$/H", "READY IN", "FROM", "NOW")
        for p in explained.pools:
            pt.add_row(
                p.pool_id,
                p.tier,
                f"{p.price_usd_per_hour:.2f}",
                span(p.expected_ready_s),
                p.source,
                _now(p),
            )
        print_table(out, pt, ("POOL",))
        if excluded:
            out.print("\nPools its policy rules out (placement's filter):")
            xt = Table("POOL", "FILTER", "WHY")
            for x in excluded:
                xt.add_row(x["pool_id"], x["filter"], x["why"])
            print_table(out, xt, ("POOL",))
    out.print("\nNodes:")
    nt = Table("NODE", "STATE", "POOL", "INSTANCE ID", "SINCE (UTC)")
    for n in nodes.nodes:
        since = getattr(n, f"{n.state}_at", None)
        nt.add_row(
            n.id,
            n.state,
            n.pool_id,
            n.instance_id or "-",
            _at(since) if isinstance(since, Timestamp) else "-",
        )
    if not nodes.nodes:
        nt.add_row("-", "no live node", "-", "-", "-")
    print_table(out, nt, ("NODE", "POOL", "INSTANCE ID"))


def _now(p: pb.PoolEstimate) -> str:
    if p.cordoned:
        return "cordoned: takes no new replica"
    if p.HasField("blocked_until"):
        left = max(
            0, int((p.blocked_until.ToDatetime(tzinfo=UTC) - datetime.now(UTC)).total_seconds())
        )
        return f"blocked {left}s more (after a stockout)"
    return "open"


def node(
    node_id: Annotated[str, typer.Argument(help="Node id (see gpucap get nodes).")],
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        listed: pb.ListNodesResponse = c.stub.ListNodes(
            pb.ListNodesRequest(node_id=node_id, include_terminal=True), timeout=c.timeout
        )
        found = [n for n in listed.nodes if n.id == node_id]
        if not found:
            fail(f"node {node_id!r} not found (see gpucap get nodes --all)")
        n = found[0]
        events: pb.ListEventsResponse = c.stub.ListEvents(
            pb.ListEventsRequest(customer=n.customer, model=n.model, limit=1000),
            timeout=c.timeout,
        )
    mine = [e for e in events.events if e.node == n.id]
    if output.structured:
        print_data({"node": to_data(n), "events": [to_data(e) for e in mine]}, output)
        return
    out = console()
    health = f"{n.probe_failures} consecutive failed probes" if n.probe_failures else "probes ok"
    if n.HasField("retiring_at"):
        health += (
            f"; retiring since {_at(n.retiring_at)} UTC (serves until its replacement is ready)"
        )
    _fields(
        out,
        [
            ("Node", n.id),
            ("Model", f"{n.customer}/{n.model}" if n.model else n.customer),
            ("Replica", n.replica_id or "-"),
            ("Pool", n.pool_id),
            (
                "Where",
                f"{n.cloud} account {n.account}, {n.region} {n.zone or '(zone not yet known)'}",
            ),
            ("Instance", f"{n.instance_type} {n.instance_id or '(not created yet)'}"),
            ("Private IP", n.private_ip or "-"),
            ("State", n.state + (f" (error: {n.error})" if n.error else "")),
            ("Create attempts", str(n.attempts)),
            ("Health", health),
        ],
    )
    out.print("\nState history:")
    st = Table("STATE", "AT (UTC)", "AFTER")
    for state, at, after in node_history(n):
        st.add_row(state, at.strftime("%Y-%m-%d %H:%M:%S"), after)
    out.print(st)
    out.print("\nBoot phases (the node's clock):")
    ph = Table("PHASE", "AT (UTC)", "DETAIL")
    for p in n.phases:
        ph.add_row(p.phase, _at(p.at), p.detail or "-")
    if not n.phases:
        ph.add_row("-", "-", "none reported yet")
    out.print(ph)
    out.print("\nEvents:")
    et = Table("ID", "TIME (UTC)", "SEVERITY", "KIND", "MESSAGE")
    for e in mine:
        et.add_row(str(e.id), _at(e.at), e.severity, e.kind, e.message)
    if not mine:
        et.add_row("-", "-", "-", "-", "none")
    print_table(out, et, ("ID",))
