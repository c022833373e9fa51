"""On-call overrides: ``gpucap pin|unpin|pause|resume MODEL`` and ``gpucap cordon|uncordon
POOL``. Each is one recorded change (an event with who-did-what) through the daemon.

A model is named ``customer/model``, or just ``model`` when exactly one customer has it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controlplane.cli.remote import (
    DEFAULT_ADDR,
    DEFAULT_TIMEOUT_S,
    AddrOption,
    CaOption,
    Output,
    OutputOption,
    TimeoutOption,
    TokenOption,
    daemon,
    fail,
    print_json,
)
from controlplane.grpc.client import ControlPlaneClient
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

ModelArgument = Annotated[str, typer.Argument(help="customer/model, or model if unambiguous.")]
PoolArgument = Annotated[
    str, typer.Argument(help="Pool id (customer/account/region/instance-type; see gpucap pools).")
]


def register(app: typer.Typer) -> None:
    app.command("pin", help="Pin a model's replica count (the autoscaler stops deciding).")(pin)
    app.command("unpin", help="Remove a pin; the autoscaler decides again.")(unpin)
    app.command("pause", help="Pause the autoscaler for a model (holds its replicas).")(pause)
    app.command("resume", help="Resume the autoscaler for a model.")(resume)
    app.command("cordon", help="Place no new replicas in a pool.")(cordon)
    app.command("uncordon", help="Allow placement in a pool again.")(uncordon)


def _resolve(c: ControlPlaneClient, model: str) -> tuple[str, str]:
    if "/" in model:
        customer, name = model.split("/", 1)
        return customer, name
    found = c.stub.ListModels(pb.ListModelsRequest(), timeout=c.timeout).models
    owners = sorted({m.customer for m in found if m.name == model})
    if len(owners) == 1:
        return owners[0], model
    if not owners:
        fail(f"no model named {model!r}")
    fail(f"model {model!r} exists for several customers ({', '.join(owners)}): use customer/model")


def _show_model(m: pb.Model, output: Output) -> None:
    if output == Output.JSON:
        print_json(m)
        return
    pin = f"pinned to {m.pinned_replicas}" if m.HasField("pinned_replicas") else "not pinned"
    state = "paused" if m.paused else "autoscaling"
    typer.echo(f"{m.customer}/{m.name}: {pin}, {state}")


def pin(
    model: ModelArgument,
    replicas: Annotated[int, typer.Argument(min=0, help="Replica count to hold.")],
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        customer, name = _resolve(c, model)
        m = c.stub.PinModel(
            pb.PinModelRequest(customer=customer, name=name, replicas=replicas), timeout=c.timeout
        )
    _show_model(m, output)


def unpin(
    model: ModelArgument,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    with daemon(addr, token, ca, timeout) as c:
        customer, name = _resolve(c, model)
        m = c.stub.PinModel(pb.PinModelRequest(customer=customer, name=name), timeout=c.timeout)
    _show_model(m, output)


def _set_paused(
    model: str, paused: bool, addr: str, token: str | None, ca: Path | None, timeout: float
) -> pb.Model:
    with daemon(addr, token, ca, timeout) as c:
        customer, name = _resolve(c, model)
        m: pb.Model = c.stub.PauseModel(
            pb.PauseModelRequest(customer=customer, name=name, paused=paused), timeout=c.timeout
        )
    return m


def pause(
    model: ModelArgument,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    _show_model(_set_paused(model, True, addr, token, ca, timeout), output)


def resume(
    model: ModelArgument,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    _show_model(_set_paused(model, False, addr, token, ca, timeout), output)


def _set_cordoned(
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
    if output == Output.JSON:
        print_json(p)
    else:
        typer.echo(f"{p.id}: {'cordoned' if p.cordoned else 'schedulable'}")


def cordon(
    pool: PoolArgument,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (goes in the event).")] = "",
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    _set_cordoned(pool, True, reason, addr, token, ca, timeout, output)


def uncordon(
    pool: PoolArgument,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    output: OutputOption = Output.TABLE,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    _set_cordoned(pool, False, "", addr, token, ca, timeout, output)
