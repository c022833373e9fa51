"""Onboarding cost per model: CPU-ms and ModelSpec validations of the Nth ``DeployModel`` into
one customer on SQLite, N doubling: flat when onboarding N models is O(N), growing with N
when it is O(N^2).

    .venv/bin/python bench/deploy_scale.py [--last 3200] [--label now] [--page]

Each run is saved under its ``--label`` in ``bench/deploy_scale_results.json`` (a run of an
earlier commit, from a checkout of it, keeps its own label beside this code's); ``--page``
re-renders docs/benchmarks.md (its "Onboarding models" section, placed by
``bench/simulate_bench.py``)."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
RESULTS = ROOT / "bench" / "deploy_scale_results.json"
CHECKPOINTS = (200, 400, 800, 1600, 3200, 6400)


def measure(last: int) -> dict[str, Any]:
    """CPU-ms and validations of the Nth deploy at each checkpoint: the median of deploys
    N-8..N (one deploy is a few ms, noisy alone)."""
    import structlog

    from controlplane.api import ControlPlaneService
    from controlplane.store.db import Store
    from controlplane.store.migrate import upgrade
    from schema.policy import Model as ModelSpec
    from tests.policy_texts import api_model_spec, example_policy

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # no event lines
    url = f"sqlite:///{tempfile.mkdtemp()}/deploy.db"
    upgrade(url)
    svc = ControlPlaneService(Store.from_url(url))
    svc.apply_policy(example_policy(), source="bench", applied_by="bench")
    calls = 0
    validate = ModelSpec.model_validate.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ModelSpec], *a: Any, **k: Any) -> ModelSpec:
        nonlocal calls
        calls += 1
        return validate(cls, *a, **k)  # type: ignore[no-any-return]

    setattr(ModelSpec, "model_validate", classmethod(counted))  # noqa: B010 (counts them)
    recent: list[tuple[int, float]] = []
    points: dict[str, dict[str, float]] = {}
    t0 = time.process_time()
    for i in range(1, last + 1):
        c0, s0 = calls, time.process_time()
        svc.deploy_model("acme", api_model_spec(f"api-{i}", max_replicas=5))
        recent = [*recent[-8:], (calls - c0, time.process_time() - s0)]
        if i in CHECKPOINTS:
            points[str(i)] = {
                "validations": statistics.median(v for v, _ in recent),
                "cpu_ms": round(statistics.median(c for _, c in recent) * 1000, 1),
            }
    return {"points": points, "total_cpu_s": round(time.process_time() - t0, 2), "last": last}


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def render(saved: dict[str, Any]) -> list[str]:
    """The page's section (``bench/simulate_bench.py`` places it)."""
    runs: dict[str, Any] = saved["runs"]
    labels = list(runs)
    lines = [
        "",
        "## Onboarding models through the API",
        "",
        "`.venv/bin/python bench/deploy_scale.py`: CPU-ms of the Nth `DeployModel` into one "
        "customer on SQLite and the ModelSpec validations it made, the median of deploys "
        "N-8..N. "
        + "; ".join(
            f"{label}: commit `{r['commit']}`, {r['run_at']}, {r['machine']}"
            for label, r in runs.items()
        )
        + ".",
        "",
        "| N | " + " | ".join(f"{x}: validations | {x}: CPU-ms" for x in labels) + " |",
        "|---|" + "---|---|" * len(labels),
    ]
    ns = sorted({int(n) for r in runs.values() for n in r["points"]})
    for n in ns:
        cells = []
        for label in labels:
            p = runs[label]["points"].get(str(n))
            cells += [f"{p['validations']:,.0f}", f"{p['cpu_ms']:.1f}"] if p else ["", ""]
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Totals: "
        + "; ".join(
            f"{label} {r['last']:,} deploys in {r['total_cpu_s']} CPU-s"
            for label, r in runs.items()
        )
        + ".",
        "",
        "The earlier code validated every other API model of the customer twice, parsed the "
        "active policy's YAML and re-derived every model's pools on each deploy, so a deploy "
        "cost grew with the models already there (onboarding N models: O(N^2)); a deploy now "
        "reads the policy (parsed once per version) and its own model only.",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--last", type=int, default=3200)
    ap.add_argument("--label", default="now")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--page", action="store_true", help="re-render docs/benchmarks.md")
    args = ap.parse_args()
    result = measure(args.last)
    result.update(
        commit=_commit(),
        run_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=f"{platform.machine()}, {__import__('os').cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
    )
    out = Path(args.out)
    saved = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    saved["runs"][args.label] = result
    out.write_text(json.dumps(saved, indent=2) + "\n")
    print("\n".join(render(saved)))
    if args.page:
        import simulate_bench

        simulate_bench.rewrite_page()


if __name__ == "__main__":
    main()
