"""The ``--report DIR`` output: one HTML page with matplotlib PNGs.

- per model: arrivals vs desired vs ready replicas over time, one panel per autoscaler;
- GPU-hours vs SLO attainment for every autoscaler (every knob value tried, when swept).
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from controlplane.simulator.engine import RunOutcome, knob_label  # noqa: E402
from controlplane.simulator.traces import Trace  # noqa: E402


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _step_series(points: list[tuple[float, int]], end: float) -> tuple[np.ndarray, np.ndarray]:
    if not points:
        return np.array([0.0, end]), np.array([0, 0])
    t = np.array([p[0] for p in points] + [end])
    v = np.array([p[1] for p in points] + [points[-1][1]])
    return t, v


def write_report(
    out_dir: Path,
    trace: Trace,
    shown: list[RunOutcome],
    tried: dict[str, list[RunOutcome]],
    slo_target: float | None,
    warmup_s: float = 0.0,
) -> Path:
    """Write ``index.html`` and its PNGs into ``out_dir``; return the page's path.
    ``shown``: one run per autoscaler (its default, or its best knob); ``tried``: every run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    images: list[tuple[str, str]] = []
    end = max((o.end_s for o in shown), default=trace.end_s)
    for number, (model, mt) in enumerate(sorted(trace.models.items()), start=1):
        rows = max(1, len(shown))
        fig, axes = plt.subplots(rows, 1, figsize=(11, 2.6 * rows), sharex=True, squeeze=False)
        bin_s = max(60.0, end / 400)
        edges = np.arange(0.0, end + bin_s, bin_s)
        counts, _ = np.histogram(mt.arrivals, bins=edges)
        rate = counts / bin_s
        for ax, run in zip(axes[:, 0], shown, strict=False):
            outcome = run.models.get(model)
            ax.step(edges[:-1] / 3600, rate, where="post", color="0.6", lw=1, label="arrivals/s")
            ax.set_ylabel("req/s")
            ax2 = ax.twinx()
            if outcome is not None:
                before = [p for p in outcome.timeline if p.t <= 0][-1:]  # the state at 0
                tl = [(0.0, p.desired, p.ready) for p in before] + [
                    (p.t, p.desired, p.ready) for p in outcome.timeline if p.t > 0
                ]
                td, vd = _step_series([(t, d) for t, d, _ in tl], end)
                tr, vr = _step_series([(t, r) for t, _, r in tl], end)
                ax2.step(td / 3600, vd, where="post", color="tab:orange", lw=1.2, label="desired")
                ax2.step(tr / 3600, vr, where="post", color="tab:blue", lw=1.2, label="ready")
            ax2.set_ylabel("replicas")
            knob = "" if run.knob is None else f" (knob {knob_label(run.knob)})"
            ax.set_title(f"{model}: {run.autoscaler}{knob}", fontsize=9, loc="left")
            if ax is axes[0, 0]:
                h1, l1 = ax.get_legend_handles_labels()
                h2, l2 = ax2.get_legend_handles_labels()
                ax.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=7)
        axes[-1, 0].set_xlabel("hours")
        fig.tight_layout()
        # (numbered: names that differ only in characters a file name drops stay apart)
        name = f"timeline-{number}-{_safe(model)}.png"
        fig.savefig(out_dir / name, dpi=90)
        plt.close(fig)
        images.append((f"{model}: arrivals vs desired vs ready replicas", name))

    fig, ax = plt.subplots(figsize=(8, 5))
    for auto, runs in tried.items():
        pts = sorted((r.summary().gpu_hours, r.summary().slo_attainment) for r in runs)
        if not pts:
            continue
        xs, ys = zip(*pts, strict=True)
        ax.plot(xs, ys, marker="o", ms=4, lw=1, label=auto)
    if slo_target is not None:
        ax.axhline(slo_target, color="0.5", ls="--", lw=1, label=f"target {slo_target:g}")
    ax.set_xlabel("GPU-hours")
    ax.set_ylabel("SLO attainment")
    ax.set_xscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "gpu-hours-vs-slo.png", dpi=90)
    plt.close(fig)
    images.insert(0, ("GPU-hours vs SLO attainment", "gpu-hours-vs-slo.png"))

    rows_html = []
    for run in shown:
        s = run.summary().as_dict()
        cells = "".join(
            f"<td>{html.escape(_fmt(s[k]))}</td>"
            for k in (
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
        )
        rows_html.append(f"<tr>{cells}</tr>")
    figures = "\n".join(
        f'<h2>{html.escape(title)}</h2><img src="{html.escape(src)}" alt="{html.escape(title)}">'
        for title, src in images
    )
    target = "" if slo_target is None else f"; knob swept for SLO attainment >= {slo_target:g}"
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>gpucap simulate: {html.escape(trace.label)}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 8px;text-align:right}}
table{{border-collapse:collapse}}tr:nth-child(even){{background:#f3f3f3}}img{{max-width:100%}}</style>
</head><body>
<h1>gpucap simulate</h1>
<p>Trace {html.escape(trace.label)}: {trace.requests:,} requests over {trace.end_s / 3600:.2f} h
(warm-up {warmup_s:.0f} s not counted){html.escape(target)}.</p>
<table><tr><th>autoscaler</th><th>knob</th><th>SLO attainment</th><th>GPU-hours</th>
<th>cost USD</th><th>p50 wait s</th><th>p99 wait s</th><th>cold starts</th>
<th>scale events</th><th>unserved</th></tr>
{"".join(rows_html)}
</table>
{figures}
</body></html>
"""
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def _fmt(v: object) -> str:
    if v is None or isinstance(v, dict):  # dict: a knob per model
        return knob_label(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)
