"""``gpucap simulate``: replay request traces against a fleet with gpucap's autoscaler, the
peer baselines and the clairvoyant oracle side by side (``controlplane.simulator``).

Output: a rich table (progress bar on stderr while it runs), or with ``--json`` one object
``{"trace", "requests", "results": [{"autoscaler", "knob", "slo_attainment", "gpu_hours",
"cost_usd", "p50_wait_s", "p99_wait_s", "cold_starts", "scale_events", "unserved",
"models"}]}``, ``models`` holding the same numbers per model (with its ``requests``); ``knob``
is a number, or for the oracle on several models one headroom per model (an object).
A request still waiting when the trace ends is ``unserved`` and a miss; its wait counts up to
that end, so where ``unserved`` > 0 the wait percentiles are lower bounds.
Bad input (unreadable or malformed trace or fleet, an empty trace) exits 2 with the file,
line and problem on stderr. ``--full-loop`` (with ``--clouds``, ``--policy``) runs the
daemon's own loop instead: ``controlplane/cli/simulate_full_loop.py``, docs/full-loop.md.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from controlplane.simulator.engine import RunOutcome, knob_label
from controlplane.simulator.runner import ORACLE, Simulation, autoscaler_names
from controlplane.simulator.setup import SetupError, warmup_bound_s
from controlplane.simulator.techniques import parse_techniques
from controlplane.simulator.traces import TraceError, TraceOptions, TraceSpec, read_trace
from schema.fleet import Fleet, FleetError, load_fleet_file

EXIT_BAD_INPUT = 2
RESULT_KEYS = (
    "autoscaler",
    "knob",
    "slo_attainment",
    "gpu_hours",
    "cost_usd",
    "p50_wait_s",
    "p99_wait_s",
    "cold_starts",
    "scale_events",
    "unserved",
)


def register(app: typer.Typer) -> None:
    app.command(
        "simulate",
        help=(
            "Replay request traces against a fleet under gpucap's autoscaler, the peer "
            "baselines (knative, skyserve, rayserve, hpa) and a clairvoyant oracle, side by side."
        ),
    )(simulate)


def _bad_input(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)


def simulate(
    trace: Annotated[
        list[str],
        typer.Option(
            "--trace",
            help=(
                "[MODEL=]PATH[#POOL], repeatable. Azure LLM CSV, generic CSV, Mooncake JSONL or "
                "ServeGen rate files (a client file, a pool folder or the tarball; #POOL or "
                "MODEL= picks the pool; in a generic CSV with a model column, MODEL= names "
                "the rows whose model is blank). Plain or gzipped; detected by content."
            ),
            show_default=False,
        ),
    ],
    fleet: Annotated[
        Path | None, typer.Option("--fleet", help="Fleet YAML (see examples/fleet-*.yaml).")
    ] = None,
    autoscaler: Annotated[
        str,
        typer.Option(
            "--autoscaler",
            help="Comma-separated: ours,knative,skyserve,rayserve,hpa,oracle; or all.",
        ),
    ] = "all",
    slo_target: Annotated[
        float | None,
        typer.Option(
            "--slo-target",
            help=(
                "In (0, 1]. Sweep each autoscaler's knob (target per replica as a fraction of one "
                "replica's capacity, 0.05-1.0; the oracle's headroom 0.6-1.5, also per model "
                "with several) and report the least GPU-hours with SLO attainment >= this; "
                "null where none reaches it."
            ),
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed for synthesised arrivals.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    report: Annotated[
        Path | None, typer.Option("--report", help="Write an HTML report with plots here.")
    ] = None,
    rate_scale: Annotated[
        float,
        typer.Option("--rate-scale", min=0.0, help="Multiply ServeGen clients' rates by this."),
    ] = 1.0,
    start: Annotated[
        float | None,
        typer.Option("--start", min=0.0, help="Replay from this offset (s, trace time)."),
    ] = None,
    end: Annotated[
        float | None,
        typer.Option("--end", min=0.0, help="Replay until this offset (s, trace time)."),
    ] = None,
    warmup: Annotated[
        float | None,
        typer.Option(
            "--warmup",
            min=0.0,
            help=(
                "Warm-up before the measured trace, s (default: cold start + 300): the "
                "trace's own traffic before --start where it has it, else the trace's "
                "end, as if it had run before itself."
            ),
        ),
    ] = None,
    full_loop: Annotated[
        bool,
        typer.Option(
            "--full-loop",
            help="Run the daemon's own control loop on virtual time against simulated clouds.",
        ),
    ] = False,
    clouds: Annotated[
        Path | None,
        typer.Option(
            "--clouds", help="With --full-loop: pools, stock, stockouts (examples/clouds.yaml)."
        ),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy", help="With --full-loop: a policy file as the fleet (its models and pools)."
        ),
    ] = None,
    techniques: Annotated[
        str | None,
        typer.Option(
            "--techniques",
            help=(
                "Cold-start techniques of every model's pool: naive, or a comma list of "
                "staged (weights in the region), baked (image), warm=N (stopped nodes), "
                "local (weights on the node's disk). Launches are drawn from "
                "controlplane/simulator/techniques.py's phases instead of the fleet's; the "
                "oracle is left out; --json adds each run's storage and idle costs."
            ),
        ),
    ] = None,
) -> None:
    try:
        names = autoscaler_names(autoscaler)
    except ValueError as exc:
        raise _bad_input(f"--autoscaler: {exc}") from None
    if rate_scale <= 0:
        raise _bad_input("--rate-scale must be > 0")
    if slo_target is not None and not 0 < slo_target <= 1:  # (0 would be met by anything)
        raise _bad_input(f"--slo-target must be in (0, 1], got {slo_target:g}")
    if start is not None and end is not None and end <= start:
        raise _bad_input("--end must be after --start")
    chosen = None
    if techniques is not None:
        try:
            chosen = parse_techniques(techniques)
        except ValueError as exc:
            raise _bad_input(f"--techniques: {exc}") from None
        if full_loop:
            raise _bad_input("--techniques goes with the engine (no --full-loop)")
        if ORACLE in names and autoscaler.strip() != "all":
            raise _bad_input("--techniques: the oracle plans on the fleet's phases; leave it out")
        names = [n for n in names if n != ORACLE]
    if (clouds or policy) and not full_loop:
        raise _bad_input("--clouds and --policy go with --full-loop")
    if fleet is None and policy is None:
        raise _bad_input("give --fleet (or --policy with --full-loop)")
    try:
        fleet_model = load_fleet_file(fleet) if fleet is not None else None
    except FleetError as exc:
        raise _bad_input(str(exc)) from None
    if full_loop:
        if report is not None:
            raise _bad_input("--report goes with the engine (no --full-loop)")
        options = TraceOptions(seed=seed, rate_scale=rate_scale, start_s=start, end_s=end)
        return _full_loop(
            trace, fleet_model, policy, clouds, names, json_out, options, warmup, slo_target
        )
    assert fleet_model is not None
    if report is not None:  # refused before the replays, not after them
        problem = _unwritable(report)
        if problem:
            raise _bad_input(f"--report: cannot write to {report}: {problem}")
    # A window's warm-up is the trace's own traffic before it, where the trace has it.
    history = warmup if warmup is not None else warmup_bound_s(fleet_model)
    options = TraceOptions(
        seed=seed, rate_scale=rate_scale, start_s=start, end_s=end, history_s=history
    )
    try:
        loaded = read_trace([TraceSpec.parse(t) for t in trace], options)
        sim = Simulation(fleet_model, loaded, warmup_s=warmup, techniques=chosen)
    except (TraceError, SetupError) as exc:
        raise _bad_input(str(exc)) from None

    shown, tried, missed = _run_all(sim, names, slo_target, quiet=json_out)
    if json_out:
        results = [_result(name, shown.get(name)) for name in names]
        payload: dict[str, Any] = {
            "trace": loaded.label,
            "requests": loaded.requests,
            "results": results,
        }
        if chosen is not None:
            payload["techniques"] = chosen.label()
            for row, name in zip(results, names, strict=True):
                run = shown.get(name)
                row["techniques"] = sim.technique_costs(run) if run is not None else None
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        _print_table(sim, names, shown, missed, slo_target)
        if chosen is not None:
            _print_technique_costs(sim, chosen.label(), names, shown)
    if report is not None:
        from controlplane.simulator.report import write_report

        try:
            page = write_report(
                report,
                loaded,
                [shown[n] if n in shown else missed[n] for n in names if n in shown or n in missed],
                tried,
                slo_target,
                warmup_s=sim.warmup_s,
            )
        except OSError as exc:  # (a disk that filled up during the replays)
            raise _bad_input(f"--report: cannot write to {report}: {exc.strerror or exc}") from None
        Console(stderr=True).print(f"report: {page}", highlight=False)


def _print_technique_costs(
    sim: Simulation, label: str, names: list[str], shown: dict[str, RunOutcome]
) -> None:
    """One line per reported run: what the pools' techniques cost in it."""
    console = Console()
    for name in names:
        run = shown.get(name)
        costs = sim.technique_costs(run) if run is not None else None
        if not costs:
            continue
        storage = sum(v for c in costs.values() for k, v in c.items() if k.endswith("_usd"))
        idle = sum(c["idle_node_hours"] for c in costs.values())
        warm = sum(int(c["warm_launches"]) for c in costs.values())
        cold = sum(int(c["cold_launches"]) for c in costs.values())
        console.print(
            f"{name}, techniques {label}: storage ${storage:.2f}, warm-pool refills "
            f"{idle:.2f} node-hours; launches {warm} warm, {cold} cold",
            highlight=False,
        )


def _unwritable(folder: Path) -> str | None:
    """Why the report cannot go to ``folder`` (created if missing), or None."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not os.access(folder, os.W_OK | os.X_OK):
        return "not writable"
    return None


def _run_all(
    sim: Simulation, names: list[str], slo_target: float | None, quiet: bool
) -> tuple[dict[str, RunOutcome], dict[str, list[RunOutcome]], dict[str, RunOutcome]]:
    """(the run reported per autoscaler, every run per autoscaler, and for those that missed
    the target their best-attainment run, shown in the table and report only)."""
    shown: dict[str, RunOutcome] = {}
    tried: dict[str, list[RunOutcome]] = {}
    missed: dict[str, RunOutcome] = {}
    total = sum(sim.sweep_size(n) if slo_target is not None else 1 for n in names)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=quiet and not sys.stderr.isatty(),
    )
    with progress:
        task = progress.add_task("simulating", total=total)
        done = 0
        for name in names:
            if slo_target is None:
                progress.update(task, description=f"{name}")

                def one(f: float, d: int = done) -> None:
                    progress.update(task, completed=d + f)

                out = sim.run(name, progress=one)
                shown[name] = out
                tried[name] = [out]
                done += 1
                continue

            def step(k: int, n: int, f: float, d: int = done, label: str = name) -> None:
                progress.update(task, completed=d + k + f, description=f"{label} knob {k + 1}/{n}")

            result = sim.sweep(name, slo_target, step)
            tried[name] = result.tried
            done += sim.sweep_size(name)  # a sweep may skip the oracle's mix run
            if result.best is not None:
                shown[name] = result.best
            elif result.tried:
                missed[name] = max(
                    result.tried,
                    key=lambda o: o.summary().slo_attainment,
                )
    return shown, tried, missed


def _result(name: str, run: RunOutcome | None) -> dict[str, Any]:
    if run is None:  # no knob value reached the SLO target
        return missing_result(name)
    summary = run.summary().as_dict()
    out: dict[str, Any] = {k: summary[k] for k in RESULT_KEYS}
    out["models"] = {m: o.as_dict() for m, o in sorted(run.models.items())}
    return out


def missing_result(name: str) -> dict[str, Any]:
    """The ``--json`` result of an autoscaler that no knob value brings to the target."""
    return {k: (name if k == "autoscaler" else None) for k in RESULT_KEYS}


def _print_table(
    sim: Simulation,
    names: list[str],
    shown: dict[str, RunOutcome],
    missed: dict[str, RunOutcome],
    slo_target: float | None,
) -> None:
    console = Console()
    if not console.is_terminal:
        console.width = 160  # piped: keep the whole table on one screen width
    title = f"{sim.trace.label}: {sim.requests:,} requests over {sim.trace.end_s / 3600:.2f} h" + (
        "" if slo_target is None else f", cheapest knob with SLO attainment >= {slo_target:g}"
    )
    # Narrow terminals: no vertical rules and two-line headers, so that the numbers keep
    # every digit at 80 columns; below 100 the cost (GPU-hours x price) and the run's wall
    # time (a diagnostic) are left out.
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=0,  # (the box draws one space between columns)
    )
    wide = console.width >= 100
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("autoscaler", "left"),
        ("knob", "right"),
        ("SLO\nattain.", "right"),
        ("GPU-\nhours", "right"),
        ("x\noracle", "right"),
        ("cost\nUSD", "right"),
        ("p50\nwait s", "right"),
        ("p99\nwait s", "right"),
        ("cold\nstarts", "right"),
        ("scale\nevents", "right"),
        ("un-\nserved", "right"),
        ("wall s\n(run)", "right"),
    )
    if not wide:
        columns = tuple(c for c in columns if c[0] not in ("cost\nUSD", "wall s\n(run)"))
    for col, justify in columns:
        # (a per-model knob, "code 0.6, conv 0.9", may wrap; nothing else does)
        table.add_column(col, justify=justify, no_wrap=col != "knob", min_width=4)
    oracle = shown.get(ORACLE)
    oracle_h = oracle.summary().gpu_hours if oracle else None
    notes: list[str] = []
    for name in names:
        run = shown.get(name)
        if run is None:
            best = missed.get(name)
            if best is not None:
                b = best.summary()
                notes.append(
                    f"{name}: no knob reaches {slo_target:g} (best "
                    f"{b.slo_attainment:.4f} at knob {knob_label(b.knob)})"
                )
            table.add_row(name, "-", f"< {slo_target:g}", "null", *(["-"] * (len(columns) - 4)))
            continue
        s = run.summary()
        hours = s.gpu_hours
        ratio = f"{hours / oracle_h:.2f}" if oracle_h else "-"
        table.add_row(
            name,
            knob_label(s.knob),
            f"{s.slo_attainment:.4f}",
            f"{hours:,.1f}",
            ratio,
            *([f"{s.cost_usd:,.0f}"] if wide else []),
            f"{s.p50_wait_s:.2f}",
            f"{s.p99_wait_s:.2f}",
            str(s.cold_starts),
            str(s.scale_events),
            str(s.unserved),
            *([f"{run.wall_s:.1f}"] if wide else []),
        )
    if notes:
        table.caption = "; ".join(notes)
    console.print(table)


def _full_loop(
    trace: list[str],
    fleet: Fleet | None,
    policy: Path | None,
    clouds: Path | None,
    names: list[str],
    json_out: bool,
    options: TraceOptions,
    warmup: float | None,
    slo_target: float | None,
) -> None:
    from controlplane.cli.simulate_full_loop import run_full_loop, scenario_for
    from schema.clouds_file import CloudsError
    from schema.policy_file import PolicyError

    names = [n for n in names if n != ORACLE]  # (the oracle plans outside any loop)
    history = warmup if warmup is not None else (warmup_bound_s(fleet) if fleet else 0.0)
    options = replace(options, history_s=history)
    try:
        loaded = read_trace([TraceSpec.parse(t) for t in trace], options)
        scenario = scenario_for(loaded, fleet, policy, clouds, warmup)
    except (TraceError, SetupError, CloudsError, PolicyError) as exc:
        raise _bad_input(str(exc)) from None
    if not names:
        raise _bad_input("--full-loop: the oracle runs in the engine only; name another")
    run_full_loop(scenario, loaded, names, json_out, slo_target)
