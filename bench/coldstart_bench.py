"""Cold-start techniques benchmark (issue 25): time-to-ready and what each technique costs.

    .venv/bin/python bench/coldstart_bench.py [--jobs 2] [--draws 20000] [--warm 8]

Part 1, time-to-ready: an 8B, a 70B and a 671B-FP8 model under the naive path, each
technique alone and all combined, ``--draws`` seeded launches each drawn from the phase
distributions of ``controlplane/simulator/techniques.py`` (coldstart.md §5 typical values,
spreads from its ranges), p50 and p99, next to the physical floor of the tier the weights
sit in (coldstart.md §3.3). Part 2, on the traces: gpucap's decider at the knob the main
benchmark picked for it on that trace (one replay per configuration, not a sweep: the same
decider, knob and trace, only the pools' techniques differ) with a ``TechniquesCapacity``;
GPU-hours and cost, the techniques' storage, warm-pool idle cost and SLO attainment, side by
side. Saves ``bench/coldstart_results.json`` and re-renders docs/benchmarks.md through
``bench/simulate_bench.py`` (its 'Cold-start techniques' section; the rest is unchanged).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from autoscaler.baselines import REGISTRY  # noqa: E402
from autoscaler.types import UTILIZATION_SWEEP  # noqa: E402
from controlplane.simulator.bisection import bisect  # noqa: E402
from controlplane.simulator.engine import ModelRun  # noqa: E402
from controlplane.simulator.runner import Simulation  # noqa: E402
from controlplane.simulator.techniques import (  # noqa: E402
    PROFILE_8B,
    PROFILE_70B,
    PROFILE_671B,
    PROFILES,
    SPREADS,
    ModelProfile,
    Techniques,
    TechniquesCapacity,
    floor,
    ready_samples,
)

RESULTS = ROOT / "bench" / "coldstart_results.json"
# The traces' scenarios (bench/simulate_bench.py's, as they are), the fast ones: each
# replay takes under 15 s here; the whole-day ones (a minute or more each) are left out.
TRACE_SCENARIOS = (
    "azure-code",
    "azure-conv",
    "azure-both-fleet-llm",
    "servegen-m-large",
    "servegen-deepseek-r1",
    "servegen-m-mid-8b",
)
DECIDER = "ours"
# At equal service: the main benchmark's target, and the two configurations compared.
EQUAL_SLO = 0.99
EQUAL_CONFIGS = ("naive", "all combined")
MAIN_RESULTS = ROOT / "bench" / "results.json"


def main_bench_knob(scenario: str, path: Path = MAIN_RESULTS) -> float | None:
    """The knob the main benchmark picked for gpucap's decider on ``scenario`` (its cheapest
    run reaching 0.99 SLO attainment, fleet phases as given); None: the fleet's default."""
    if not path.exists():
        return None
    for res in json.loads(path.read_text())["results"]:
        if res["scenario"] == scenario:
            for row in res["rows"]:
                if row["autoscaler"] == DECIDER and row["best"]:
                    return float(row["best"]["knob"])
    return None


def configs(warm: int) -> dict[str, Techniques]:
    return {
        "naive": Techniques(),
        "staged weights": Techniques(staged_weights=True),
        "baked image": Techniques(baked_image=True),
        f"warm pool (up to {warm} stopped)": Techniques(warm_nodes=warm),
        "weights on local NVMe": Techniques(weights_local=True),
        "all combined": Techniques(True, True, warm, True),
    }


def profile_for(run: ModelRun) -> ModelProfile:
    """A trace model's size from its fleet entry: one GPU is the 8B, DeepSeek (8xH200) the
    671B, every other 8-GPU model the 70B (the fleets' own comments say so)."""
    if run.gpus_per_replica == 1:
        return PROFILE_8B
    return PROFILE_671B if "deepseek" in run.name else PROFILE_70B


def time_to_ready(draws: int, warm: int) -> list[dict[str, Any]]:
    rows = []
    for profile in PROFILES:
        for label, tech in configs(warm).items():
            x = ready_samples(profile, tech, draws, seed=0)
            f = floor(profile, tech)
            rows.append(
                {
                    "model": profile.name,
                    "config": label,
                    "p50_s": float(np.percentile(x, 50)),
                    "p99_s": float(np.percentile(x, 99)),
                    "floor_tier": f.tier,
                    "floor_s": f.seconds,
                    "floor_weights_s": f.weights_s,
                    "floor_init_s": f.init_s,
                    "floor_row": f.row,
                }
            )
    return rows


def _simulation(scenario: str) -> Simulation:
    import simulate_bench  # (reads the traces as its scenarios do)

    sc = next(s for s in simulate_bench.SCENARIOS if s.name == scenario)
    return simulate_bench.simulation(sc)


def _trace_job(job: tuple[str, str, int]) -> dict[str, Any]:
    scenario, label, warm = job
    return _replay(_simulation(scenario), scenario, label, warm, main_bench_knob(scenario))


def _replay(
    sim: Simulation, scenario: str, label: str, warm: int, knob: float | None
) -> dict[str, Any]:
    """One replay of gpucap's decider at ``knob`` with every pool under ``label``'s
    techniques, and what it cost."""
    t0 = time.perf_counter()
    tech = configs(warm)[label]
    pools = {r.name: (profile_for(r), tech) for r in sim.runs}
    capacity = TechniquesCapacity(pools, measure_from_s=sim.warmup_s)
    out = sim.run_autoscaler(REGISTRY[DECIDER](), knob, capacity=capacity)
    summary = out.summary()
    costs = capacity.costs(sim.end_s)
    price = {r.name: r.usd_per_replica_hour for r in sim.runs}
    gpus = {r.name: r.gpus_per_replica for r in sim.runs}
    storage = sum(v for c in costs.values() for k, v in c.items() if k.endswith("_usd"))
    idle_gpu_h = sum(c["idle_node_hours"] * gpus[m] for m, c in costs.items())
    idle_usd = sum(c["idle_node_hours"] * price[m] for m, c in costs.items())
    return {
        "scenario": scenario,
        "config": label,
        "models": {m: profile_for(r).name for m, r in ((r.name, r) for r in sim.runs)},
        "knob": knob,
        "slo_attainment": summary.slo_attainment,
        "gpu_hours": summary.gpu_hours,
        "gpu_usd": summary.cost_usd,
        "storage_usd": storage,
        "idle_gpu_hours": idle_gpu_h,
        "idle_usd": idle_usd,
        "total_usd": summary.cost_usd + storage + idle_usd,
        "cold_starts": summary.cold_starts,
        "warm_launches": int(sum(c["warm_launches"] for c in costs.values())),
        "launches": int(sum(c["warm_launches"] + c["cold_launches"] for c in costs.values())),
        "p99_wait_s": summary.p99_wait_s,
        "hours": sim.trace.end_s / 3600,
        "costs": costs,
        "wall_s": time.perf_counter() - t0,
    }


def _equal_job(job: tuple[str, str, int]) -> dict[str, Any]:
    """The cheapest total (GPU, storage and idle) reaching ``EQUAL_SLO``: gpucap's knob
    searched by the sweeps' own bisection (``controlplane/simulator/bisection.py``, from its
    cheap end, the highest target per replica, to its safe one), the same probes for every
    configuration."""
    scenario, label, warm = job
    sim = _simulation(scenario)
    tried: list[dict[str, Any]] = []

    def passes(knob: float) -> bool:
        tried.append(_replay(sim, scenario, label, warm, knob))
        return bool(tried[-1]["slo_attainment"] >= EQUAL_SLO)

    bisect(passes, max(UTILIZATION_SWEEP), min(UTILIZATION_SWEEP))
    ok = [t for t in tried if t["slo_attainment"] >= EQUAL_SLO]
    keep = ("knob", "slo_attainment", "gpu_usd", "storage_usd", "idle_usd", "total_usd")
    best = min(ok, key=lambda t: t["total_usd"]) if ok else None
    closest = max(tried, key=lambda t: (t["slo_attainment"], -t["total_usd"]))
    return {
        "scenario": scenario,
        "config": label,
        "best": {k: best[k] for k in keep} if best else None,
        "closest": {k: closest[k] for k in keep},
        "probes": len(tried),
    }


def _commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    measured = [  # what the replays and draws run that others may be changing
        "controlplane/simulator",
        "coldstart/model.py",
        "coldstart/defaults.py",
        "autoscaler",
        "bench/coldstart_bench.py",
    ]
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *measured], cwd=ROOT)
    return (out.stdout.strip() or "unknown") + ("+changes" if dirty.returncode else "")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--draws", type=int, default=20000)
    ap.add_argument("--warm", type=int, default=8, help="stopped nodes per pool")
    ap.add_argument("--only", nargs="*", default=None, help="trace scenarios")
    ap.add_argument("--json", default=str(RESULTS))
    ap.add_argument(
        "--no-equal", action="store_true", help="skip the knob search at equal SLO attainment"
    )
    args = ap.parse_args()
    started = time.perf_counter()
    ready = time_to_ready(args.draws, args.warm)
    names = args.only or list(TRACE_SCENARIOS)
    jobs = [(s, label, args.warm) for s in names for label in configs(args.warm)]
    if args.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            traces = pool.map(_trace_job, jobs, chunksize=1)
    else:
        traces = [_trace_job(j) for j in jobs]
    for t in traces:
        print(
            f"[{t['scenario']}] {t['config']}: slo {t['slo_attainment']:.4f} "
            f"${t['total_usd']:.0f} ({t['wall_s']:.0f} s)",
            flush=True,
        )
    scaling = [t["scenario"] for t in traces if t["config"] == "naive" and t["launches"] > 0]
    equal_jobs = [(sc, label, args.warm) for sc in scaling for label in EQUAL_CONFIGS]
    if args.no_equal:
        equal: list[dict[str, Any]] = []
    elif args.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            equal = pool.map(_equal_job, equal_jobs, chunksize=1)
    else:
        equal = [_equal_job(j) for j in equal_jobs]
    for e in equal:
        got = e["best"] or e["closest"]
        print(
            f"[{e['scenario']}] {e['config']} at {EQUAL_SLO}: "
            f"{'' if e['best'] else 'closest '}knob {got['knob']} slo "
            f"{got['slo_attainment']:.4f} ${got['total_usd']:.0f}",
            flush=True,
        )
    cmd = "bench/coldstart_bench.py " + " ".join(
        a for a in (f"--jobs {args.jobs}", f"--draws {args.draws}", f"--warm {args.warm}")
    )
    saved = {
        "command": cmd,
        "commit": _commit(),
        "finished_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": time.perf_counter() - started,
        "draws": args.draws,
        "warm_nodes": args.warm,
        "decider": DECIDER,
        "spreads": {
            k: {"median": v.median, "sigma": v.sigma, "basis": v.basis} for k, v in SPREADS.items()
        },
        "init": {
            p.name: {"median": p.init.median, "sigma": p.init.sigma, "basis": p.init.basis}
            for p in PROFILES
        },
        "time_to_ready": ready,
        "traces": traces,
        "equal_slo": EQUAL_SLO,
        "equal": equal,
    }
    Path(args.json).write_text(json.dumps(saved, indent=2) + "\n")
    import simulate_bench  # (the page's renderer; it places this benchmark's section)

    simulate_bench.rewrite_page()


def targets(saved: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, measured: the 70B's naive/combined p50 ratio (>= 10) and its
    combined p50 over its tier's floor (<= 1.5); per trace where scaling happens, the
    combination's net saving (naive total minus combined total, storage and idle included)."""
    rows = {(r["model"], r["config"]): r for r in saved["time_to_ready"]}
    naive = rows[(PROFILE_70B.name, "naive")]
    comb = rows[(PROFILE_70B.name, "all combined")]
    by = {(t["scenario"], t["config"]): t for t in saved["traces"]}
    savings = {}
    for sc in dict.fromkeys(t["scenario"] for t in saved["traces"]):
        n, c = by.get((sc, "naive")), by.get((sc, "all combined"))
        if n and c:
            savings[sc] = {
                "scales": n["launches"] > 0,
                "net_usd": n["total_usd"] - c["total_usd"],
                "gpu_usd_saved": n["gpu_usd"] - c["gpu_usd"],
                "storage_idle_usd": c["storage_usd"] + c["idle_usd"],
            }
    return {
        "ratio_70b": naive["p50_s"] / comb["p50_s"],
        "over_floor_70b": comb["p50_s"] / comb["floor_s"],
        "savings": savings,
    }


def equal_savings(saved: dict[str, Any]) -> dict[str, str]:
    """Per trace searched at equal service, the combination's net saving in words."""
    by = {(e["scenario"], e["config"]): e for e in saved.get("equal") or []}
    out = {}
    for sc in dict.fromkeys(e["scenario"] for e in saved.get("equal") or []):
        n, c = by.get((sc, EQUAL_CONFIGS[0])), by.get((sc, EQUAL_CONFIGS[1]))
        if not (n and c):
            continue
        if c["best"] and n["best"]:
            net = n["best"]["total_usd"] - c["best"]["total_usd"]
            out[sc] = (
                f"the combination saves ${net:.0f} net"
                if net > 0
                else f"the combination costs ${-net:.0f} more net"
            ) + f" (${c['best']['total_usd']:.0f} vs ${n['best']['total_usd']:.0f})"
        elif c["best"]:
            out[sc] = (
                f"only the combination reaches it (${c['best']['total_usd']:.0f}); naive "
                f"tops out at {n['closest']['slo_attainment']:.4f}"
            )
        elif n["best"]:
            out[sc] = (
                f"only naive reaches it (${n['best']['total_usd']:.0f}); the combination "
                f"tops out at {c['closest']['slo_attainment']:.4f}"
            )
        else:
            out[sc] = (
                f"neither reaches it (naive {n['closest']['slo_attainment']:.4f}, "
                f"combined {c['closest']['slo_attainment']:.4f})"
            )
    return out


def _m(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def render(saved: dict[str, Any]) -> list[str]:
    """The page's section for a saved run (``bench/simulate_bench.py`` places it)."""
    tg = targets(saved)
    lines = [
        "",
        "## Cold-start techniques: time-to-ready and what it costs",
        "",
        f"`{saved['command']}` at commit `{saved['commit']}`, {saved['finished_at']} "
        f"({saved['wall_s'] / 60:.1f} min on 2 shared cores). The simulator's pools carry "
        "their cold-start techniques (`controlplane/simulator/techniques.py`): weights staged "
        "in the region's object store, a baked image (driver, toolkit, engine image), a warm "
        f"pool of up to {saved['warm_nodes']} stopped pre-initialised nodes per pool, and the "
        "weights on the node's local disk at boot (a weights volume from a snapshot; on a warm "
        "node its kept volume). Each launch draws every phase from a lognormal around "
        "coldstart.md §5's typical value, its spread from the reference's ranges (below), "
        f"{saved['draws']} seeded launches a row. The warm-pool rows are launches that find a "
        "stopped node; the traces below show how often one does.",
        "",
        "| model | configuration | p50 | p99 | tier floor | floor row | p50 / floor |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in saved["time_to_ready"]:
        lines.append(
            f"| {r['model']} | {r['config']} | {_m(r['p50_s'])} | {_m(r['p99_s'])} | "
            f"{r['floor_s']:.0f} s ({r['floor_tier']}: {r['floor_weights_s']:.1f} s weights "
            f"+ {r['floor_init_s']:.0f} s init) | {r['floor_row']} | "
            f"{r['p50_s'] / r['floor_s']:.1f}x |"
        )
    lines += [
        "",
        "Phase distributions (median; sigma of the natural log; the reference's row, a range "
        "read as the quantile it names):",
        "",
        "| phase | median | sigma | basis |",
        "|---|---|---|---|",
    ]
    for k, v in {**saved["spreads"], **{f"init, {p}": x for p, x in saved["init"].items()}}.items():
        unit = " GB/s" if k.endswith("_rate") else " s"
        lines.append(f"| {k} | {v['median']:.3g}{unit} | {v['sigma']:.3f} | {v['basis']} |")
    lines += [
        "",
        "The capacity medians are coldstart/defaults.py's per cloud and node size (AWS: 10 "
        "min for 8 GPUs, 2 min for one). Each fetch is weight bytes over the drawn rate; the "
        "load from the node's disk to HBM is bytes over 2 GB/s in every row, so no technique "
        "here shortens it. The floor is the tier's weight bytes at 100 % of its bandwidth plus "
        "the engine's median init; the naive and staged rows are put against the region "
        "object store's floor (the origin has none in the reference).",
        "",
        "On the traces (read as the scenarios above read them): gpucap's decider at the knob "
        "the main table picked for it there (its cheapest run reaching 0.99 with the fleet's "
        "phases), one replay per configuration: the same trace, decider, knob and seed; only "
        "the pools' techniques differ, so SLO attainment moves with them. GPU cost is "
        "the replicas' node time (from request to release) at the fleet's price; storage is "
        "the staged copies (object storage), the image and weights snapshots, and the stopped "
        "nodes' volumes (block storage, per stopped hour), vendor list prices pro-rated over "
        "the window; idle is the node time of the boots that fill the warm pool. The warm "
        "pool is kept as the daemon keeps it: sized after every decision by the place job's "
        "rule (`lifecycle.warm.wanted`: the forecast's extra replicas over a create's "
        "horizon, at least one, within the bound), and the decider looks ahead a resume's "
        "time only while the waiting nodes cover what a create's look-ahead would launch "
        "early (`lifecycle.warm.covers`).",
        "",
        "| trace | configuration | SLO attainment | GPU-hours | GPU $ | storage $ | idle GPU-h "
        "| idle $ | total $ | launches (warm) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in saved["traces"]:
        lines.append(
            f"| {t['scenario']} | {t['config']} | {t['slo_attainment']:.4f} | "
            f"{t['gpu_hours']:.1f} | {t['gpu_usd']:.0f} | {t['storage_usd']:.2f} | "
            f"{t['idle_gpu_hours']:.1f} | {t['idle_usd']:.0f} | {t['total_usd']:.0f} | "
            f"{t['launches']} ({t['warm_launches']}) |"
        )
    equal = saved.get("equal") or []
    if equal:
        lines += [
            "",
            f"At equal service: per trace that scales, the cheapest total (GPU, storage and "
            f"idle) reaching SLO attainment {saved['equal_slo']}, gpucap's knob searched by "
            "the sweeps' bisection (the same probes for both configurations); where no probe "
            "reaches it, the closest run (highest attainment) is shown and marked.",
            "",
            "| trace | configuration | knob | SLO attainment | GPU $ | storage $ | idle $ "
            "| total $ | probes |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for e in equal:
            got = e["best"] or e["closest"]
            mark = "" if e["best"] else " (closest: target not reached)"
            lines.append(
                f"| {e['scenario']} | {e['config']}{mark} | {got['knob']:.3g} | "
                f"{got['slo_attainment']:.4f} | {got['gpu_usd']:.0f} | "
                f"{got['storage_usd']:.2f} | {got['idle_usd']:.0f} | {got['total_usd']:.0f} "
                f"| {e['probes']} |"
            )
    lines += ["", "Targets, measured:", ""]
    ok1 = tg["ratio_70b"] >= 10
    ok2 = tg["over_floor_70b"] <= 1.5
    lines.append(
        f"- 70B, all combined vs naive p50: {tg['ratio_70b']:.1f}x lower (target 10x: "
        f"{'met' if ok1 else 'missed'}); all combined over its tier's floor: "
        f"{tg['over_floor_70b']:.2f}x (target 1.5x: {'met' if ok2 else 'missed'})."
    )
    for sc, s in tg["savings"].items():
        net = s["net_usd"]
        verdict = f"saves ${net:.0f} net" if net > 0 else f"costs ${-net:.0f} more net"
        lines.append(
            f"- {sc}: the combination {verdict} (GPU "
            f"${s['gpu_usd_saved']:.0f} saved, storage and idle ${s['storage_idle_usd']:.0f})"
            + ("" if s["scales"] else "; no launch in the window: nothing scales here")
            + "."
        )
    for sc, e in equal_savings(saved).items():
        lines.append(f"- {sc}, at equal service ({saved['equal_slo']}): {e}.")
    naive = next(
        r
        for r in saved["time_to_ready"]
        if r["model"] == PROFILE_70B.name and r["config"] == "naive"
    )
    comb = next(
        r
        for r in saved["time_to_ready"]
        if r["model"] == PROFILE_70B.name and r["config"] == "all combined"
    )
    lines += [
        "",
        f"Why the time-to-ready targets are out of reach here: a tenth of the 70B's naive p50 "
        f"is {naive['p50_s'] / 10:.0f} s, below the floor of the best tier "
        f"({comb['floor_s']:.0f} s, of which {comb['floor_init_s']:.0f} s is the engine's init, "
        "§5 vLLM 70B TP=8 without caches), so no weight or node technique can reach 10x; only "
        "what attacks T_init (process/GPU snapshots, compile caches: §0, not among these "
        "techniques) can. All combined still takes the warm resume (90 s median), the pre-pulled "
        "image check (15 s) and a 2 GB/s load from disk (70 s where the 8x NVMe floor is 2.5 s) "
        "on top of the init.",
        "",
        "On the traces at one knob the configurations reach different SLO attainment, so "
        "their costs there are not at equal service; the equal-service table is the fair "
        "comparison. There, all combined saves most where bursts outgrow the fleet and "
        "launches are many (servegen-deepseek-r1, servegen-m-large). Where it costs more or "
        "breaks even, the measured causes: on azure-both-fleet-llm one early spike of the 8B "
        "model needs a second replica that no launch brings in time under any configuration "
        "(the fleet's own table), and attainment is not monotone in the knob there (all "
        "combined passes only at the range's safe end); on servegen-m-mid-8b the shorter "
        "cold starts make the decider release and relaunch its 1xH100 replicas several "
        "times as often (the launch counts above), and the long tail of those launches "
        "(each draws its capacity wait; the decider looks ahead the median of what it has "
        "seen) costs about what the shorter median saves. A warm pool alone serves few "
        "launches here: the place job sizes it from the forecast's growth over a create's "
        "horizon (one node while the load is level), and a burst that outgrows it launches "
        "the rest as creates, with the create's look-ahead (the covers rule).",
    ]
    return lines


if __name__ == "__main__":
    main()
