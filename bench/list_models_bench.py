"""ListModels against a bare grpcio server, side by side in one run (issue 26 item 5).

Three servers, each in a process of its own, called by one client (this process):

- ``bare``: a grpcio servicer whose ListModels returns a canned ListModelsResponse, the
  very page gpucap's server returned (so the same bytes go over the wire);
- ``gpucap-100``: gpucap's server (``controlplane.grpc.server.serve``) on a store with 100
  models;
- ``gpucap-10000``: the same on a store with 10,000 models, the client walking its pages
  (a page of ``--page-size``, the next page's token each call, so every page is served, not
  only the first).

Rounds are interleaved (bare, 100, 10,000, bare, ...), each ``--seconds`` long with
``--threads`` client threads calling in a closed loop; each server's figure is the median
of its rounds' calls per second, and the ratio is to the bare server's median. The store is
SQLite (a file) unless ``--database-url`` names a PostgreSQL database to fill (its tables
are created and dropped).

    .venv/bin/python bench/list_models_bench.py [--rounds 5] [--seconds 3] [--threads 4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schema.gen.gpucap.v1 import control_plane_pb2 as pb  # noqa: E402
from schema.gen.gpucap.v1 import control_plane_pb2_grpc as pb_grpc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "list_models_results.json"
CUSTOMER = "demo"


def seed(url: str, models: int) -> None:
    """The demo policy applied, then ``models`` models like its chat-8b (bulk inserts), each
    with one ready replica in its pool, so every row has replica counts to report."""
    from sqlalchemy import insert, select

    from controlplane.api import ControlPlaneService
    from controlplane.store.db import Store
    from controlplane.store.migrate import upgrade
    from controlplane.store.models import Model, Pool, Replica

    upgrade(url)
    store = Store.from_url(url)
    policy = resources.files("controlplane.demo").joinpath("policy.yaml").read_text()
    ControlPlaneService(store).apply_policy(policy, source="bench", applied_by="bench")
    now = datetime.now(UTC)
    with store.session() as s:
        template = s.scalars(select(Model).where(Model.name == "chat-8b")).one()
        pool = s.scalars(select(Pool).where(Pool.cloud == "aws")).first()
        assert pool is not None
        spec = dict(template.spec)
        rows = []
        for i in range(models - 3):  # the policy's three, and the rest
            name = f"m{i:05d}"
            rows.append(
                {
                    "customer": CUSTOMER,
                    "name": name,
                    "spec": {**spec, "name": name},
                    "source": "api",
                    "desired_replicas": 1,
                    "desired_reason": "steady: load within target",
                    "paused": False,
                    "autoscaler_state": {"history": list(range(200))},
                    "created_at": now,
                    "updated_at": now,
                    "version": 1,
                }
            )
        for i in range(0, len(rows), 2000):
            s.execute(insert(Model), rows[i : i + 2000])
        ids = list(s.scalars(select(Model.id)))
        reps = [
            {
                "id": f"r-{mid}",
                "model_id": mid,
                "pool_id": pool.id,
                "gpu_shape": "1xH100",
                "state": "ready",
                "created_at": now,
                "ready_at": now,
                "warm": False,
                "version": 1,
            }
            for mid in ids
        ]
        for i in range(0, len(reps), 2000):
            s.execute(insert(Replica), reps[i : i + 2000])
    store.close()


# --------------------------------------------------------------------------- the servers


class _Canned(pb_grpc.ControlPlaneServicer):
    def __init__(self, response: pb.ListModelsResponse) -> None:
        self._response = response

    def ListModels(
        self, request: pb.ListModelsRequest, context: grpc.ServicerContext
    ) -> pb.ListModelsResponse:
        return self._response


def serve_bare(port: int, response_file: str, ready: str) -> None:
    response = pb.ListModelsResponse.FromString(Path(response_file).read_bytes())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_ControlPlaneServicer_to_server(_Canned(response), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    Path(ready).write_text("ready")
    server.wait_for_termination()


def serve_gpucap(port: int, url: str, ready: str) -> None:
    from controlplane.api import ControlPlaneService
    from controlplane.grpc.server import serve
    from controlplane.store.db import Store

    server = serve(ControlPlaneService(Store.from_url(url)), f"127.0.0.1:{port}")
    Path(ready).write_text("ready")
    server.wait_for_termination()


def _start(args: list[str], tmp: str) -> subprocess.Popen[bytes]:
    ready = Path(tmp) / f"ready-{len(os.listdir(tmp))}"
    proc = subprocess.Popen(
        [sys.executable, __file__, *args, "--ready", str(ready)],
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"server {args} did not start")
        time.sleep(0.05)
    return proc


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- the client


def tokens(stub: pb_grpc.ControlPlaneStub, page_size: int) -> list[str]:
    """Every page's token (the first page's is empty), walking the list once."""
    out, token = [""], ""
    while True:
        resp = stub.ListModels(pb.ListModelsRequest(page_size=page_size, page_token=token))
        token = resp.next_page_token
        if not token:
            return out
        out.append(token)


def round_rate(
    stub: pb_grpc.ControlPlaneStub, page_size: int, pages: list[str], seconds: float, threads: int
) -> tuple[float, int]:
    """Calls per second over ``seconds`` with ``threads`` closed-loop callers, cycling
    through ``pages``; and the bytes of one response."""
    stop = time.monotonic() + seconds
    counts = [0] * threads
    size = [0]

    def caller(k: int) -> None:
        i = k
        while time.monotonic() < stop:
            resp = stub.ListModels(
                pb.ListModelsRequest(page_size=page_size, page_token=pages[i % len(pages)])
            )
            i += 1
            counts[k] += 1
            size[0] = resp.ByteSize()

    start = time.monotonic()
    ts = [threading.Thread(target=caller, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - start), size[0]


def machine() -> dict[str, Any]:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = ("Architecture", "CPU(s):", "Model name", "Thread(s) per core")
    return {
        "cpu": [ln for ln in lscpu.splitlines() if ln.startswith(keep)],
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "platform": platform.platform(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--page-size", type=int, default=100)
    ap.add_argument("--sizes", default="100,10000")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--serve", choices=["bare", "gpucap"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--response", help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve == "bare":
        return serve_bare(args.port, args.response, args.ready)
    if args.serve == "gpucap":
        return serve_gpucap(args.port, args.url, args.ready)

    sizes = [int(x) for x in args.sizes.split(",")]
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            targets: dict[str, tuple[pb_grpc.ControlPlaneStub, list[str]]] = {}
            canned: bytes | None = None
            for n in sizes:
                url = f"sqlite:///{tmp}/models-{n}.db"
                t0 = time.monotonic()
                seed(url, n)
                print(f"seeded {n} models in {time.monotonic() - t0:.1f} s", file=sys.stderr)
                port = _free_port()
                procs.append(_start(["--serve", "gpucap", "--port", str(port), "--url", url], tmp))
                stub = pb_grpc.ControlPlaneStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
                pages = tokens(stub, args.page_size)
                targets[f"gpucap-{n}"] = (stub, pages)
                if canned is None:  # a full page of gpucap's own answer
                    first = stub.ListModels(pb.ListModelsRequest(page_size=args.page_size))
                    canned = first.SerializeToString()
            assert canned is not None
            path = Path(tmp) / "canned.bin"
            path.write_bytes(canned)
            port = _free_port()
            procs.append(
                _start(["--serve", "bare", "--port", str(port), "--response", str(path)], tmp)
            )
            bare = pb_grpc.ControlPlaneStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
            order = {"bare": (bare, [""]), **targets}
            rates: dict[str, list[float]] = {k: [] for k in order}
            sizes_b: dict[str, int] = {}
            for stub, pages in order.values():  # warm-up
                round_rate(stub, args.page_size, pages, 0.5, args.threads)
            for r in range(args.rounds):
                for name, (stub, pages) in order.items():
                    rate, nbytes = round_rate(
                        stub, args.page_size, pages, args.seconds, args.threads
                    )
                    rates[name].append(rate)
                    sizes_b[name] = nbytes
                    print(f"round {r} {name}: {rate:.0f} calls/s", file=sys.stderr)
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)
    med = {k: statistics.median(v) for k, v in rates.items()}
    out = {
        "command": "bench/list_models_bench.py " + " ".join(sys.argv[1:]),
        "run_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
        "machine": machine(),
        "page_size": args.page_size,
        "threads": args.threads,
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
        "response_bytes": sizes_b,
        "pages": {k: len(v[1]) for k, v in order.items()},
        "calls_per_s": rates,
        "median_calls_per_s": med,
        "ratio_to_bare": {k: med[k] / med["bare"] for k in med if k != "bare"},
        "target_ratio": 0.3,
    }
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("median_calls_per_s", "ratio_to_bare")}, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("GPUCAP_LOG_LEVEL", "warning")
    main()
