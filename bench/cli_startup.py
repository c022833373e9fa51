"""How long ``gpucap`` takes to start (issue 27 item 5: a read command under 0.5 s).

Each command is one fresh process, timed from spawn to exit (wall clock, what a user
waits; and its CPU time, user + system, which a busy machine inflates less); rounds are
interleaved (every command once per round, in order), and each
command's figure is the median of its rounds. The commands:

- ``python -c pass``: the floor (the interpreter alone);
- ``gpucap --help`` and ``gpucap get models --help``: the lazy command table, then one
  command module (read) loaded;
- ``gpucap get models``: a real call to a gRPC server on this machine (gpucap's server
  in a process of its own, SQLite store, one customer's policy with 3 models), table output;
- ``every command module imported``: what each invocation paid before the commands were
  loaded lazily (main.py imported every module), as a reference.

    .venv/bin/python bench/cli_startup.py [--rounds 15] [--page]

Results go to bench/cli_startup_results.json and, as a Markdown table, to stdout; with
``--page`` docs/benchmarks.md is rewritten (its "CLI startup" section, placed by
``bench/simulate_bench.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "cli_startup_results.json"
TARGET_S = 0.5  # a read command and --help (issue 27 item 5)
GPUCAP = str(Path(sys.executable).with_name("gpucap"))
PY = sys.executable

# A server in its own process, a policy applied, its port on stdout (after its log lines).
SERVER = """
import sys
from controlplane.api import ControlPlaneService
from controlplane.grpc.server import serve
from controlplane.store.db import Store
from controlplane.store.migrate import upgrade
from tests.policy_texts import engines_policy
url = f"sqlite:///{sys.argv[1]}"
upgrade(url)
service = ControlPlaneService(Store.from_url(url))
models = {f"model-{i}": ("vllm", 8000) for i in range(3)}
service.apply_policy(engines_policy(models), "bench", "bench")
server = serve(service, "127.0.0.1:0")
print(f"port={server.port}", flush=True)
sys.stdin.read()
"""

EAGER = "import typer; from controlplane.cli.main import app; typer.main.get_group(app).load_all()"


def _commands(addr: str) -> dict[str, list[str]]:
    return {
        "python -c pass (floor)": [PY, "-c", "pass"],
        "gpucap --help": [GPUCAP, "--help"],
        "gpucap get models --help": [GPUCAP, "get", "models", "--help"],
        "gpucap get models": [GPUCAP, "get", "models", "--addr", addr],
        "every command module imported (before: eager main.py)": [PY, "-c", EAGER],
    }


def _time(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run: the CPU time (user + system) is what the process
    itself spent, which waiting for a core on a busy machine does not inflate."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--page", action="store_true", help="also rewrite docs/benchmarks.md with the result"
    )
    args = ap.parse_args()
    env = {**os.environ, "COLUMNS": "200"}
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [PY, "-c", SERVER, str(Path(tmp) / "gpucap.db")],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = next(ln for ln in server.stdout if ln.startswith("port="))  # (after logs)
            addr = f"127.0.0.1:{port.strip().removeprefix('port=')}"
            commands = _commands(addr)
            times: dict[str, list[float]] = {name: [] for name in commands}
            cpu: dict[str, list[float]] = {name: [] for name in commands}
            for argv in commands.values():  # (one warm-up each: the page cache)
                _time(argv)
            for _ in range(args.rounds):
                for name, argv in commands.items():
                    wall, used = _time(argv)
                    times[name].append(wall)
                    cpu[name].append(used)
        finally:
            server.kill()
    medians = {name: statistics.median(t) for name, t in times.items()}
    result: dict[str, Any] = {
        "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {platform.platform()}",
        "rounds": args.rounds,
        "load_average": os.getloadavg(),
        "median_s": medians,
        "min_s": {name: min(t) for name, t in times.items()},
        "max_s": {name: max(t) for name, t in times.items()},
        "median_cpu_s": {name: statistics.median(t) for name, t in cpu.items()},
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("\n".join(render(result)))
    if args.page:
        sys.path.insert(0, str(ROOT / "bench"))
        import simulate_bench  # (the page's renderer; it places this benchmark's section)

        simulate_bench.rewrite_page()


def render(saved: dict[str, Any]) -> list[str]:
    """The page's section for a saved run (``bench/simulate_bench.py`` places it)."""
    load = ", ".join(f"{x:.1f}" for x in saved["load_average"])
    lines = [
        "",
        "## CLI startup",
        "",
        f"`.venv/bin/python bench/cli_startup.py --rounds {saved['rounds']}` at commit "
        f"`{saved['commit']}`, {saved['at']}, on {saved['machine']}; load average at the end "
        f"{load} (other sessions' work on the two cores). Each command is a fresh process, "
        "timed from spawn to exit; rounds interleave the commands; medians of the rounds. "
        "CPU is the process's user + system time, which waiting for a core does not add to. "
        "`gpucap get models` calls a gpucap gRPC server on the same machine (SQLite, 3 "
        "models). The last row imports every command module, as `main.py` did before the "
        "commands loaded lazily. Target: a read command and `gpucap --help` under 0.5 s.",
        "",
        "| command | median wall s | min wall s | max wall s | median CPU s |",
        "|---|---|---|---|---|",
    ]
    for name, median in saved["median_s"].items():
        lines.append(
            f"| `{name}` | {median:.3f} | {saved['min_s'][name]:.3f} "
            f"| {saved['max_s'][name]:.3f} | {saved['median_cpu_s'][name]:.3f} |"
        )
    targeted = [n for n in saved["median_s"] if n.startswith("gpucap ")]
    met = [n for n in targeted if saved["median_s"][n] < TARGET_S]
    lines += [
        "",
        f"Median wall time under {TARGET_S} s: "
        + "; ".join(
            f"`{n}` {'met' if n in met else 'not met'} ({saved['median_s'][n]:.2f} s)"
            for n in targeted
        )
        + f". Median CPU time under {TARGET_S} s: "
        + "; ".join(
            f"`{n}` {'yes' if saved['median_cpu_s'][n] < TARGET_S else 'no'}" for n in targeted
        )
        + ".",
    ]
    return lines


if __name__ == "__main__":
    main()
