"""The control loop at fleet scale (issue 26 item 5): one steady tick of each job, measured.

The store is seeded directly, in its steady state: per customer a policy applied through
the API (the customer, its accounts and pools) with one model, then the rest of its models
(API-deployed rows copying that model's spec, ``min_replicas = max_replicas`` so the
decider holds), their replicas and nodes bulk-inserted ready, spread over the customer's
regions; every node has its instance on the simulated cloud (``providers/sim``), created
through the same resolver the loop uses, with gpucap's ownership tags, running and serving.

Then one warm-up round of every job (caches filled as in a running daemon), and one
measured round: per job, CPU seconds of this process (``time.process_time`` around the
call), the PostgreSQL backends' CPU (utime + stime from ``/proc/<pid>/stat`` of every
backend on the bench database, read before and after; SQLite runs in-process, so it is in
the first figure), SQL statements (a ``before_cursor_execute`` counter on the engine), and
cloud calls (a counting wrapper around each provider, by verb). A job's CPU per second of
wall time is its per-tick CPU over its default interval (``Tuning``); gc runs every
``gc_every_s`` and offerings every ``offerings_every_s``.

    .venv/bin/python bench/loop_scale.py                     # 1,000 and 10,000 models, both stores
    .venv/bin/python bench/loop_scale.py --sizes 1000 --stores sqlite
    .venv/bin/python bench/loop_scale.py --pg-url postgresql+psycopg://postgres@127.0.0.1:5432/test

On PostgreSQL a throwaway database (``gpucap_loop_scale_<pid>``) is created and dropped.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import event, insert, select, text  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402

from autoscaler import GpucapAutoscaler  # noqa: E402
from autoscaler.types import MetricsSample  # noqa: E402
from controlplane import gc_tuning  # noqa: E402
from controlplane.api import ControlPlaneService  # noqa: E402
from controlplane.lifecycle.health import Probe  # noqa: E402
from controlplane.loop import ControlLoop, LoopContext, Tuning  # noqa: E402
from controlplane.metrics_sources import Capacity, ModelKey  # noqa: E402
from controlplane.probes import ProbeTarget  # noqa: E402
from controlplane.resolvers import SimHealth, SimResolver  # noqa: E402
from controlplane.store.db import Store, make_engine  # noqa: E402
from controlplane.store.migrate import upgrade  # noqa: E402
from controlplane.store.models import Account, Model, Node, Pool, Replica  # noqa: E402
from controlplane.telemetry import Metrics, configure_logging  # noqa: E402
from providers.base import NodeRequest, Provider, ownership_tags  # noqa: E402
from providers.retry import NO_RETRY  # noqa: E402
from providers.sim import SimCloud, SimTimings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "loop_scale_results.json"
LIST_MODELS_RESULTS = ROOT / "bench" / "list_models_results.json"
TARGET_CPU_PER_S = 0.25
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

# AWS regions with the 1xH100 instance type (p5.4xlarge) in the catalog: a customer's
# account runs in REGIONS_PER_CUSTOMER of them.
REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "eu-west-1",
    "eu-west-2",
    "eu-central-1",
    "eu-north-1",
    "ap-northeast-1",
)

# Jobs in the order a daemon's first tick runs them, with the Tuning field of their interval.
JOBS: tuple[tuple[str, str], ...] = (
    ("collect", "collect_s"),
    ("decide", "decide_s"),
    ("place", "place_s"),
    ("reconcile", "reconcile_s"),
    ("gc", "gc_every_s"),
    ("offerings", "offerings_every_s"),
    ("staging", "staging_s"),
    ("images", "images_s"),
)


@dataclass(frozen=True)
class Size:
    customers: int
    models_per_customer: int
    replicas_per_model: int  # one node each (1xH100)
    regions_per_customer: int = 10

    @property
    def models(self) -> int:
        return self.customers * self.models_per_customer

    @property
    def nodes(self) -> int:
        return self.models * self.replicas_per_model

    @property
    def sites(self) -> int:
        """(account, region) pairs: one customer-owned account per customer."""
        return self.customers * self.regions_per_customer

    @property
    def nodes_per_site(self) -> float:
        return self.nodes / self.sites


SIZES: dict[str, Size] = {
    "20": Size(1, 20, 2, regions_per_customer=2),
    "1000": Size(5, 200, 5),
    # the same sites with twice the nodes in each: what grows with nodes inside a site
    "1000-dense": Size(5, 200, 10),
    "10000": Size(50, 200, 5),
    # 10,000 models with one node each: what PostgreSQL's seeding fits in a shorter run
    "10000-1": Size(50, 200, 1),
}


@dataclass
class Clock:
    t: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class SteadyLoad:
    """Each model at half its ready slots: a load the decider holds on (and min = max)."""

    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        out: dict[ModelKey, MetricsSample | None] = {}
        for k, c in capacity.items():
            slots = c.ready_replicas * c.slots_per_replica
            out[k] = MetricsSample(now, slots / 4, slots / 2, 0.0)
        return out


# --------------------------------------------------------------------------- counting


@dataclass
class CallCounter:
    calls: Counter[str] = field(default_factory=Counter)
    # CPU seconds (process_time) spent inside the simulated cloud: its provider verbs, and
    # the engines' answers to health probes (``SimHealth``), work a real cloud and real
    # engines do on their side
    sim_s: float = 0.0
    probe_s: float = 0.0


class _CountingProvider:
    """A provider whose every verb is counted (by name) and timed (CPU) as it is called."""

    def __init__(self, inner: Provider, counter: CallCounter) -> None:
        self._inner = inner
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counter.calls[name] += 1
            c0 = time.process_time()
            try:
                return attr(*args, **kwargs)
            finally:
                self._counter.sim_s += time.process_time() - c0

        return counted


@dataclass
class TimedHealth:
    """``SimHealth`` with its CPU (the simulated engines' answers) timed."""

    inner: SimHealth
    counter: CallCounter

    def probe(self, targets: Sequence[ProbeTarget]) -> Mapping[str, Probe]:
        c0 = time.process_time()
        try:
            return self.inner.probe(targets)
        finally:
            self.counter.probe_s += time.process_time() - c0


@dataclass
class CountingResolver:
    inner: SimResolver
    counter: CallCounter
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict)

    def provider(self, customer: str, account: Account) -> Provider:
        key = (customer, account.name)
        if key not in self._cache:
            self._cache[key] = _CountingProvider(
                self.inner.provider(customer, account), self.counter
            )
        out: Provider = self._cache[key]
        return out


@dataclass
class StatementCounter:
    n: int = 0

    def attach(self, engine: Engine) -> None:
        event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *_: Any) -> None:
        self.n += 1


class PgBackends:
    """CPU seconds of the PostgreSQL backends serving one database, from /proc (the server
    runs on this machine); None when /proc does not show them."""

    def __init__(self, engine: Engine | None) -> None:
        self._engine = engine
        self._tick = os.sysconf("SC_CLK_TCK")

    def cpu_s(self) -> float | None:
        if self._engine is None:
            return None
        with self._engine.connect() as c:
            pids = list(
                c.scalars(
                    text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
                )
            )
        total = 0.0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return None
            total += (int(fields[11]) + int(fields[12])) / self._tick
        return total


# --------------------------------------------------------------------------- seeding


def policy_yaml(customer: str, size: Size) -> str:
    regions = ", ".join(REGIONS[: size.regions_per_customer])
    r = size.replicas_per_model
    return f"""customer: {customer}
accounts:
  - name: {customer}-aws
    cloud: aws
    owner: customer
    regions: [{regions}]
    credentials:
      role_arn: arn:aws:iam::111122223333:role/{customer}
models:
  - name: m0000
    shapes:
      - shape: 1xH100
        max_concurrency: 32
    min_replicas: {r}
    max_replicas: {r}
    latency_slo_ms: 500
    clouds: [aws]
"""


@dataclass
class World:
    store: Store
    sim: SimCloud
    clock: Clock
    resolver: SimResolver
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)


def seed(url: str, size: Size, clock: Clock) -> World:
    """The steady fleet of ``size`` in the store at ``url`` and on a new simulated cloud."""
    t0 = time.monotonic()
    upgrade(url)
    store = Store.from_url(url)
    sim = SimCloud(
        timings=SimTimings(boot_s=0.0, serve_s=0.0, terminate_s=0.0),
        default_capacity=10**9,
        clock=clock,
    )
    resolver = SimResolver(sim, retry=NO_RETRY)
    svc = ControlPlaneService(store, clock=lambda: datetime.fromtimestamp(clock(), UTC))
    now = datetime.fromtimestamp(clock(), UTC)
    serial = 0
    for c in range(size.customers):
        customer = f"c{c:03d}"
        svc.apply_policy(policy_yaml(customer, size), source="bench", applied_by="bench")
        with store.session() as s:
            template = s.scalars(select(Model).where(Model.customer == customer)).one()
            template.desired_replicas = size.replicas_per_model
            template.desired_reason = "steady"
            spec = dict(template.spec)
            pools = list(
                s.scalars(
                    select(Pool)
                    .where(Pool.customer == customer, Pool.instance_type == "p5.4xlarge")
                    .order_by(Pool.region)
                )
            )
            account = s.scalars(select(Account).where(Account.customer == customer)).one()
            s.expunge(account)
            rows = [
                {
                    "customer": customer,
                    "name": f"m{i:04d}",
                    "spec": {**spec, "name": f"m{i:04d}"},
                    "source": "api",
                    "desired_replicas": size.replicas_per_model,
                    "desired_reason": "steady",
                    "paused": False,
                    "autoscaler_state": {},
                    "created_at": now,
                    "updated_at": now,
                    "version": 1,
                }
                for i in range(1, size.models_per_customer)
            ]
            if rows:
                s.execute(insert(Model), rows)
            models = list(s.execute(select(Model.id, Model.name).where(Model.customer == customer)))
        provider = resolver.provider(customer, account)
        replicas, nodes = [], []
        for k, (mid, name) in enumerate(models):
            for j in range(size.replicas_per_model):
                pool = pools[(k * size.replicas_per_model + j) % len(pools)]
                serial += 1
                rid, nid = f"r{serial:07d}", f"n{serial:07d}"
                cloud = provider.create_node(
                    NodeRequest(
                        intent_id=nid,
                        instance_type=pool.instance_type,
                        region=pool.region,
                        tags=ownership_tags(nid, customer, pool.id, name),
                    )
                ).node
                replicas.append(
                    {
                        "id": rid,
                        "model_id": mid,
                        "pool_id": pool.id,
                        "gpu_shape": "1xH100",
                        "state": "ready",
                        "created_at": now,
                        "ready_at": now,
                        "warm": False,
                        "version": 1,
                    }
                )
                nodes.append(
                    {
                        "id": nid,
                        "replica_id": rid,
                        "pool_id": pool.id,
                        "customer": customer,
                        "account": account.name,
                        "cloud": "aws",
                        "region": pool.region,
                        "zone": cloud.zone,
                        "instance_type": pool.instance_type,
                        "idempotency_token": nid,
                        "instance_id": cloud.instance_id,
                        "state": "ready",
                        "attempts": 1,
                        "pending_at": now,
                        "provisioning_at": now,
                        "running_at": now,
                        "ready_at": now,
                        "private_ip": cloud.private_ip,
                        "probe_failures": 0,
                        "version": 1,
                    }
                )
        with store.session() as s:
            for i in range(0, len(replicas), 5000):
                s.execute(insert(Replica), replicas[i : i + 5000])
            for i in range(0, len(nodes), 5000):
                s.execute(insert(Node), nodes[i : i + 5000])
    with store.session() as s:
        counts = {
            "models": len(list(s.scalars(select(Model.id)))),
            "pools": len(list(s.scalars(select(Pool.id)))),
            "replicas": len(list(s.scalars(select(Replica.id)))),
            "nodes": len(list(s.scalars(select(Node.id)))),
        }
    return World(store, sim, clock, resolver, time.monotonic() - t0, counts)


# --------------------------------------------------------------------------- measuring


def make_loop(world: World, counter: CallCounter) -> ControlLoop:
    ctx = LoopContext(
        store=world.store,
        providers=CountingResolver(world.resolver, counter),
        metrics_source=SteadyLoad(),
        health=TimedHealth(SimHealth(world.sim), counter),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        # gc is measured as its own job (reconcile would run it when due)
        tuning=replace(Tuning(), gc_every_s=10.0**12),
        clock=world.clock,
    )
    return ControlLoop(ctx)


def job_calls(loop: ControlLoop) -> dict[str, Callable[[], object]]:
    return {
        "collect": loop.collect_metrics,
        "decide": loop.decide,
        "place": loop.place,
        "reconcile": loop.reconcile,
        "gc": loop.collect_garbage,
        "offerings": loop.refresh_offerings,
        "staging": loop.stage_weights,
        "images": loop.bake_images,
    }


# The pure decisions of the jobs (no I/O: their CPU is what any implementation of this loop
# spends while it decides every model each tick and steps every node each pass): module
# and name, as each job calls them.
DECISIONS = (
    ("controlplane.loop.decide", "scale"),  # the autoscaler's step, per model
    ("controlplane.loop.place", "plan"),  # placement, per customer
    ("controlplane.loop.reconcile", "step_pending"),  # the node lifecycle, per node
    ("controlplane.loop.reconcile", "step_live"),
    ("controlplane.loop.reconcile", "step_warm"),
    ("controlplane.loop.reconcile", "step_leaving"),
)


class DecisionTimer:
    """CPU seconds inside the pure decision functions (``DECISIONS``), each call timed by
    ``time.process_time`` (the timer's own cost, about a microsecond a call, is in it)."""

    def __init__(self) -> None:
        self.s = 0.0
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> DecisionTimer:
        import importlib

        for module_name, name in DECISIONS:
            module = importlib.import_module(module_name)
            inner = getattr(module, name)
            self._saved.append((module, name, inner))
            setattr(module, name, self._timed(inner))
        return self

    def __exit__(self, *_: object) -> None:
        for module, name, inner in self._saved:
            setattr(module, name, inner)

    def _timed(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kw: Any) -> Any:
            t0 = time.process_time()
            try:
                return inner(*args, **kw)
            finally:
                self.s += time.process_time() - t0

        return timed


class GcTimer:
    """CPU seconds of the process spent in Python's garbage collector (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.s = 0.0
        self._t0 = 0.0

    def __call__(self, phase: str, info: Mapping[str, int]) -> None:
        if phase == "start":
            self._t0 = time.process_time()
        else:
            self.s += time.process_time() - self._t0


# (code and modules reach every global: not the world's state)
_NOT_STATE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
)


def heap_objects(root: object) -> int:
    """Objects the garbage collector tracks that ``root`` reaches (the simulated cloud's
    share of what every full collection looks through)."""
    seen = {id(root)}
    todo = [root]
    while todo:
        for ref in gc.get_referents(todo.pop()):
            if isinstance(ref, _NOT_STATE) or not gc.is_tracked(ref) or id(ref) in seen:
                continue
            seen.add(id(ref))
            todo.append(ref)
    return len(seen)


def measure(world: World, pg: PgBackends) -> dict[str, Any]:
    """A warm-up round of every job, then the measured round."""
    counter = CallCounter()
    gc_timer = GcTimer()
    statements = StatementCounter()
    statements.attach(world.store.engine)
    loop = make_loop(world, counter)
    jobs = job_calls(loop)
    for call in jobs.values():  # warm-up: what a running daemon has cached
        world.clock.t += 1.0
        call()
    world.clock.t += 15.0
    out: dict[str, Any] = {}
    tuning = Tuning()
    gc.callbacks.append(gc_timer)
    for name, interval_field in JOBS:
        world.clock.t += 1.0
        gc.collect()
        counter.calls.clear()
        counter.sim_s = counter.probe_s = gc_timer.s = 0.0
        statements.n = 0
        pg0 = pg.cpu_s()
        w0, c0 = time.perf_counter(), time.process_time()
        with DecisionTimer() as decisions:
            jobs[name]()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        pg1 = pg.cpu_s()
        interval = float(getattr(tuning, interval_field))
        server = None if pg0 is None or pg1 is None else pg1 - pg0
        sim = counter.sim_s + counter.probe_s
        out[name] = {
            "cpu_s": round(cpu, 4),
            # of cpu_s, inside the simulated cloud (provider verbs + engine probes)
            "sim_cpu_s": round(sim, 4),
            "sim_probe_cpu_s": round(counter.probe_s, 4),
            # of cpu_s, in Python's garbage collector (whose full collections look through
            # the simulated cloud's objects too: ``heap`` in the run)
            "gc_cpu_s": round(gc_timer.s, 4),
            # of cpu_s, inside the pure decisions (``DECISIONS``)
            "decisions_cpu_s": round(decisions.s, 4),
            "decisions_cpu_s_per_s": round(decisions.s / interval, 5),
            "server_cpu_s": None if server is None else round(server, 4),
            "wall_s": round(wall, 4),
            "statements": statements.n,
            "cloud_calls": sum(counter.calls.values()),
            "cloud_calls_by_verb": dict(counter.calls),
            "interval_s": interval,
            "cpu_s_per_s": round((cpu + (server or 0.0)) / interval, 5),
            # the daemon's own: without the simulated cloud's share
            "daemon_cpu_s_per_s": round((cpu - sim + (server or 0.0)) / interval, 5),
        }
    gc.callbacks.remove(gc_timer)
    event.remove(world.store.engine, "before_cursor_execute", statements._count)
    return out


def run_one(store_kind: str, size_name: str, pg_url: str) -> dict[str, Any]:
    size = SIZES[size_name]
    clock = Clock()
    db = None
    admin = None
    if store_kind == "sqlite":
        path = Path(f"/tmp/gpucap-loop-scale-{os.getpid()}-{size_name}.db")
        path.unlink(missing_ok=True)
        url = f"sqlite:///{path}"
    else:
        db = f"gpucap_loop_scale_{os.getpid()}"
        admin = make_engine(pg_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{db}"'))
            c.execute(text(f'CREATE DATABASE "{db}"'))
        url = pg_url.rsplit("/", 1)[0] + f"/{db}"
    try:
        world = seed(url, size, clock)
        print(
            f"{store_kind} {size_name}: seeded {world.counts} in {world.seconds:.0f} s",
            file=sys.stderr,
        )
        pg = PgBackends(world.store.engine if store_kind == "postgresql" else None)
        jobs = measure(world, pg)
        heap = {"tracked": len(gc.get_objects()), "simulated_cloud": heap_objects(world.sim)}
        world.store.close()
    finally:
        if store_kind == "sqlite":
            path.unlink(missing_ok=True)
        elif admin is not None:
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
            admin.dispose()
    total_cpu_per_s = sum(j["cpu_s_per_s"] for j in jobs.values())
    decisions_per_s = sum(j["decisions_cpu_s_per_s"] for j in jobs.values())
    daemon_cpu_per_s = sum(j["daemon_cpu_s_per_s"] for j in jobs.values())
    for name, j in jobs.items():
        print(
            f"  {name:9s} cpu {j['cpu_s']:.3f} s (sim {j['sim_cpu_s']:.3f}, "
            f"gc {j['gc_cpu_s']:.3f})  "
            f"server {j['server_cpu_s']}  "
            f"sql {j['statements']}  cloud {j['cloud_calls']}",
            file=sys.stderr,
        )
    return {
        "store": store_kind,
        "size": size_name,
        "customers": size.customers,
        "models": size.models,
        "nodes": size.nodes,
        "sites": size.sites,
        "nodes_per_site": size.nodes_per_site,
        "seeded": world.counts,
        "seed_s": round(world.seconds, 1),
        "heap_objects": heap,
        "jobs": jobs,
        "cpu_s_per_s": round(total_cpu_per_s, 4),
        "daemon_cpu_s_per_s": round(daemon_cpu_per_s, 4),
        "decisions_cpu_s_per_s": round(decisions_per_s, 4),
    }


def growth(runs: list[dict[str, Any]], store: str, a: str, b: str) -> dict[str, Any] | None:
    """Per job, the ratio of size ``b``'s figures to size ``a``'s on one store."""
    by = {(r["store"], r["size"]): r for r in runs}
    if (store, a) not in by or (store, b) not in by:
        return None
    ra, rb = by[(store, a)], by[(store, b)]
    out: dict[str, Any] = {}
    for job in ra["jobs"]:
        ja, jb = ra["jobs"][job], rb["jobs"][job]
        out[job] = {
            k: (round(jb[k] / ja[k], 2) if ja[k] else None)
            for k in ("cpu_s", "statements", "cloud_calls")
        }
    return out


def machine() -> dict[str, Any]:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = ("Architecture", "CPU(s):", "Model name", "Thread(s) per core")
    return {
        "cpu": [ln for ln in lscpu.splitlines() if ln.startswith(keep)],
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1000,1000-dense,10000")
    ap.add_argument("--stores", default="sqlite,postgresql")
    ap.add_argument("--pg-url", default=PG_URL)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--no-page", dest="page", action="store_false", help="leave docs alone")
    args = ap.parse_args(argv)
    gc_tuning.tune()  # the collector as the daemon sets it (``gpucap daemon``)
    t0 = time.monotonic()
    # (read before the run: a commit made meanwhile is not the code that ran)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    runs = []
    for size_name in args.sizes.split(","):
        for store_kind in args.stores.split(","):
            if size_name.endswith("-dense") and store_kind != "sqlite":
                continue  # statement counts do not depend on the store; SQLite is enough
            runs.append(run_one(store_kind, size_name, args.pg_url))
    result = {
        "command": "bench/loop_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "run_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "wall_min": round((time.monotonic() - t0) / 60, 1),
        "machine": machine(),
        "runs": runs,
        "growth_1000_to_10000": {
            s: growth(runs, s, "1000", "10000") or growth(runs, s, "1000", "10000-1")
            for s in ("sqlite", "postgresql")
        },
        "growth_with_nodes_per_site": growth(runs, "sqlite", "1000", "1000-dense"),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    if args.page:
        import simulate_bench

        simulate_bench.rewrite_page()
    return result


# --------------------------------------------------------------------------- the page


def _f(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _r(ratio: float | None) -> str:
    return "- (none in either)" if ratio is None else f"{ratio:g}"


def render(saved: dict[str, Any], list_models: dict[str, Any] | None = None) -> list[str]:
    """The page's section for a saved run (``bench/simulate_bench.py`` places it), with
    ``bench/list_models_bench.py``'s saved figures when they exist."""
    if list_models is None and LIST_MODELS_RESULTS.exists():
        list_models = json.loads(LIST_MODELS_RESULTS.read_text())
    runs = saved["runs"]
    lines = [
        "",
        "## The loop and the API at fleet scale",
        "",
        f"`.venv/bin/python {saved['command']}` at commit `{saved['commit']}`, "
        f"{saved['run_at']} ({saved['wall_min']} min on the machine above: "
        f"{'; '.join(' '.join(x.split()) for x in saved['machine']['cpu'])}, "
        "shared with other sessions' work). The store is seeded "
        "directly in its steady state: per customer one policy (one AWS account, its regions' "
        "1xH100 pools) and 200 models with `min_replicas = max_replicas` replicas, one ready "
        "node each, spread over the regions, every node's instance running and serving on the "
        "simulated cloud. One warm-up round of every job, then one measured round: CPU "
        "seconds of the daemon's process (`time.process_time`), the PostgreSQL backends' CPU "
        "on the bench database (from `/proc/<pid>/stat`; on SQLite the database runs in the "
        "process), SQL statements (`before_cursor_execute`) and cloud calls (every provider "
        "verb, counted). The simulated cloud runs in the daemon's process, so its own work "
        "(what a real cloud does on its side: listing a region's instances, answering a "
        "describe; and the simulated engines' answers to health probes) is in the process's "
        'CPU: the column "of which in the simulated cloud" is the CPU spent inside the '
        "provider verbs and `SimHealth.probe` (`time.process_time` around each call, in the "
        "bench's counting wrapper), and the daemon's own CPU-s per s leaves it out (a real "
        "daemon spends its own CPU on the HTTP calls and probes instead, not measured "
        "here). CPU-s per second of wall time is (process + server) CPU per tick "
        "over the job's default interval (`Tuning`: collect, decide, place 15 s; reconcile "
        "10 s; staging 30 s; images 60 s; gc 120 s; offerings 300 s).",
        "",
        "| store | models | nodes | (account, region) sites | nodes per site | job | CPU-s "
        "per tick | of which in the simulated cloud | of which in the garbage collector | "
        "of which in the pure decisions | server CPU-s | SQL statements | cloud calls | "
        "CPU-s per s | the daemon's own CPU-s per s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        for job, j in r["jobs"].items():
            lines.append(
                f"| {r['store']} | {r['models']:,} | {r['nodes']:,} | {r['sites']} | "
                f"{r['nodes_per_site']:.0f} | {job} | {_f(j['cpu_s'])} | "
                f"{_f(j.get('sim_cpu_s'))} | {_f(j.get('gc_cpu_s'))} | "
                f"{_f(j.get('decisions_cpu_s'))} | "
                f"{_f(j['server_cpu_s'])} | {j['statements']:,} | {j['cloud_calls']:,} | "
                f"{_f(j['cpu_s_per_s'], 4)} | {_f(j.get('daemon_cpu_s_per_s'), 4)} |"
            )
        lines.append(
            f"| {r['store']} | {r['models']:,} | {r['nodes']:,} | {r['sites']} | "
            f"{r['nodes_per_site']:.0f} | **all** | | | | | | | | **{_f(r['cpu_s_per_s'], 4)}** | "
            f"**{_f(r.get('daemon_cpu_s_per_s'), 4)}** |"
        )
    heaps = [r for r in runs if r.get("heap_objects")]
    if heaps:
        lines += [
            "",
            "Objects Python's garbage collector tracks after the measured round (each full "
            "collection looks through all of them), and of them the simulated cloud's (its "
            "instances, their tags, its indexes): "
            + "; ".join(
                f"{r['store']} {r['models']:,} models: {r['heap_objects']['tracked']:,}, "
                f"{r['heap_objects']['simulated_cloud']:,}"
                for r in heaps
            )
            + ".",
        ]
    if saved.get("note"):
        lines += ["", saved["note"]]
    lines += [
        "",
        "Growth from 1,000 to 10,000 models (ratio of the larger run's figure to the 1,000 "
        "run's; models and sites grow 10x, nodes as the runs above say):",
        "",
    ]
    lines += ["| store | job | CPU-s | SQL statements | cloud calls |", "|---|---|---|---|---|"]
    for store, g in saved["growth_1000_to_10000"].items():
        for job, x in (g or {}).items():
            lines.append(
                f"| {store} | {job} | {_r(x['cpu_s'])} | {_r(x['statements'])} | "
                f"{_r(x['cloud_calls'])} |"
            )
    dense = saved.get("growth_with_nodes_per_site")
    if dense:
        lines += [
            "",
            "Statements and cloud calls with twice the nodes in each (account, region) (SQLite, "
            "1,000 models with 5 and with 10 replicas each, the same sites; ratio):",
            "",
            "| job | SQL statements | cloud calls | CPU-s |",
            "|---|---|---|---|",
        ]
        for job, x in dense.items():
            lines.append(
                f"| {job} | {_r(x['statements'])} | {_r(x['cloud_calls'])} | {_r(x['cpu_s'])} |"
            )
    lines += ["", "Targets:", ""]
    by = {(r["store"], r["size"]): r for r in runs}
    big = by.get(("postgresql", "10000")) or by.get(("postgresql", "10000-1"))
    if big is not None:
        own = big.get("daemon_cpu_s_per_s")
        figure = big["cpu_s_per_s"] if own is None else own
        ok = figure <= TARGET_CPU_PER_S
        lines.append(
            f"- all jobs at 10,000 models ({big['nodes']:,} nodes) on PostgreSQL at the "
            "default intervals: "
            + (
                f"{big['cpu_s_per_s']:.3f} CPU-s per second"
                if own is None
                else f"{own:.3f} CPU-s per second of the daemon's own "
                f"({big['cpu_s_per_s']:.3f} with the simulated cloud's share)"
            )
            + f" (target <= {TARGET_CPU_PER_S}) {'✔' if ok else '✘'}"
        )
        if big.get("decisions_cpu_s_per_s") is not None:
            lines.append(
                f"  - of it, the pure decisions alone (the autoscaler's step for every "
                f"model, placement for every customer, the lifecycle step for every node: "
                f"`DECISIONS` in the bench) {big['decisions_cpu_s_per_s']:.3f} CPU-s per "
                "second: the floor of a loop that decides every model each tick and steps "
                "every node each pass, whatever its reads and writes cost"
            )
    else:
        lines.append("- the 10,000-model PostgreSQL run is not in this result")
    if dense:
        grown = [job for job, x in dense.items() if (x["statements"] or 1) > 1.05]
        lines.append(
            "- no statement count grows with the nodes inside one (account, region): "
            + ("✔" if not grown else f"✘ ({', '.join(grown)} grow)")
        )
        calls = [job for job, x in dense.items() if (x["cloud_calls"] or 1) > 1.05]
        lines.append(
            "- cloud calls per tick grow with (account, region) pairs, not nodes: "
            + ("✔" if not calls else f"✘ ({', '.join(calls)} grow with nodes)")
        )
    if list_models:
        lm = list_models
        med = lm["median_calls_per_s"]
        lines += [
            "",
            f"ListModels, a page of {lm['page_size']} (`.venv/bin/python "
            f"{lm['command']}`, {lm['run_at']}, commit `{lm['commit']}`): a bare grpcio "
            "servicer returning a canned ListModelsResponse of the same page and gpucap's "
            "server (`controlplane.grpc.server.serve`, SQLite) on stores of 100 and 10,000 "
            f"models, each in its own process, called by one client with {lm['threads']} "
            f"threads in a closed loop; {lm['rounds']} interleaved rounds of "
            f"{lm['seconds_per_round']:g} s, medians; on 10,000 models the client walks every "
            f"page with its token. Response {lm['response_bytes'].get('bare', 0):,} bytes.",
            "",
            "| server | calls/s (median) | x bare (target >= 0.3) |",
            "|---|---|---|",
            f"| bare grpcio | {med['bare']:,.0f} | 1 |",
        ]
        for k, ratio in lm["ratio_to_bare"].items():
            lines.append(f"| {k} | {med[k]:,.0f} | {ratio:.2f} {'✔' if ratio >= 0.3 else '✘'} |")
    return lines


if __name__ == "__main__":
    # warnings only, as JSON (the daemon's format): the warm-up round's per-model
    # "autoscale" lines (each model's first decision) are not the bench's output
    os.environ.setdefault("GPUCAP_LOG_LEVEL", "warning")
    configure_logging(os.environ["GPUCAP_LOG_LEVEL"], json=True)
    main()
