"""Chaos with real processes (issue 26 item 6): ``gpucap daemon`` processes (1, 2 or 3 at once)
on a fresh PostgreSQL database and one persistent simulated cloud (its SQLite state file,
``providers/sim``), driven up and down and SIGKILLed at seeded random moments, with faults
injected at the cloud; then ``gpucap audit --output json`` says whether anything leaked,
was duplicated or was lost.

A run repeats steps until it has made its kills. A step, with the run's seeded RNG:

1. new targets: each model pinned (``PinModel`` over gRPC, to any live daemon) to a replica
   count drawn from its range (scale-up and scale-down);
2. maybe a fault at the cloud, written into the state file (``providers.sim.faults``):
   a stockout, quota, throttling, 5xx, a lost create answer, a slow create answer, a
   partial gang failure (the gang's second create refused), a region without stock (the
   model must go to its other cloud), a zero quota, or an outage (the file's write lock
   held for seconds: every cloud call waits, as during an emulator restart);
3. a SIGKILL of the acting daemon: at a random moment, or in the window between "intent
   committed" and "provider call returned" (a latency fault on the next creates, and the
   kill once a node row is pending with an attempt counted, no instance id, while the cloud
   already holds an instance carrying its intent). With several daemons some steps SIGSTOP
   the leader in that window instead, wait for a standby to take over, SIGCONT it and count
   its fenced writes (``job.fenced`` in its log: the write of the create's answer, refused)
   before killing it. The killed daemon is restarted (with several, it comes back a standby);
   the takeover time is from the kill to a survivor's ``/readyz`` saying ``leader``.

Every ``--audit-every`` kills and at the end: faults cleared, stock and quota restored, then
convergence is awaited (every model's ready replicas equal its pin, every node ready or
ended, and the audit clean with nothing settling and every listed instance tracked) within
``--converge-s``; its time counts from the moment the faults were cleared. Calls per minute
are the cloud's own create counter (the state file's), over the run, by minute.

``--cloud emulators``: the same against moto (server mode, behind its fault proxy), the
GCP and the OCI wire fakes, in a process of their own that outlives every daemon, the
daemons in real provider mode (``bench/chaos_emulators.py``: its faults, and why nodes there stay
``running``). Convergence there: every model's live replicas equal its pin, every node
``running`` or ended, nothing pending, and the audit clean with every instance the clouds
list tracked (no engine runs on an emulated instance, so no node is ever ``ready``; the
provision timeout, an hour, is far past any run, so none is replaced for it).

    .venv/bin/python bench/chaos.py --daemons 1 --kills 60 --seed 1
    .venv/bin/python bench/chaos.py --daemons 3 --kills 60 --seed 3 --out bench/chaos_results.json
    .venv/bin/python bench/chaos.py --cloud emulators --daemons 1 2 --kills 20 \
        --out bench/chaos_emulators_results.json

Each run creates a database ``gpucap_chaos_<pid>_<n>`` on ``--pg-url`` and drops it after.
Exit status 1 when any run had a finding or did not converge within its bound."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml
from sqlalchemy import Engine, make_url, text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.chaos_emulators import Emulators  # noqa: E402
from controlplane.store.db import make_engine  # noqa: E402
from providers.sim.cloud import open_shared  # noqa: E402
from schema.gen.gpucap.v1 import control_plane_pb2 as pb  # noqa: E402
from schema.gen.gpucap.v1 import control_plane_pb2_grpc as pb_grpc  # noqa: E402
from schema.types import Cloud  # noqa: E402

GPUCAP = [sys.executable, "-m", "controlplane.cli.main"]
PG_URL = os.environ.get("GPUCAP_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
CUSTOMER = "chaos"
# Accounts as the simulated cloud knows them (a customer's own: "<customer>/<name>").
AWS, GCP, OCI = f"{CUSTOMER}/aws-1", f"{CUSTOMER}/gcp-1", f"{CUSTOMER}/oci-1"
SIM_ACCOUNT = {Cloud.AWS: AWS, Cloud.GCP: GCP, Cloud.OCI: OCI}
ACCOUNT_OF = {Cloud.AWS: "aws-1", Cloud.GCP: "gcp-1", Cloud.OCI: "oci-1"}  # the store's names
REGION_OF = {Cloud.AWS: "us-east-1", Cloud.GCP: "us-central1", Cloud.OCI: "us-ashburn-1"}
CLOUDS = (Cloud.AWS, Cloud.GCP, Cloud.OCI)
# Faults whose refusal blocks a pool or an account in the daemon for minutes.
BLOCKING = frozenset({"capacity", "quota", "gang_partial", "stockout_region", "zero_quota"})
# The first 8xH100 type of each cloud (schema/catalog.py): a stockout of it sends the model
# to the next pool (another type, or the other cloud).
H100_8 = {Cloud.AWS: "p5.48xlarge", Cloud.GCP: "a3-highgpu-8g", Cloud.OCI: "BM.GPU.H100.8"}
# The models and how far each is pinned up and down.
TARGETS = {"single": (0, 5), "gang": (0, 1)}
POLICY = f"""\
customer: {CUSTOMER}
accounts:
  - name: aws-1
    cloud: aws
    owner: customer
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::111122223333:role/gpucap-chaos
  - name: gcp-1
    cloud: gcp
    owner: customer
    regions: [us-central1]
    credentials:
      project: chaos-inference
      service_account: gpucap@chaos-inference.iam.gserviceaccount.com
  - name: oci-1
    cloud: oci
    owner: customer
    regions: [us-ashburn-1]
    credentials:
      profile: CHAOS
      tenancy: ocid1.tenancy.oc1..aaaachaos
      compartment_id: ocid1.compartment.oc1..aaaachaos
models:
  - name: single
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    min_replicas: 0
    max_replicas: 8
    latency_slo_ms: 500
    clouds: [aws, gcp, oci]
    priority: 100
  - name: gang
    shapes:
      - shape: 2x8xH100
        max_concurrency: 64
    min_replicas: 0
    max_replicas: 2
    latency_slo_ms: 2000
    clouds: [aws, gcp, oci]
    priority: 50
"""
# How long a create's answer takes in a window step (a latency fault): the kill lands in it.
WINDOW_S = 3.0
# Node states a converged run may leave (ended ones, and ready).
SETTLED = ("ready", "terminated", "failed")
# How a step kills (``_disturb``), drawn with the weights ``run`` is given.
MODES = ("random", "window", "pause")
# Faults a step may inject, with what each does to the next creates of an account.
FAULTS = (
    "capacity",
    "quota",
    "throttle",
    "transient",
    "crash_after_create",
    "latency",
    "gang_partial",
    "stockout_region",
    "zero_quota",
    "outage",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def fresh_database(admin_url: str, name: str) -> Iterator[str]:
    """A database of the run's own on the server of ``admin_url``, dropped after."""
    admin = make_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# ------------------------------------------------------------------------- processes
class Daemon:
    """One ``gpucap daemon`` process on the run's database and state file."""

    def __init__(
        self, work: Path, name: str, db: str, world: World | Emulators, ttl_s: float
    ) -> None:
        self.name = name
        self.grpc_port, self.metrics_port = free_port(), free_port()
        config: dict[str, Any] = {
            "database_url": db,
            **world.daemon_config(),
            "policies": [str(work / "policy.yaml")],
            "grpc": {"addr": f"127.0.0.1:{self.grpc_port}"},
            "metrics_addr": f"127.0.0.1:{self.metrics_port}",
            "intervals": {"collect_s": 0.5, "decide_s": 0.5, "place_s": 0.5, "reconcile_s": 0.5},
            "leadership": {"ttl_s": ttl_s},
        }
        path = work / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        self.log = work / f"{name}.log"
        self.proc = subprocess.Popen(
            [*GPUCAP, "daemon", "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
            env={
                **os.environ,
                **world.daemon_env(),
                "GPUCAP_STATE_DIR": str(work / f"state-{name}"),
                # One ExternalId secret for all (as from a secret manager): every daemon
                # assumes the customer's role with the same ExternalId.
                "GPUCAP_EXTERNAL_ID_SECRET": "chaos-external-id-secret",
            },
            cwd=ROOT,
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def role(self) -> str:
        """leader | standby | down (no answer)."""
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return str(json.loads(r.read())["role"])
        except urllib.error.HTTPError as exc:
            with contextlib.suppress(ValueError, KeyError):
                return str(json.loads(exc.read())["role"])
            return "down"
        except (OSError, ValueError, KeyError):
            return "down"

    def wait_up(self, within: float = 90.0) -> str:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            if (role := self.role()) in ("leader", "standby"):
                return role
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not up within {within} s")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def fenced(self) -> int:
        """Writes of this daemon refused by the fence (its ticks that ended ``Fenced``)."""
        return self.log.read_text(errors="replace").count('"job.fenced"')

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class Cluster:
    """The run's daemons: ``size`` alive at once, restarted after each kill."""

    def __init__(
        self, work: Path, db: str, world: World | Emulators, size: int, ttl_s: float
    ) -> None:
        self.work, self.db, self.world, self.size, self.ttl_s = work, db, world, size, ttl_s
        self.started = 0
        self.live: list[Daemon] = []

    def spawn(self) -> Daemon:
        d = Daemon(self.work, f"d{self.started}", self.db, self.world, self.ttl_s)
        self.started += 1
        self.live.append(d)
        return d

    def up(self, wait: bool = True) -> None:
        """``size`` daemons alive; ``wait``: until each answers (else the next ``settle``)."""
        while len(self.live) < self.size:
            self.spawn()
        if wait:
            self.settle()

    def settle(self) -> None:
        for d in self.live:
            d.wait_up()

    def leader(self, within: float = 60.0) -> Daemon:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            for d in self.live:
                if d.role() == "leader":
                    return d
            time.sleep(0.05)
        raise RuntimeError(f"no leader within {within} s")

    def any_addr(self) -> str:
        return next(d.addr for d in self.live if d.alive())

    def drop(self, d: Daemon) -> None:
        self.live.remove(d)

    def stop(self) -> None:
        for d in self.live:
            d.stop()
        self.live = []


# ------------------------------------------------------------------------- the cloud
class World:
    """The simulated cloud's state file, as the harness touches it (never the daemon).
    ``bench/chaos_emulators.Emulators`` is the other cloud, with the same interface."""

    fault_kinds = FAULTS
    nodes_get_ready = True  # (the simulated engines answer their probes once booted)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cloud = open_shared(path)

    def daemon_config(self) -> dict[str, Any]:
        return {"provider_mode": "sim", "sim_state": str(self.path)}

    def daemon_env(self) -> dict[str, str]:
        return {}

    def window(self, seconds: float) -> None:
        """The next creates of both accounts answer ``seconds`` after they commit."""
        for cloud in CLOUDS:
            self.cloud.inject(cloud, SIM_ACCOUNT[cloud], "latency", 2, delay_s=seconds)

    def inject(self, kind: str, cloud: Cloud, rng: random.Random) -> str:
        """Inject ``kind`` (one of ``FAULTS``) at ``cloud``'s account; returns what was done."""
        account, region, h100 = SIM_ACCOUNT[cloud], REGION_OF[cloud], H100_8[cloud]
        match kind:
            case "latency":
                self.cloud.inject(cloud, account, "latency", rng.randint(1, 3), delay_s=2.0)
            case "gang_partial":
                self.cloud.inject(cloud, account, "capacity", 1, skip=1)
            case "stockout_region":
                self.cloud.set_capacity(cloud, region, h100, 0)
            case "zero_quota":
                self.cloud.set_quota(account, region, h100, 0)
            case "outage":
                threading.Thread(target=self.outage, args=(rng.uniform(2, 5),)).start()
                return "outage"
            case _:
                self.cloud.inject(cloud, account, kind, rng.randint(1, 4))
        return f"{kind}@{account}"

    def outage(self, seconds: float) -> None:
        """Hold the state file's write lock: every cloud call waits (its busy timeout is
        30 s), as callers of an emulator that restarts wait on their connections."""
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN EXCLUSIVE")
            time.sleep(seconds)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    def heal(self) -> None:
        """The outage is over: no fault queued, stock and quota as at the start."""
        self.cloud.clear_faults()
        for cloud in CLOUDS:
            region = REGION_OF[cloud]
            self.cloud.set_capacity(cloud, region, H100_8[cloud], self.cloud.default_capacity)
            self.cloud.set_quota(SIM_ACCOUNT[cloud], region, H100_8[cloud], 1000)

    def create_calls(self) -> int:
        return self.cloud.create_calls

    def instances(self) -> int:
        return len(self.cloud.instances)  # (terminated ones stay listed 1 h)

    def close(self) -> None:
        return

    def created_ago(self, intent_ids: list[str]) -> float | None:
        """Seconds since the newest of these intents' instances was created (None: none
        has one). The state file's clock is wall time (``open_shared``)."""
        wanted = set(intent_ids)
        made = [i.created_at for i in self.cloud.instances.values() if i.intent_id in wanted]
        return time.time() - max(made) if made else None


# ------------------------------------------------------------------------- the store
class StoreView:
    """Read-only queries of the run's database (the harness observes; it writes nothing)."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = make_engine(url)

    def in_window(self) -> list[str]:
        """Nodes whose create was attempted and has not returned: pending, no instance."""
        with self.engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT id FROM nodes WHERE state = 'pending' AND attempts > 0 "
                    "AND instance_id IS NULL"
                )
            )
            return [r.id for r in rows]

    def converged(self, targets: dict[str, int], ready: bool = True) -> bool:
        """Every model's replicas equal its pin and no node is on its way anywhere.
        ``ready``: the replicas counted are ready and every live node is; else (no engine
        ever answers, the emulators) the live replicas, their nodes up at the cloud
        (``running``: they stay there, booting, until the provision timeout)."""
        settled = SETTLED if ready else (*SETTLED, "running")
        live = "('ready')" if ready else "('pending', 'provisioning', 'running', 'ready')"
        with self.engine.connect() as c:
            counted: dict[str, int] = dict(
                c.execute(
                    text(
                        "SELECT m.name, count(r.id) FROM models m LEFT JOIN replicas r "
                        f"ON r.model_id = m.id AND r.state IN {live} GROUP BY m.name"
                    )
                ).all()
            )
            moving = c.execute(
                text(f"SELECT count(*) FROM nodes WHERE state NOT IN {settled!r}")
            ).scalar_one()
        return moving == 0 and all(counted.get(m, 0) == n for m, n in targets.items())

    def fault_target(self) -> tuple[Cloud | None, bool]:
        """The cloud the daemon's next create likely goes to (the newest node's), unless its
        account is blocked, then another's; and whether another account is open too.
        (None, False): every account is blocked."""
        with self.engine.connect() as c:
            # An account is blocked when every pool of it is: stamped, or matched by an
            # unexpired unavailable offering; a zone blocked by a refused create counts
            # whole, a zone the cloud does not offer the type in does not.
            blocked = set(
                c.execute(
                    text(
                        "SELECT p.account FROM pools p GROUP BY p.account HAVING bool_and("
                        "COALESCE(p.unavailable_until > now(), false) OR EXISTS ("
                        "SELECT 1 FROM unavailable_offerings u WHERE u.until > now() "
                        "AND u.account = p.account AND (u.zone IS NULL OR u.source = 'error') "
                        "AND (u.region IS NULL OR u.region = p.region) "
                        "AND (u.instance_type IS NULL OR u.instance_type = p.instance_type) "
                        "AND (u.pool_id IS NULL OR u.pool_id = p.id)))"
                    )
                ).scalars()
            )
            newest = c.execute(
                text("SELECT cloud FROM nodes ORDER BY pending_at DESC NULLS LAST LIMIT 1")
            ).scalar_one_or_none()
        order = sorted(CLOUDS, key=lambda k: k.value != newest)  # (the newest's first)
        open_ = [k for k in order if ACCOUNT_OF[k] not in blocked]
        return (open_[0] if open_ else None), len(open_) >= 2

    def up_nodes(self, ready: bool = True) -> int:
        """Nodes ready (``ready``), else nodes whose instance the cloud runs."""
        states = "('ready')" if ready else "('provisioning', 'running', 'ready')"
        with self.engine.connect() as c:
            return int(
                c.execute(text(f"SELECT count(*) FROM nodes WHERE state IN {states}")).one()[0]
            )

    def close(self) -> None:
        self.engine.dispose()


def pin(addr: str, targets: dict[str, int]) -> None:
    with grpc.insecure_channel(addr) as ch:
        stub = pb_grpc.ControlPlaneStub(ch)
        for model, n in targets.items():
            stub.PinModel(pb.PinModelRequest(customer=CUSTOMER, name=model, replicas=n), timeout=20)


def _pin_any(cluster: Cluster, targets: dict[str, int]) -> None:
    pin(cluster.any_addr(), targets)


def audit(addr: str) -> tuple[int, dict[str, Any]]:
    """``gpucap audit --output json``: its exit status and report."""
    out = subprocess.run(
        [*GPUCAP, "audit", "--addr", addr, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    try:
        return out.returncode, dict(json.loads(out.stdout))
    except ValueError:
        return out.returncode, {"error": (out.stderr or out.stdout)[-2000:]}


def retry(fn: Callable[[], Any], within: float = 60.0) -> Any:
    """``fn`` until it answers (a daemon may just have been killed or be starting)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return fn()
        except (grpc.RpcError, StopIteration, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


# ------------------------------------------------------------------------- a run
@dataclass
class RunReport:
    seed: int
    daemons: int
    kills: int = 0
    window_kills: int = 0  # in the window between intent committed and call returned
    pauses: int = 0  # leaders SIGSTOPped past their lease and resumed
    fenced_writes: int = 0  # their writes refused by the fence
    takeovers_s: list[float] = field(default_factory=list)
    convergence_s: list[float] = field(default_factory=list)
    not_converged: int = 0
    audits: int = 0
    leaked: int = 0
    duplicated: int = 0
    lost: int = 0
    audit_errors: list[str] = field(default_factory=list)
    faults: dict[str, int] = field(default_factory=dict)
    creates: int = 0  # create calls the cloud received over the run
    instances: int = 0  # instances it created (a retry with the same token creates none)
    creates_per_min: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    ttl_s: float = 0.0
    cloud: str = "sim"  # sim | emulators

    @property
    def ok(self) -> bool:
        return (
            self.leaked == self.duplicated == self.lost == self.not_converged == 0
            and not self.audit_errors
            and (self.daemons == 1 or self.pauses == 0 or self.fenced_writes > 0)
            and all(t < 2 * self.ttl_s for t in self.takeovers_s)
        )


def run(
    *,
    seed: int,
    daemons: int,
    kills: int,
    work: Path,
    pg_url: str,
    ttl_s: float = 2.0,
    audit_every: int = 10,
    converge_s: float = 120.0,
    fault_p: float = 0.5,
    modes: tuple[float, float, float] = (0.5, 0.3, 0.2),
    cloud: str = "sim",
    log: Callable[[str], None] = print,
) -> RunReport:
    """One run; ``cloud``: ``sim`` (the simulated cloud's state file) or ``emulators``
    (moto and the GCP fake in a process of their own, ``bench/chaos_emulators.py``)."""
    rng = random.Random(seed)
    report = RunReport(seed, daemons, ttl_s=ttl_s, cloud=cloud)
    work.mkdir(parents=True, exist_ok=True)
    (work / "policy.yaml").write_text(POLICY)
    started = time.monotonic()
    with fresh_database(pg_url, f"gpucap_chaos_{os.getpid()}_{seed}_{daemons}") as db:
        world = World(work / "sim-state.db") if cloud == "sim" else Emulators(work)
        cluster = Cluster(work, db, world, daemons, ttl_s)
        store = StoreView(db)
        calls: list[tuple[float, int]] = [(time.monotonic(), 0)]
        try:
            cluster.up()
            targets = {m: 0 for m in TARGETS}
            while report.kills < kills:
                mode = rng.choices(MODES, modes)[0]
                if daemons > 1 and report.pauses == 0:
                    mode = "pause"  # every run with standbys checks the fence at least once
                if mode == "pause" and daemons == 1:
                    mode = "window"
                new = {m: rng.randint(lo, hi) for m, (lo, hi) in TARGETS.items()}
                if mode != "random" and not any(new[m] > targets[m] for m in new):
                    # A window needs a create: one more replica (at the top: a random kill).
                    top = TARGETS["single"][1]
                    new["single"] = min(top, targets["single"] + 1)
                    mode = mode if targets["single"] < top else "random"
                targets = new
                retry(functools.partial(_pin_any, cluster, targets))
                # A fault goes where the next creates go (a fault at a cloud nothing is
                # created on tests nothing); one that blocks never to the last open account:
                # a refused create blocks its pool or account for minutes (Tuning's
                # *_block_s), and another account is the way to converge meanwhile.
                faulted, other_open = store.fault_target()
                if faulted is not None and rng.random() < fault_p:
                    kind = rng.choice(world.fault_kinds)
                    if kind in BLOCKING and not other_open:
                        kind = rng.choice([k for k in world.fault_kinds if k not in BLOCKING])
                    report.faults[kind] = report.faults.get(kind, 0) + 1
                    log(f"  fault {world.inject(kind, faulted, rng)}")
                _disturb(mode, rng, cluster, world, store, report, log)
                calls.append((time.monotonic(), world.create_calls()))
                if report.kills % audit_every == 0 or report.kills >= kills:
                    _checkpoint(cluster, world, store, targets, report, converge_s, log)
                    calls.append((time.monotonic(), world.create_calls()))
            report.instances = world.instances()
        finally:
            cluster.stop()
            store.close()
            world.close()
        report.creates_per_min = per_minute(calls)
        report.creates = calls[-1][1]
    report.wall_s = round(time.monotonic() - started, 1)
    return report


def _disturb(
    mode: str,
    rng: random.Random,
    cluster: Cluster,
    world: World | Emulators,
    store: StoreView,
    report: RunReport,
    log: Callable[[str], None],
) -> None:
    """One kill of the acting daemon: at a random moment (``random``), in the create window
    (``window``), or (``pause``, with standbys) after a pause past its lease in that window."""
    cluster.settle()  # (a standby restarted by the last step is up: it can take over)
    victim = cluster.leader()
    window, pause = mode == "window", mode == "pause"
    if window or pause:
        # The next creates answer WINDOW_S after they commit: the window to hit.
        world.window(WINDOW_S)
        hit = _await_window(store, world, within=8.0)
        window = window and hit
        pause = pause and hit
    else:
        time.sleep(rng.uniform(0.0, 2.0))
    if pause:
        victim.proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        others = [d for d in cluster.live if d is not victim]
        while not any(d.role() == "leader" for d in others):
            time.sleep(0.05)
            if time.monotonic() - t0 > 10 * cluster.ttl_s:
                break
        report.takeovers_s.append(round(time.monotonic() - t0, 2))
        victim.proc.send_signal(signal.SIGCONT)
        # Its create's answer arrives: writing it is refused (a newer token holds the lease).
        deadline = time.monotonic() + 15
        while victim.fenced() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        report.pauses += 1
        report.fenced_writes += victim.fenced()
        log(f"  paused {victim.name}: fenced writes {victim.fenced()}")
    victim.kill()
    t0 = time.monotonic()
    report.kills += 1
    report.window_kills += int(window)
    cluster.drop(victim)
    if cluster.size > 1 and not pause:
        cluster.leader(within=30)
        report.takeovers_s.append(round(time.monotonic() - t0, 2))
    log(
        f"kill {report.kills}: {victim.name}"
        + (" in the create window" if window else "")
        + (f", takeover {report.takeovers_s[-1]} s" if cluster.size > 1 else "")
    )
    cluster.up(wait=cluster.size == 1)  # (a standby comes back while the leader acts)


def _await_window(store: StoreView, world: World | Emulators, within: float) -> bool:
    """Until a node's intent is committed, its create accepted by the cloud and not yet
    answered (the latency fault holds the answer): a create of the last second, so most
    of the window is still ahead whatever this process's own delays."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        ago = world.created_ago(store.in_window())
        if ago is not None and ago < WINDOW_S - 2.0:
            return True
        time.sleep(0.05)
    return False


def _checkpoint(
    cluster: Cluster,
    world: World | Emulators,
    store: StoreView,
    targets: dict[str, int],
    report: RunReport,
    converge_s: float,
    log: Callable[[str], None],
) -> None:
    world.heal()
    t0 = time.monotonic()
    deadline = t0 + converge_s
    code, body = -1, dict[str, Any]()
    while time.monotonic() < deadline:
        if store.converged(targets, world.nodes_get_ready):
            code, body = audit(cluster.any_addr())
            settled = body.get("settling") in (0, None)
            if code == 0 and settled and _all_tracked(body, store, world.nodes_get_ready):
                break
        time.sleep(0.5)
    else:
        report.not_converged += 1
        code, body = audit(cluster.any_addr())
        log(f"  NOT converged within {converge_s} s: targets {targets}")
    took = time.monotonic() - t0
    report.convergence_s.append(round(took, 1))
    report.audits += 1
    for k in ("leaked", "duplicated", "lost"):
        setattr(report, k, getattr(report, k) + int(body.get(k, 0) or 0))
    if "error" in body or code not in (0, 4):
        report.audit_errors.append(str(body.get("error", f"exit {code}"))[:500])
    log(
        f"  audit (exit {code}): tracked {body.get('tracked', 0)}, in cloud "
        f"{body.get('in_cloud', 0)}, leaked {body.get('leaked', 0)}, duplicated "
        f"{body.get('duplicated', 0)}, lost {body.get('lost', 0)}; converged to {targets} "
        f"in {took:.1f} s"
    )


def _all_tracked(body: dict[str, Any], store: StoreView, ready: bool) -> bool:
    """Every instance the clouds list is a tracked one, and every ready (else up) node is
    listed."""
    tracked, in_cloud = body.get("tracked", 0) or 0, body.get("in_cloud", 0) or 0
    return bool(tracked == in_cloud == store.up_nodes(ready))


def per_minute(samples: list[tuple[float, int]]) -> list[int]:
    """Create calls in each whole minute of the run, from cumulative (time, count) samples
    (a minute's boundary takes the last sample before it)."""
    t0 = samples[0][0]
    minutes = int((samples[-1][0] - t0) // 60)
    marks = [max(c for t, c in samples if t <= t0 + 60 * k) for k in range(minutes + 1)]
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


# ------------------------------------------------------------------------- summary
def summary(reports: list[RunReport]) -> dict[str, Any]:
    takeovers = [t for r in reports for t in r.takeovers_s]
    converge = [t for r in reports for t in r.convergence_s]
    per_min = [n for r in reports for n in r.creates_per_min]
    creates, instances = sum(r.creates for r in reports), sum(r.instances for r in reports)
    wall = sum(r.wall_s for r in reports)
    return {
        "runs": len(reports),
        "kills": sum(r.kills for r in reports),
        "window_kills": sum(r.window_kills for r in reports),
        "pauses": sum(r.pauses for r in reports),
        "fenced_writes": sum(r.fenced_writes for r in reports),
        "leaked": sum(r.leaked for r in reports),
        "duplicated": sum(r.duplicated for r in reports),
        "lost": sum(r.lost for r in reports),
        "audits": sum(r.audits for r in reports),
        "not_converged": sum(r.not_converged for r in reports),
        "takeover_s": _stats(takeovers),
        "convergence_s": _stats(converge),
        "creates_per_min": _stats([float(n) for n in per_min]),
        "creates": creates,
        "instances": instances,
        "creates_per_instance": round(creates / max(instances, 1), 2),
        "creates_per_min_overall": round(60 * creates / max(wall, 1.0), 1),
        "wall_s": round(wall, 1),
        "ok": all(r.ok for r in reports),
    }


def _stats(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    return {"n": len(xs), "median": round(statistics.median(xs), 2), "max": round(max(xs), 2)}


def machine() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


RESULTS = ROOT / "bench" / "chaos_results.json"


def render(saved: dict[str, Any], section: bool = True) -> list[str]:
    """The page's section (``bench/simulate_bench.py`` places it); a run on the emulators
    (``--cloud emulators``) renders as a subsection, under the section's heading unless
    ``section`` is False (it follows the simulated cloud's)."""
    total, m = saved["summary"], saved["machine"]
    emulated = any(r.get("cloud") == "emulators" for r in saved["runs"])
    lines = ["", "## Chaos: SIGKILLs, a paused leader and cloud faults", ""] if section else [""]
    if emulated:
        oci = "oci" in saved.get("clouds", ())
        lines += [
            "### Against emulators: moto (server mode), the GCP fake"
            + (" and the OCI fake" if oci else ""),
            "",
            f"`.venv/bin/python bench/{saved['command']}`: the same, with the daemons in real "
            "provider mode, boto3"
            + (", google-cloud-compute and oci" if oci else " and google-cloud-compute")
            + " pointed at moto behind its fault proxy and at the GCP"
            + (" and OCI wire fakes, all" if oci else " wire fake, both")
            + " in a process of their own that outlives "
            "every daemon; faults at the emulators (stockout, quota, throttling, 5xx, a lost "
            "answer, a held answer, a listener restart on the same port with the same state). "
            "No engine runs on an emulated instance: a converged run has every model's live "
            "replicas at its pin, every node up at the cloud or ended, and the audit clean "
            "with every listed instance tracked. "
            f"Commit `{saved.get('commit', 'unknown')}`, {saved.get('run_at', '')}, "
            f"{m['nproc']} CPUs ({m['cpu'] or 'unknown'}), Python {m['python']}.",
            "",
        ]
    else:
        lines += [
            f"`.venv/bin/python bench/{saved['command']}`: real `gpucap daemon` processes on a "
            "fresh PostgreSQL database and one persistent simulated cloud (its SQLite state "
            "file), scaled up and down by `PinModel`, SIGKILLed at seeded random moments and "
            "in the window between the committed intent and the create's answer, with faults "
            "at the cloud; `gpucap audit --output json` after every 10 kills and at the end. "
            "A fault goes to the account the next creates go to; one that blocks a pool "
            "(capacity, quota, a gang's second create, a region without stock, zero quota) "
            "only while another account is open, and the daemon keeps a refused account "
            "blocked for minutes (a quota refusal 15), so a run's later faults are mostly "
            "of the other kinds. "
            f"Commit `{saved.get('commit', 'unknown')}`, {saved.get('run_at', '')}, "
            f"{m['nproc']} CPUs ({m['cpu'] or 'unknown'}), Python {m['python']}.",
            "",
        ]
    lines += [
        "| daemons | seed | kills | in the window | leaders paused | fenced writes "
        "| takeover median / max (s) | converged median / max (s) | leaked | duplicated "
        "| lost | creates per instance | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in saved["runs"]:
        take, conv = _span(r["takeovers_s"]), _span(r["convergence_s"])
        lines.append(
            f"| {r['daemons']} | {r['seed']} | {r['kills']} | {r['window_kills']} "
            f"| {r['pauses']} | {r['fenced_writes']} "
            f"| {take} "
            f"| {conv} "
            f"| {r['leaked']} | {r['duplicated']} | {r['lost']} "
            f"| {round(r['creates'] / max(r['instances'], 1), 2)} | {r['wall_s']:.0f} |"
        )
    faults: dict[str, int] = {}
    for r in saved["runs"]:
        for k, v in r["faults"].items():
            faults[k] = faults.get(k, 0) + v
    take, rate = total["takeover_s"], total["creates_per_min"]
    ttl = max(r["ttl_s"] for r in saved["runs"])
    lines += [
        "",
        f"In all: {total['kills']} SIGKILLs ({total['window_kills']} in the window), "
        f"{total['audits']} audits, {total['leaked']} leaked, {total['duplicated']} "
        f"duplicated, {total['lost']} lost, {total['not_converged']} runs of convergence "
        "past the bound"
        + (
            f"; leader takeover median {take['median']} s, max {take['max']} s against "
            f"2 x TTL = {2 * ttl:g} s"
            if take
            else ""
        )
        + f"; {total['pauses']} leaders paused past their lease, "
        f"{total['fenced_writes']} of their late writes refused by the fence"
        + (
            f"; create calls per minute median {rate['median']:g}, max {rate['max']:g} "
            f"({total['creates_per_instance']} per instance created)"
            if rate
            else ""
        )
        + ". Faults injected: "
        + ", ".join(f"{k} {v}" for k, v in sorted(faults.items()))
        + ".",
    ]
    return lines


def _span(xs: list[float]) -> str:
    s = _stats(xs)
    return f"{s['median']} / {s['max']}" if s else "-"


def _commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    return out.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--daemons", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--kills", type=int, default=20, help="SIGKILLs per run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ttl", type=float, default=2.0, help="lease TTL, seconds")
    ap.add_argument("--audit-every", type=int, default=10)
    ap.add_argument("--converge-s", type=float, default=120.0)
    ap.add_argument("--pg-url", default=PG_URL)
    ap.add_argument(
        "--cloud",
        choices=("sim", "emulators"),
        default="sim",
        help="the simulated cloud's state file, or moto and the GCP fake as a process",
    )
    ap.add_argument("--out", type=Path, help="write the reports and summary here (JSON)")
    ap.add_argument(
        "--page", action="store_true", help="re-render docs/benchmarks.md from --out's file"
    )
    args = ap.parse_args(argv)
    reports = []
    for i, n in enumerate(args.daemons):
        seed = args.seed + i
        print(f"run: {n} daemon(s), {args.kills} kills, seed {seed}", flush=True)
        with tempfile.TemporaryDirectory(prefix="gpucap-chaos-") as tmp:
            r = run(
                seed=seed,
                daemons=n,
                kills=args.kills,
                work=Path(tmp),
                pg_url=args.pg_url,
                ttl_s=args.ttl,
                audit_every=args.audit_every,
                converge_s=args.converge_s,
                cloud=args.cloud,
                log=lambda s: print(s, flush=True),
            )
        print(json.dumps(asdict(r)), flush=True)
        reports.append(r)
    total = summary(reports)
    result = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "machine": machine(),
        "clouds": [c.value for c in CLOUDS],
        "commit": _commit(),
        "run_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "summary": total,
        "runs": [asdict(r) for r in reports],
    }
    print(json.dumps(total, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        if args.page and args.out.resolve() == RESULTS:
            import simulate_bench

            simulate_bench.rewrite_page()
    return 0 if total["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
