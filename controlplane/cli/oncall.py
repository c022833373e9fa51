"""On-call overrides: ``gpucap pin|unpin|pause|resume MODEL``, ``gpucap cordon|uncordon
POOL`` or ``gpucap cordon|uncordon --cloud C [--region R] [--customer X] [--account A]``
(every pool the selector matches), and ``gpucap drain NODE``. Each is one recorded change
(an event with who-did-what) through the daemon.

Cordoning only stops *new* replicas from going to a pool; replicas already there keep
serving until drained, one node at a time with ``gpucap drain`` (placement then puts the
replacement in an uncordoned pool).

A model is named ``customer/model``, or just ``model`` when exactly one customer has it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
    daemon,
    fail,
    resolve_model,
)
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

PoolArgument = Annotated[
    str | None,
    typer.Argument(
        help="Pool id (customer/account/region/instance-type; see gpucap pools). "
        "Or select pools with --customer/--cloud/--region/--account instead.",
        show_default=False,
    ),
]
SelCustomerOption = Annotated[
    str, typer.Option("--customer", "-c", help="Select the pools of this customer.")
]
SelCloudOption = Annotated[str, typer.Option("--cloud", help="Select pools in aws, gcp or oci.")]
SelRegionOption = Annotated[str, typer.Option("--region", help="Select pools in this region.")]
SelAccountOption = Annotated[
    str, typer.Option("--account", help="Select pools of this account (policy name).")
]
ReasonOption = Annotated[str, typer.Option("--reason", "-r", help="Why (goes in the event).")]


def register(app: typer.Typer) -> None:
    app.command("pin", help="Pin a model's replica count (the autoscaler stops deciding).")(pin)
    app.command("unpin", help="Remove a pin; the autoscaler decides again.")(unpin)
    app.command("pause", help="Pause the autoscaler for a model (holds its replicas).")(pause)
    app.command("resume", help="Resume the autoscaler for a model.")(resume)
    app.command(
        "cordon",
        help="Place no new replicas in a pool, or in every pool a selector matches "
        "(e.g. --cloud aws --region us-east-1). Replicas already there keep running: "
        "drain them with `gpucap drain`.",
    )(cordon)
    app.command("uncordon", help="Allow placement in a pool (or selected pools) again.")(uncordon)
    app.command(
        "drain",
        help="Drain a node: it (and the rest of its replica) is terminated and placement "
        "replaces the replica elsewhere or in the same pool.",
    )(drain)


def _show_model(m: pb.Model, output: Output) -> None:
    if output.structured:
        print_data(m, output)
        return
    pin = f"pinned to {m.pinned_replicas}" if m.HasField("pinned_replicas") else "not pinned"
    state = "paused" if m.paused else "autoscaling"
    typer.echo(f"{m.customer}/{m.name}: {pin}, {state}")


def pin(
    model: ModelArgument,
    replicas: Annotated[int, typer.Argument(min=0, help="Replica count to hold.")],
    reason: ReasonOption = "",
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        customer, name = resolve_model(c, model)
        m = c.stub.PinModel(
            pb.PinModelRequest(customer=customer, name=name, replicas=replicas, reason=reason),
            timeout=c.timeout,
        )
    _show_model(m, output)


def unpin(
    model: ModelArgument,
    reason: ReasonOption = "",
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        customer, name = resolve_model(c, model)
        m = c.stub.PinModel(
            pb.PinModelRequest(customer=customer, name=name, reason=reason), timeout=c.timeout
        )
    _show_model(m, output)


def _set_paused(
    model: str,
    paused: bool,
    reason: str,
    addr: str,
    token: str | None,
    ca: Path | None,
    timeout: float,
) -> pb.Model:
    with daemon(addr, token, ca, timeout) as c:
        customer, name = resolve_model(c, model)
        m: pb.Model = c.stub.PauseModel(
            pb.PauseModelRequest(customer=customer, name=name, paused=paused, reason=reason),
            timeout=c.timeout,
        )
    return m


def pause(
    model: ModelArgument,
    reason: ReasonOption = "",
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    _show_model(_set_paused(model, True, reason, addr, token, ca, timeout), output)


def resume(
    model: ModelArgument,
    reason: ReasonOption = "",
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    _show_model(_set_paused(model, False, reason, addr, token, ca, timeout), output)


def _set_cordoned(
    pool: str | None,
    selector: pb.PoolSelector,
    cordoned: bool,
    reason: str,
    addr: str,
    token: str | None,
    ca: Path | None,
    timeout: float,
    output: Output,
) -> None:
    selected = [f"{f.name}={v}" for f, v in selector.ListFields()]
    if pool and selected:
        fail(f"give a pool id or a selector ({', '.join(selected)}), not both", 2)
    if not pool and not selected:
        fail(
            "give a pool id (see gpucap pools) or a selector: --customer, --cloud, --region "
            "or --account (refusing to touch every pool)",
            2,
        )
    if pool:
        _cordon_one(pool, cordoned, reason, addr, token, ca, timeout, output)
        return
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.CordonPoolsResponse = c.stub.CordonPools(
            pb.CordonPoolsRequest(selector=selector, cordoned=cordoned, reason=reason),
            timeout=c.timeout,
        )
    if output.structured:
        print_data(resp, output)
        return
    verb = "cordoned" if cordoned else "uncordoned"
    unchanged = resp.matched - len(resp.changed)
    typer.echo(
        f"{verb} {len(resp.changed)} of {resp.matched} pools matching {' '.join(selected)}"
        + (f" ({unchanged} already {verb})" if unchanged else "")
    )
    for p in resp.changed:
        typer.echo(f"{p.id}: {'cordoned' if p.cordoned else 'schedulable'}")
    if cordoned:
        typer.echo("replicas already in these pools keep running; drain nodes with gpucap drain")


def _cordon_one(
    pool: str,
    cordoned: bool,
    reason: str,
    addr: str,
    token: str | None,
    ca: Path | None,
    timeout: float,
    output: Output,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        p = c.stub.CordonPool(
            pb.CordonPoolRequest(pool_id=pool, cordoned=cordoned, reason=reason),
            timeout=c.timeout,
        )
    if output.structured:
        print_data(p, output)
    else:
        typer.echo(f"{p.id}: {'cordoned' if p.cordoned else 'schedulable'}")


def cordon(
    pool: PoolArgument = None,
    customer: SelCustomerOption = "",
    cloud: SelCloudOption = "",
    region: SelRegionOption = "",
    account: SelAccountOption = "",
    reason: ReasonOption = "",
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    selector = pb.PoolSelector(customer=customer, cloud=cloud, region=region, account=account)
    _set_cordoned(pool, selector, True, reason, addr, token, ca, timeout, output)


def uncordon(
    pool: PoolArgument = None,
    customer: SelCustomerOption = "",
    cloud: SelCloudOption = "",
    region: SelRegionOption = "",
    account: SelAccountOption = "",
    reason: ReasonOption = "",
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    selector = pb.PoolSelector(customer=customer, cloud=cloud, region=region, account=account)
    _set_cordoned(pool, selector, False, reason, addr, token, ca, timeout, output)


def drain(
    node: Annotated[str, typer.Argument(help="Node id (see gpucap nodes).")],
    reason: ReasonOption = "",
    now: Annotated[
        bool,
        typer.Option(
            "--now",
            help="Drain at once instead of surge-first (by default a ready replica serves "
            "until its replacement is ready).",
        ),
    ] = False,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        resp: pb.DrainNodeResponse = c.stub.DrainNode(
            pb.DrainNodeRequest(node_id=node, reason=reason, immediate=now), timeout=c.timeout
        )
    if output.structured:
        print_data(resp, output)
        return
    typer.echo(resp.message)
