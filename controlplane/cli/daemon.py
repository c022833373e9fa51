"""``gpucap daemon``: run the control plane."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from controlplane import gc_tuning
from controlplane.telemetry import configure_logging
from schema.daemon_config import DaemonConfig, GrpcConfig
from schema.policy_file import PolicyError, parse_yaml_model

if TYPE_CHECKING:
    from controlplane.daemon import Daemon

err = Console(stderr=True)
DEMO_DB = "demo.db"  # the demo's SQLite file in its state directory (demo/wiring.py)


def register(app: typer.Typer) -> None:
    app.command("daemon")(daemon)


def daemon(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Daemon config file (YAML).")
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo", help="Simulated clouds on local nodes, demo policy, bursty traffic."
        ),
    ] = False,
    grpc_addr: Annotated[
        str | None, typer.Option("--grpc-addr", help="Override the gRPC listen address.")
    ] = None,
    metrics_addr: Annotated[
        str | None,
        typer.Option("--metrics-addr", help="Prometheus /metrics address ('' disables)."),
    ] = None,
    log_format: Annotated[
        str, typer.Option("--log-format", help="json (default) or console.")
    ] = "json",
    sim_state: Annotated[
        Path | None,
        typer.Option(
            "--sim-state",
            help="The simulated cloud's state file, shared by daemons and restarts "
            "(--demo, provider_mode sim); not wiped at start.",
        ),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option("--database-url", help="Override the store's database URL."),
    ] = None,
    auth: Annotated[
        bool,
        typer.Option(
            "--auth",
            help="Authenticate and authorize every call (grpc.auth); with --demo, write an "
            "admin token and one per demo customer to files (named at start).",
        ),
    ] = False,
) -> None:
    """Run the daemon: metrics -> autoscaler -> placement -> reconciler -> providers."""
    from controlplane.daemon import Daemon, cloud_wiring
    from controlplane.demo import STATE_SUBDIR
    from controlplane.demo.wiring import demo_wiring
    from controlplane.settings import state_dir

    cfg = DaemonConfig()
    if config is not None:
        try:
            text = config.read_text(encoding="utf-8")
        except OSError as exc:
            err.print(f"{config}: cannot read: {exc}")
            raise typer.Exit(2) from exc
        try:
            cfg, _ = parse_yaml_model(text, DaemonConfig, str(config), kind="DaemonConfig")
        except PolicyError as exc:
            for p in exc.problems:
                err.print(str(p), markup=False, highlight=False)
            raise typer.Exit(2) from exc
    if grpc_addr is not None:
        cfg = cfg.model_copy(
            update={"grpc": GrpcConfig(**{**cfg.grpc.model_dump(), "addr": grpc_addr})}
        )
    if metrics_addr is not None:
        cfg = cfg.model_copy(update={"metrics_addr": metrics_addr})
    if sim_state is not None:
        cfg = cfg.model_copy(update={"sim_state": str(sim_state.resolve())})
    if database_url is not None:
        cfg = cfg.model_copy(update={"database_url": database_url})
    if auth:
        cfg = cfg.model_copy(update={"grpc": GrpcConfig(**{**cfg.grpc.model_dump(), "auth": True})})
    configure_logging(cfg.log_level, json=log_format == "json")

    if demo:
        from controlplane.leadership import DatabaseInUse, hold_sqlite

        demo_dir = state_dir() / STATE_SUBDIR
        try:
            # Before the demo clears its files: a second demo on this state directory would
            # delete the running one's database. Held for the life of the process.
            hold_sqlite(f"sqlite:///{demo_dir / DEMO_DB}")
        except DatabaseInUse as exc:
            err.print(f"gpucap daemon: cannot start: {exc}", markup=False, highlight=False)
            raise typer.Exit(1) from exc
        # A state file named in the config file is relative to that file's folder.
        base = config.parent if config is not None else Path.cwd()
        wiring = demo_wiring(
            demo_dir,
            sim_state=None if cfg.sim_state is None else (base / cfg.sim_state).resolve(),
            database_url=cfg.database_url,
        )
    else:
        base = config.parent if config is not None else Path.cwd()
        try:
            wiring = cloud_wiring(cfg, base)
        except ValueError as exc:  # e.g. a TLS file the metrics section names is unreadable
            err.print(f"{config or 'gpucap daemon'}: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from exc
    gc_tuning.tune()
    d = Daemon(cfg, wiring)
    try:
        d.start()
    except Exception as exc:  # e.g. refusing a non-loopback address without TLS + token
        err.print(f"gpucap daemon: cannot start: {exc}", markup=False, highlight=False)
        d.stop()
        raise typer.Exit(1) from exc
    if demo and auth:
        _announce_demo_tokens(d, demo_dir)
    if demo:
        err.print(
            f"[bold green]gpucap demo running[/] — gRPC {cfg.grpc.addr}, metrics "
            f"{cfg.metrics_addr or 'off'}; its nodes are local processes. In another "
            "terminal: [bold]gpucap models[/], [bold]gpucap nodes[/], [bold]gpucap endpoints[/], "
            "[bold]gpucap events -f[/]; [bold]gpucap demo kill-engine NODE[/] crashes a node's "
            "engine. Ctrl-C stops."
        )
    d.run_forever()


def _announce_demo_tokens(d: Daemon, demo_dir: Path) -> None:
    from datetime import UTC, datetime

    from controlplane.demo.auth import write_demo_tokens

    assert d.store is not None
    files = write_demo_tokens(d.store, demo_dir, datetime.now(UTC))
    lines = "\n".join(f"  {role:<24} {path}" for role, path in files.items())
    err.print(
        "[bold]authorization on[/]: every call needs a token. One per role, each in a file:\n"
        f"{lines}\n"
        f"e.g. [bold]GPUCAP_TOKEN_FILE={files['admin']} gpucap status[/]",
        highlight=False,
        soft_wrap=True,  # (paths whole, for copying)
    )
