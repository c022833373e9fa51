"""What the jobs share: the store, the way to reach each account's provider, the metrics
source, the clock (read only here, at the edge), and tuning."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from pydantic import ValidationError

from autoscaler.types import Autoscaler
from coldstart import ColdStartModel
from coldstart.images import ImageTimings
from controlplane.lifecycle.health import Probe
from controlplane.metrics_sources import MetricsBuffer, MetricsSource
from controlplane.node_tokens import NodeTokens
from controlplane.probes import ProbeTarget
from controlplane.store.db import Store
from controlplane.store.models import Account as AccountRow
from controlplane.telemetry import Metrics
from providers.base import Provider
from schema.policy import Model as ModelSpec

log = structlog.get_logger("gpucap.loop")


class ProviderResolver(Protocol):
    """Hands out the provider for one of a customer's accounts (cached by the resolver)."""

    def provider(self, customer: str, account: AccountRow) -> Provider: ...


class HealthProbe(Protocol):
    """Probes the engines on these nodes: its answer for each one probed this pass (a
    prober with a budget may leave some out; those learn nothing this pass)."""

    def probe(self, targets: Sequence[ProbeTarget]) -> Mapping[str, Probe]: ...


@dataclass(frozen=True)
class Tuning:
    """Intervals and TTLs. Production defaults; the demo compresses them. The job intervals
    are the daemon config's (``schema.daemon_config.Intervals``, measured there)."""

    collect_s: float = 15.0
    decide_s: float = 15.0
    place_s: float = 15.0
    reconcile_s: float = 10.0
    gc_every_s: float = 120.0
    # How often each account's offerings are read (list_offerings): the zones a pool has and
    # what the cloud says is unavailable. Minutes, like Karpenter's instance-type refresh.
    offerings_every_s: float = 300.0
    # How long an offering stays blocked after an error (HOUSE-STYLE principle 7: remember a
    # shortage with a TTL; Karpenter's unavailable-offerings cache uses minutes).
    capacity_block_s: float = 180.0
    quota_block_s: float = 900.0
    auth_block_s: float = 900.0
    invalid_block_s: float = 3600.0
    max_create_attempts: int = 8
    backoff_base_s: float = 2.0
    backoff_max_s: float = 120.0
    # Autoscaler windows (autoscalers.md §1.8: Knative stable 60 s, panic 6 s).
    stable_window_s: float = 60.0
    burst_window_s: float = 6.0
    scale_down_delay_s: float = 120.0
    cold_start_scale: float = 1.0  # 1.0: coldstart.md timings; the demo shrinks them
    provision_timeout_s: float = 3600.0  # a node not running after this is replaced
    # A retiring replica drains anyway when no replacement is ready after this long
    # (``lifecycle.surge``): longer than a 70B model's cold start (coldstart.md, minutes).
    surge_timeout_s: float = 1800.0
    # Weight staging (``controlplane/loop/staging.py``). The bandwidth limit: per site (an
    # account's bucket in a region) and tick, at most this many copies advance, sharing
    # this many bytes of server-side copy (S3 parts, GCS rewrite chunks).
    staging_s: float = 30.0
    staging_max_concurrent: int = 2
    staging_bytes_per_tick: int = 20 * 10**9
    staging_verify_every_s: float = 600.0  # a ready copy is checked against its origin
    staging_retry_s: float = 300.0  # a failed copy is tried again after this
    staging_max_attempts: int = 3  # verifications of one copy before it is failed
    # Baked machine images (``controlplane/loop/images.py``): how often the job runs, and
    # its build timeout, retry wait, grace and freshness (``coldstart.images``).
    images_s: float = 60.0
    images: ImageTimings = ImageTimings()
    # The decider's state changes every tick (gpucap's forecast folds in each sample); the
    # decide job keeps the newest in memory and writes it when the decision changes, else
    # at most this often (4 decide ticks): a restart resumes from a state at most this old
    # (the decider is built to survive a lost one: it starts cautious). Each recorded
    # decision stores the state it was made from, so replays are exact whatever this is.
    decider_state_persist_s: float = 60.0


class SpecCache:
    """Parsed model specs by model id, validated again only when the stored spec changes
    (validating one costs more than the rest of a job's work on it). Keyed by the row's
    version: every ORM write of a model row bumps it (a spec change, a pin, a pause; the
    decide job's writes do not, ``loop/decide.py``), so an unchanged version is an
    unchanged spec without comparing it; a new version compares the spec itself (a pin
    leaves it as it was)."""

    def __init__(self) -> None:
        self._specs: dict[int, tuple[int | None, dict[str, Any], ModelSpec]] = {}
        self.parsed = 0  # validations done (what the cache saves is measured by it)

    def known(self, model_id: int, version: int) -> ModelSpec | None:
        """The parsed spec of the model at that row version, if this cache holds it (the
        caller need not read the stored spec at all)."""
        cached = self._specs.get(model_id)
        return cached[2] if cached is not None and cached[0] == version else None

    def spec(self, model_id: int, raw: dict[str, Any], version: int | None = None) -> ModelSpec:
        cached = self._specs.get(model_id)
        if cached is not None and version is not None and cached[0] == version:
            return cached[2]
        if cached is not None and cached[1] == raw:
            self._specs[model_id] = (version, cached[1], cached[2])
            return cached[2]
        try:
            spec = ModelSpec.model_validate(raw)
        except ValidationError as err:
            spec = _within_bounds(model_id, raw, err)
        self.parsed += 1
        self._specs[model_id] = (version, dict(raw), spec)
        return spec


def _within_bounds(model_id: int, raw: dict[str, Any], err: ValidationError) -> ModelSpec:
    """A stored spec that today's bounds refuse (written before they existed, e.g. a
    replica bound of 2^32-1) is read with each out-of-bounds number clamped and each
    over-long list or string cut to its bound, so one model's row never fails every
    job's tick; anything else it still fails raises as before. Logged, not stored: the
    owner's next write (UpdateModel, a policy apply) must pass the bounds itself."""
    fixed: Any = copy.deepcopy(raw)
    for _ in range(8):  # (a fix can uncover another error under it)
        changed = False
        for e in err.errors():
            limit = (e.get("ctx") or {}).get(_BOUND_OF.get(e["type"], ""))
            parent, key = _at(fixed, e["loc"])
            if limit is None or parent is None:
                continue
            value = parent[key]
            parent[key] = value[: int(limit)] if _BOUND_OF[e["type"]] == "max_length" else limit
            changed = True
        if not changed:
            raise err
        try:
            spec = ModelSpec.model_validate(fixed)
        except ValidationError as again:
            err = again
            continue
        log.warning("model.spec_clamped", model_id=model_id, problems=len(err.errors()))
        return spec
    raise err


# pydantic's error type -> the ctx key holding the bound to put the value back within.
_BOUND_OF = {
    "less_than_equal": "le",
    "greater_than_equal": "ge",
    "too_long": "max_length",
    "string_too_long": "max_length",
}


def _at(doc: Any, loc: tuple[int | str, ...]) -> tuple[Any, int | str]:
    """The container and key of ``loc`` in ``doc`` (None: not there as written)."""
    for part in loc[:-1]:
        try:
            doc = doc[part]
        except (KeyError, IndexError, TypeError):
            return None, ""
    last = loc[-1] if loc else ""
    try:
        doc[last]
    except (KeyError, IndexError, TypeError):
        return None, ""
    return doc, last


@dataclass(frozen=True)
class BootConfig:
    """What a create puts into a node's user data besides its model's launch: where the
    node reports its phases (None: nowhere; the daemon polls health) and its token key."""

    tokens: NodeTokens
    report_url: str | None = None


@dataclass
class LoopContext:
    store: Store
    providers: ProviderResolver
    metrics_source: MetricsSource
    health: HealthProbe
    autoscaler: Autoscaler
    telemetry: Metrics
    tuning: Tuning = field(default_factory=Tuning)
    coldstart: ColdStartModel = field(default_factory=ColdStartModel)
    buffer: MetricsBuffer | None = None  # default: sized from the tuning's stable window
    clock: Callable[[], float] = time.time
    boot: BootConfig | None = None  # None: creates carry no user data (the simulated cloud)
    specs: SpecCache = field(default_factory=SpecCache)

    def __post_init__(self) -> None:
        if self.buffer is None:
            # The decider keeps its own long history (its state); the window only needs to
            # cover its stable window, with room for a late tick. Small windows keep every
            # recorded decision's inputs small enough to store whole.
            self.buffer = MetricsBuffer(horizon_s=max(30.0, 2 * self.tuning.stable_window_s))

    @property
    def window(self) -> MetricsBuffer:
        assert self.buffer is not None
        return self.buffer

    def now(self) -> float:
        return self.clock()

    def now_dt(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)


def epoch(dt: datetime | None) -> float | None:
    """Seconds since the epoch; SQLite hands back naive datetimes, which are UTC here."""
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()
