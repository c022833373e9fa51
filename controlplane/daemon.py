"""The gpucap daemon: wires the store, the control loop, the gRPC server and /metrics, runs
the loop's jobs on APScheduler and, beside them, what its wiring adds (the demo's
companions: its local nodes, its Prometheus, its load generator).

Each job runs on its own interval with ``max_instances=1`` and ``coalesce=True``: a slow
tick never piles up behind itself, and missed ticks collapse into one (the loop is level
triggered, so nothing is lost). SIGTERM/SIGINT let the running ticks finish, then close
everything; SIGHUP re-applies the configured policy files (a bad file is reported and the
last good policy stays active).

Several daemons may share one PostgreSQL database: the jobs act only while this daemon holds
the leases (``controlplane.leadership``), their writes are fenced by the lease token
(``Store.fenced``), and a standby's jobs fire without acting while its API serves reads.
On SQLite one daemon per database file: a second refuses to start."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.orm.exc import StaleDataError

from autoscaler import GpucapAutoscaler
from controlplane import http_endpoint
from controlplane.api import ControlPlaneService
from controlplane.api.policies import VIA_FILE
from controlplane.health import Readiness, readiness
from controlplane.jobticks import JobTicks
from controlplane.leadership import Leadership, LeaseView, hold_sqlite, release_sqlite
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.context import BootConfig, HealthProbe, ProviderResolver
from controlplane.loop.fleet_gauges import FleetGauges
from controlplane.metrics_sources import MetricsSource
from controlplane.node_tokens import NODE_TOKEN_KEY_FILE, NodeTokens
from controlplane.store.db import Store
from controlplane.store.leases import Fenced
from controlplane.store.migrate import upgrade
from controlplane.telemetry import Metrics
from providers.credentials import ExternalIdGenerator, load_or_create_key
from schema.daemon_config import DaemonConfig
from schema.policy_file import PolicyError, PolicyRefused
from schema.policy_includes import read_policy_text

if TYPE_CHECKING:
    from controlplane.tracing import Tracing

log = structlog.get_logger("gpucap.daemon")
SIGNAL_POLL_S = 0.2  # how soon run_forever acts on a signal


class Companion(Protocol):
    """What runs beside the loop for as long as the daemon does (the demo's local nodes, its
    Prometheus, its load generator): started once the daemon's ports are bound, before the
    first tick; stopped after the last one, in the reverse order."""

    def start(self, daemon: Daemon) -> None: ...

    def stop(self) -> None: ...


@dataclass
class Wiring:
    """What differs between a real deployment and the demo."""

    database_url: str
    providers: ProviderResolver
    health: HealthProbe
    metrics_source: MetricsSource
    tuning: Tuning
    policy_texts: list[tuple[str, str]] = field(default_factory=list)  # (source, yaml)
    policy_files: list[Path] = field(default_factory=list)
    # The daemon's /metrics registry, shared with parts the wiring builds (the metrics
    # source counts its failures there).
    telemetry: Metrics = field(default_factory=Metrics)
    # Derives each customer's AWS ExternalId; the service stores a copy for display.
    external_ids: ExternalIdGenerator | None = None
    # What creates put into user data (None: nothing; the simulated clouds boot no one).
    boot: BootConfig | None = None
    # The nodes run on this host and report their phases to this daemon's own HTTP port
    # (the demo's local nodes), whatever ``boot.report_url`` says.
    boot_reports_here: bool = False
    companions: list[Companion] = field(default_factory=list)


class Daemon:
    def __init__(
        self,
        config: DaemonConfig,
        wiring: Wiring,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.wiring = wiring
        self.telemetry = wiring.telemetry
        self._stop = threading.Event()
        self._signals: deque[int] = deque()  # received, not yet acted on (run_forever)
        self.clock = clock
        self.store: Store | None = None
        self.service: ControlPlaneService | None = None
        # Every job tick, for `gpucap status`; the daemon's own state, read by the API.
        self.job_ticks = JobTicks()
        self.loop: ControlLoop | None = None
        self._scheduler: BackgroundScheduler | None = None
        self._grpc: Any = None
        self._http: Any = None
        self.grpc_port: int | None = None
        self.metrics_port: int | None = None
        self._companions: list[Companion] = []  # the ones started, to stop
        self.leadership: Leadership | None = None
        self._sqlite_lock: Path | None = None
        self._intervals: dict[str, float] = {}
        self._started_mono = time.monotonic()
        self._fleet_gauges = FleetGauges()
        self.tracing: Tracing | None = None  # config ``tracing:`` (controlplane/tracing.py)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        w = self.wiring
        providers = w.providers
        if self.config.tracing is not None:  # (else nothing of OpenTelemetry is imported)
            try:
                from controlplane.tracing import Tracing
            except ImportError as exc:
                raise RuntimeError(
                    f"tracing is configured but OpenTelemetry is missing ({exc}): "
                    "pip install 'gpucap[otel]'"
                ) from exc
            self.tracing = Tracing.from_config(self.config.tracing)
            self.tracing.start()
            providers = self.tracing.resolver(providers)
        # Before anything touches the file: a second daemon on it stops here.
        self._sqlite_lock = hold_sqlite(w.database_url)
        upgrade(w.database_url)
        self.store = Store.from_url(w.database_url)
        lc = self.config.leadership
        self.leadership = Leadership.from_url(
            w.database_url, shards=lc.shards, ttl_s=lc.ttl_s, on_round=self._on_lease_round
        )
        # One decider instance for the loop and for `gpucap decisions replay`, so a replay
        # runs exactly the decider that made the decision.
        autoscaler = GpucapAutoscaler()
        self.service = ControlPlaneService(
            self.store,
            autoscaler=autoscaler,
            external_ids=w.external_ids,
            job_ticks=self.job_ticks,
            # `gpucap explain` shows the loop's own cold-start figures.
            cold_start_scale=w.tuning.cold_start_scale,
            # `gpucap audit` lists the clouds through the loop's own resolver.
            providers=providers,
            # `gpucap status` says whether this daemon leads or follows.
            lease=self._lease_view,
        )
        self.apply_policies()
        self._start_metrics()
        self._start_grpc()
        boot = w.boot
        if boot is not None and w.boot_reports_here and self.metrics_port is not None:
            here = f"http://127.0.0.1:{self.metrics_port}{http_endpoint.PHASES_PATH}"
            boot = replace(boot, report_url=here)
        ctx = LoopContext(
            # The acting path writes through the fence: a deposed leader's late writes roll
            # back (store/db.py), whichever job makes them.
            store=self.store.fenced(self.leadership),
            providers=providers,
            metrics_source=w.metrics_source,
            health=w.health,
            autoscaler=autoscaler,
            telemetry=self.telemetry,
            tuning=w.tuning,
            clock=self.clock,
            boot=boot,
        )
        self.loop = ControlLoop(ctx)
        for companion in w.companions:
            companion.start(self)
            self._companions.append(companion)
        # One round before the first tick: a lone daemon acts from its first tick on.
        self.leadership.step()
        self.leadership.when_elected(self._run_jobs_now)
        self._started_mono = time.monotonic()
        self._start_scheduler()
        self.leadership.start()
        view = self.leadership.view()
        log.info(
            "daemon.started",
            role=view.role,
            holder=view.holder,
            tokens=view.held,
            grpc=f"{self.config.grpc.addr.rsplit(':', 1)[0]}:{self.grpc_port}",
            metrics=self.metrics_port,
            database=_redact(w.database_url),
        )

    def run_forever(self) -> None:
        """Block until SIGTERM/SIGINT (installed here: only the main thread may).

        The handlers only append the signal to a deque; this loop logs and acts on it. A
        handler runs on the main thread between two bytecodes of whatever it interrupted,
        possibly a log write blocked on a full stderr pipe while holding the log's lock:
        logging, or setting an Event (a lock too), from the handler would deadlock there."""
        for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                signal.signal(sig, self._on_signal)
        while not self._stop.is_set():
            self._stop.wait(SIGNAL_POLL_S)
            self._take_signals()
        self.stop()
        # Signals during the stop change nothing (it is under way); say they came.
        late = [signal.Signals(s).name for s in self._signals]
        if late:
            log.info("daemon.signals_during_stop", signals=late)

    def request_stop(self) -> None:
        self._stop.set()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals.append(signum)  # (deque.append: atomic, takes no lock)

    def _take_signals(self) -> None:
        while self._signals and not self._stop.is_set():
            signum = self._signals.popleft()
            if signum == getattr(signal, "SIGHUP", None):
                self.apply_policies()
            else:
                log.info("daemon.stopping", signal=signal.Signals(signum).name)
                self._stop.set()

    def stop(self) -> None:
        if self._scheduler is not None:
            # wait=True: the ticks that are running finish; no new ones start.
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
        if self.leadership is not None:
            # After the last tick committed: a standby may take over at once.
            self.leadership.stop(release=True)
        while self._companions:
            companion = self._companions.pop()
            try:
                companion.stop()
            except Exception:  # the others must still stop (no process left behind)
                log.exception("companion.stop_failed", companion=type(companion).__name__)
        if self._grpc is not None:
            self._grpc.stop(5.0)
            self._grpc = None
        if self._http is not None:
            self._http.shutdown()
            self._http = None
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.leadership is not None:
            self.leadership.close()
            self.leadership = None
        release_sqlite(self._sqlite_lock)
        self._sqlite_lock = None
        if self.tracing is not None:
            self.tracing.shutdown()  # (flushes the spans still batched)
            self.tracing = None
        log.info("daemon.stopped")

    # ------------------------------------------------------------------ policies
    def apply_policies(self) -> None:
        """Apply every configured policy. A bad one is logged with every problem and
        skipped: the customer's last good policy stays active. So is one the apply refuses
        (it names a model the API owns, or deletes or drains without ``allow_deletes``:
        ``policy.refused``, also an event), and a file unchanged since the daemon last
        applied it does not undo a version applied since through the API (docs/policy.md)."""
        assert self.service is not None
        texts = list(self.wiring.policy_texts)
        for path in self.wiring.policy_files:
            try:
                texts.append((str(path), read_policy_text(path)))  # account includes expanded
            except PolicyError as exc:
                problems = [str(p) for p in exc.problems]
                log.error("policy.unreadable", file=str(path), problems=problems)
        for source, text in texts:
            try:
                done = self.service.apply_policy_result(
                    text, source=source, applied_by="daemon", via=VIA_FILE
                )
                for warning in done.warnings:
                    log.warning("policy.unversioned", file=source, warning=warning)
                pv = done.version
                if done.kept:
                    log.warning("policy.kept", file=source, customer=pv.customer, detail=done.kept)
                else:
                    log.info(
                        "policy.applied", file=source, customer=pv.customer, version=pv.version
                    )
            except PolicyRefused as exc:
                log.error(
                    "policy.refused",
                    file=source,
                    problems=[str(p) for p in exc.problems],
                    note="the last good policy stays active",
                )
            except PolicyError as exc:
                log.error(
                    "policy.rejected",
                    file=source,
                    problems=[str(p) for p in exc.problems],
                    note="the last good policy stays active",
                )
            except Exception as exc:  # the service's own typed errors (e.g. conflicts)
                log.error("policy.rejected", file=source, error=str(exc))

    # ------------------------------------------------------------------ parts
    def _start_scheduler(self) -> None:
        assert self.loop is not None
        t = self.wiring.tuning
        sched = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(4)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
            timezone="UTC",
        )
        jobs: list[tuple[str, Callable[[], Any], float]] = [
            ("collect_metrics", self.loop.collect_metrics, t.collect_s),
            ("decide", self.loop.decide, t.decide_s),
            ("place", self.loop.place, t.place_s),
            ("reconcile", self._reconcile, t.reconcile_s),
            ("offerings", self.loop.refresh_offerings, t.offerings_every_s),
            ("staging", self.loop.stage_weights, t.staging_s),
            ("images", self.loop.bake_images, t.images_s),
        ]
        self._intervals = {name: every for name, _, every in jobs}
        for name, every in self._intervals.items():
            self.telemetry.job_interval.labels(name).set(every)
        for name, fn, every in jobs:
            sched.add_job(
                self._tick(name, fn),
                "interval",
                seconds=every,
                id=name,
                name=name,
                next_run_time=datetime.now(UTC),
            )
        sched.start()
        self._scheduler = sched

    def _reconcile(self) -> None:
        """The reconcile job, then the fleet's gauges ($/h by customer and tier, the
        overflow caps, blocked pools: ``loop/fleet_gauges.py``)."""
        assert self.loop is not None
        self.loop.reconcile()
        self._fleet_gauges.run(self.loop.ctx)

    def _run_jobs_now(self) -> None:
        """Just elected: tick every job now instead of at its next interval (a takeover
        should not wait out the place job's 15 s)."""
        sched = self._scheduler
        if sched is None:
            return
        for job in sched.get_jobs():
            with contextlib.suppress(Exception):  # (a job gone during shutdown)
                job.modify(next_run_time=datetime.now(UTC))

    def _tick(self, name: str, fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            self.job_ticks.beat(name, time.monotonic())
            if self.leadership is None or not self.leadership.acting():
                self.telemetry.standing_by(name)
                return  # a standby: another daemon acts
            started = datetime.now(UTC)
            t0 = time.perf_counter()
            error: str | None = None
            self.telemetry.begin_tick(name)
            try:
                fn()
            except Fenced as exc:
                # This daemon lost its lease while the tick ran: its writes rolled back.
                error = f"fenced: {exc}"
                self.telemetry.tick_errors.labels(name, "Fenced").inc()
                log.warning("job.fenced", job=name, detail=str(exc))
            except StaleDataError as exc:
                # Another job changed the same rows first (optimistic locking did its job);
                # this tick's writes were rolled back and the next tick sees the new state.
                error = "conflict: rows changed by another job; retried next tick"
                self.telemetry.tick_errors.labels(name, "StaleDataError").inc()
                log.warning("job.conflict", job=name, detail=str(exc))
            except Exception as exc:  # a tick never takes the daemon down; the next one retries
                error = f"{type(exc).__name__}: {exc}"
                self.telemetry.tick_errors.labels(name, type(exc).__name__).inc()
                log.exception("job.failed", job=name)
            finally:
                took = time.perf_counter() - t0
                self.telemetry.tick_seconds.labels(name).observe(took)
                tick = self.job_ticks.record(name, started, took, error)
                done = tick.last_succeeded_at
                # (on success: the job's last-success time, its gauges' stale series gone)
                self.telemetry.end_tick(name, done.timestamp() if done else 0.0, ok=not error)

        return run

    # ------------------------------------------------------------------ health
    def readiness(self) -> Readiness:
        """``/readyz`` and gRPC health: leases held or followed, jobs ticking, store up."""
        lead = self.leadership
        if lead is None:
            return Readiness(False, "unknown", {"daemon": {"ok": False, "detail": "stopped"}})
        return readiness(
            lead.view(),
            self.job_ticks.beats(),
            self._intervals,
            self.config.leadership.ready_intervals,
            self._started_mono,
            time.monotonic(),
            self._store_error(),
        )

    def _store_error(self) -> str | None:
        lead = self.leadership
        if lead is None:
            return "stopped"
        try:
            # The lease engine: its own connection, with a connect timeout.
            with lead.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            return None
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            return f"{type(exc).__name__}: {first}"

    def _lease_view(self) -> LeaseView | None:
        return self.leadership.view() if self.leadership is not None else None

    def _on_lease_round(self, _view: Any) -> None:
        grpc_server = self._grpc
        if grpc_server is not None and self._intervals:
            grpc_server.set_serving(self.readiness().ready)

    def _start_metrics(self) -> None:
        from controlplane.grpc.server import InsecureBindError

        addr = self.config.metrics_addr
        if not addr:
            return
        host, _, port = addr.rpartition(":")
        assert self.service is not None
        # The gRPC API's TLS and token: off loopback the same rule holds for this port.
        g = self.config.grpc
        token = Path(g.token_file).read_text().strip() if g.token_file else None
        wsgi = http_endpoint.app(
            self.telemetry.registry,
            self.service.report_node_phase,
            self.service.prometheus_sd,
            ready=self.readiness,
            authorize=http_endpoint.bearer_token(token) if token else None,
        )
        try:
            server, _thread = http_endpoint.serve(
                host.strip("[]") or "127.0.0.1",
                int(port),
                wsgi,
                tls_cert=g.tls_cert,
                tls_key=g.tls_key,
                authenticated=token is not None,
            )
        except InsecureBindError as exc:
            raise InsecureBindError(f"metrics_addr (/metrics): {exc}") from exc
        except OSError as exc:
            raise OSError(
                f"cannot listen on {addr} for /metrics: {exc.strerror or exc} "
                "(another daemon on this address?)"
            ) from exc
        self._http = server
        self.metrics_port = server.server_address[1]

    def _start_grpc(self) -> None:
        from controlplane.authz import CertRoles, parse_role
        from controlplane.grpc.server import serve

        assert self.service is not None
        g = self.config.grpc
        token = Path(g.token_file).read_text().strip() if g.token_file else None
        tracing = self.tracing.interceptor() if self.tracing is not None else None
        cert_roles = CertRoles(
            {subject: parse_role(role) for subject, role in g.tls_client_roles.items()},
            g.tls_client_spiffe_domain,
        )
        self._grpc = serve(
            self.service,
            g.addr,
            tls_cert=g.tls_cert,
            tls_key=g.tls_key,
            token=token,
            auth=g.auth,
            tls_client_ca=g.tls_client_ca,
            cert_roles=cert_roles,
            tracing=tracing,
        )
        self.grpc_port = getattr(self._grpc, "port", None)


def _redact(url: str) -> str:
    """Drop a password from a database URL before logging it."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


# ---------------------------------------------------------------------- wiring builders
def tuning_of(config: DaemonConfig) -> Tuning:
    """The loop's tuning: its defaults, with the config's intervals and lifecycle."""
    i, life = config.intervals, config.lifecycle
    return Tuning(
        collect_s=i.collect_s,
        decide_s=i.decide_s,
        place_s=i.place_s,
        reconcile_s=i.reconcile_s,
        offerings_every_s=i.offerings_s,
        capacity_block_s=life.capacity_block_s,
        quota_block_s=life.quota_block_s,
        auth_block_s=life.auth_block_s,
        invalid_block_s=life.invalid_block_s,
        backoff_base_s=life.backoff_base_s,
        backoff_max_s=life.backoff_max_s,
        provision_timeout_s=life.provision_timeout_s,
    )


def cloud_wiring(config: DaemonConfig, config_dir: Path) -> Wiring:
    from controlplane.probes import HttpProber
    from controlplane.resolvers import CloudResolver, SimHealth, SimResolver
    from controlplane.settings import database_url, ensure_state_dir
    from providers.sim import SimCloud
    from providers.sim.cloud import open_shared

    tuning = tuning_of(config)
    providers: ProviderResolver
    health: HealthProbe
    ids: ExternalIdGenerator | None = None
    boot: BootConfig | None = None
    if config.provider_mode == "sim":
        # A state file: the simulated cloud is shared by every daemon and restart on it.
        world = (
            SimCloud() if config.sim_state is None else open_shared(config_dir / config.sim_state)
        )
        providers, health = SimResolver(world), SimHealth(world)
    else:
        state = ensure_state_dir()
        ids = ExternalIdGenerator.from_environment(state)
        providers, health = CloudResolver(ids, dict(config.endpoints)), HttpProber()
        tokens = NodeTokens(load_or_create_key(state / NODE_TOKEN_KEY_FILE))
        boot = BootConfig(tokens, config.node_report_url)
    from controlplane.metrics_sources import SyntheticTraffic
    from controlplane.prometheus_source import PrometheusSource

    telemetry = Metrics()
    # source "none": no traffic is observed and the autoscaler holds every model at its
    # current scale (NoData), never guessing.
    metrics_source: MetricsSource = SyntheticTraffic({})
    if config.metrics.source == "prometheus":
        metrics_source = PrometheusSource.from_config(config.metrics, telemetry, config_dir)
    return Wiring(
        database_url=database_url(config.database_url),
        providers=providers,
        health=health,
        metrics_source=metrics_source,
        tuning=tuning,
        policy_files=[(config_dir / p).resolve() for p in config.policies],
        telemetry=telemetry,
        external_ids=ids,
        boot=boot,
    )
