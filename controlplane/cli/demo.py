"""``gpucap demo kill-engine NODE``: crash the engine of one of the demo's local nodes, to
watch on-call's view of it (the node fails its health checks, is drained and replaced).

The node's instance is looked up through the daemon's API; its engine's pid is in the
node's folder under the demo's state directory (``providers.sim.local``), so this runs on
the daemon's machine, with the daemon's state directory."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from controlplane.cli.pages import all_pages
from controlplane.cli.remote import (
    DEFAULT_ADDR,
    DEFAULT_TIMEOUT_S,
    AddrOption,
    CaOption,
    TimeoutOption,
    TokenOption,
    daemon,
    fail,
)
from controlplane.demo import NODES_SUBDIR, STATE_SUBDIR
from controlplane.settings import state_dir
from providers.sim.standins import engine_pid, stop_engine
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

demo_app = typer.Typer(
    name="demo", help="Act on the running demo (`gpucap daemon --demo`).", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(demo_app)


@demo_app.command("kill-engine")
def kill_engine(
    node: Annotated[str, typer.Argument(help="Node id (see gpucap nodes).")],
    state: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            help="The demo's state directory (default: the daemon's, $GPUCAP_STATE_DIR/demo).",
            show_default=False,
        ),
    ] = None,
    addr: AddrOption = DEFAULT_ADDR,
    token: TokenOption = None,
    ca: CaOption = None,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
) -> None:
    """Kill NODE's engine (SIGKILL, as a crash); the node itself keeps running."""
    with daemon(addr, token, ca, timeout) as c:
        nodes = all_pages(c.stub.ListNodes, pb.ListNodesRequest(), timeout=c.timeout).nodes
    found = next((n for n in nodes if n.id == node), None)
    if found is None:
        fail(f"no live node {node} (see gpucap nodes)")
    if not found.instance_id:
        fail(f"node {node} has no instance yet ({found.state})")
    home = (state or state_dir() / STATE_SUBDIR) / NODES_SUBDIR / found.instance_id
    pid = engine_pid(home)
    if not stop_engine(home, signal.SIGKILL):
        where = f"pid {pid}" if pid is not None else f"no pid file in {home}"
        fail(f"node {node} (instance {found.instance_id}) has no engine running ({where})")
    typer.echo(
        f"killed the engine of {node} ({found.customer}/{found.model}, instance "
        f"{found.instance_id}, pid {pid}); its health checks fail from now on, and gpucap "
        "replaces it (gpucap nodes, gpucap events -f)"
    )
