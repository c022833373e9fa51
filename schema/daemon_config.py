"""The daemon's own configuration file (``gpucap daemon --config FILE``)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from runtimes import queries
from schema.types import Cloud


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# A caller's role (controlplane/authz.py): admin, or customer:<a policy's customer name>.
ROLE_PATTERN = r"^(admin|customer:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)$"
RoleText = Annotated[str, Field(pattern=ROLE_PATTERN)]


class GrpcConfig(_Strict):
    """The API's listener and who may call it (docs/api.md). Authentication is on with
    ``auth``, a ``token_file`` or a ``tls_client_ca``; off, every caller is admin and only
    loopback is allowed."""

    # Loopback by default: the server refuses other addresses without TLS and authentication.
    addr: str = "127.0.0.1:50051"
    tls_cert: str | None = None  # PEM file paths
    tls_key: str | None = None
    # A file holding the one shared bearer token, an admin credential (never the token inline).
    token_file: str | None = None
    # Every call authenticates: API tokens (`gpucap token create`), the shared token or a
    # client certificate, each mapped to a role (admin or customer:<name>).
    auth: bool = False
    # Client certificates (mTLS): the CA bundle that signs them; a certificate's role comes
    # from tls_client_roles (a SAN URI or the subject's CN -> role), else, with
    # tls_client_spiffe_domain, from its SPIFFE id spiffe://<domain>/admin or
    # spiffe://<domain>/customer/<name>. A certificate that maps to no role is refused.
    tls_client_ca: str | None = None
    tls_client_roles: dict[Annotated[str, Field(min_length=1)], RoleText] = {}
    tls_client_spiffe_domain: str | None = Field(
        default=None, pattern=r"^[a-z0-9]([a-z0-9.-]{0,253}[a-z0-9])?$"
    )

    @model_validator(mode="after")
    def _client_ca_needs_tls(self) -> GrpcConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key: set both (the server's certificate and key)")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca: client certificates need tls_cert and tls_key")
        return self


class Intervals(_Strict):
    """How often each job runs. Checked in the full-loop replay (docs/full-loop.md, "The
    daemon's default cadence"): next to an 8xH100 cold start (minutes) 5-30 s changes neither
    SLO attainment nor GPU-hours; with ~90 s cold starts and a fast scrape, 5 s gains ~11
    points of attainment on a bursty trace."""

    collect_s: Annotated[float, Field(gt=0)] = 15.0
    decide_s: Annotated[float, Field(gt=0)] = 15.0
    place_s: Annotated[float, Field(gt=0)] = 15.0
    reconcile_s: Annotated[float, Field(gt=0)] = 10.0
    offerings_s: Annotated[float, Field(gt=0)] = 300.0  # list_offerings per account


# Default PromQL: the union over every engine's metric names (runtimes/queries.py).
ARRIVAL_RATE = queries.arrival_rate()
COMPLETION_RATE = queries.completion_rate()
IN_FLIGHT = queries.in_flight()
QUEUE_DEPTH = queries.queue_depth()
TOKENS_PER_S = queries.tokens_per_s()
FRESHNESS = queries.freshness()


PromQL = Annotated[str, Field(min_length=1)]


class MetricsQueries(_Strict):
    arrival_rate: PromQL = ARRIVAL_RATE  # requests/s
    in_flight: PromQL = IN_FLIGHT  # requests being served
    queue_depth: PromQL = QUEUE_DEPTH  # requests waiting
    tokens_per_s: PromQL | None = TOKENS_PER_S  # null: not collected
    completion_rate: PromQL | None = COMPLETION_RATE  # requests/s done; null: not collected
    freshness: PromQL | None = FRESHNESS  # unix seconds of the newest sample; null: no check


class BasicAuth(_Strict):
    username: str = Field(min_length=1)
    password_file: str = Field(min_length=1)  # a file holding the password


class MetricsConfig(_Strict):
    """Where traffic comes from. ``none``: no source; every model reads as NoData and the
    autoscaler holds its current scale (never reads silence as zero load)."""

    source: Literal["none", "prometheus"] = "none"
    url: str = Field(default="http://127.0.0.1:9090", pattern="^https?://")
    # Bounds one whole collection (all queries together), not each query.
    timeout_s: Annotated[float, Field(gt=0, le=60)] = 5.0
    # A model whose newest sample is older than this reads as NoData (4 x the default
    # 15 s collect interval; the loop's metrics buffer uses 60 s too).
    max_age_s: Annotated[float, Field(gt=0)] = 60.0
    queries: MetricsQueries = MetricsQueries()
    # Reaching a Prometheus that is not on loopback. Secrets are referenced by file (read
    # at every collection, so a rotated token is picked up), never written here.
    tls_ca: str | None = None  # PEM CA bundle that signs an https server (default: system)
    tls_cert: str | None = None  # PEM client certificate and key, for a server asking mTLS
    tls_key: str | None = None
    token_file: str | None = None  # sent as "Authorization: Bearer <token>"
    basic_auth: BasicAuth | None = None

    @field_validator("url")
    @classmethod
    def _no_credentials_in_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise PydanticCustomError(
                "secret_in_value",  # (never echoed: the URL holds a password)
                "credentials in the URL would be stored and logged; "
                "use basic_auth.password_file (or token_file) instead",
            )
        return url

    @model_validator(mode="after")
    def _credentials_travel_safely(self) -> MetricsConfig:
        parts = urlsplit(self.url)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key: set both (a client certificate and its key)")
        if self.token_file is not None and self.basic_auth is not None:
            raise ValueError("token_file and basic_auth: choose one way to authenticate")
        loopback = parts.hostname in ("127.0.0.1", "::1", "localhost")
        if (self.token_file or self.basic_auth) and parts.scheme != "https" and not loopback:
            raise ValueError(
                f"url: credentials for {parts.hostname} would travel in clear text; "
                "use an https url"
            )
        return self


class LifecycleConfig(_Strict):
    """How long the loop remembers a refusal and waits on a node. A refused create blocks
    its offering for the block of its kind (Karpenter's unavailable-offerings cache keeps a
    stockout for minutes); a create retried after a throttle or 5xx backs off from
    ``backoff_base_s`` doubling to ``backoff_max_s``; a node not running after
    ``provision_timeout_s`` is replaced (an 8xH100 create can queue for many minutes)."""

    capacity_block_s: Annotated[float, Field(ge=0, le=86400)] = 180.0
    quota_block_s: Annotated[float, Field(ge=0, le=86400)] = 900.0
    auth_block_s: Annotated[float, Field(ge=0, le=86400)] = 900.0
    invalid_block_s: Annotated[float, Field(ge=0, le=86400)] = 3600.0
    backoff_base_s: Annotated[float, Field(gt=0, le=3600)] = 2.0
    backoff_max_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    provision_timeout_s: Annotated[float, Field(ge=60, le=86400)] = 3600.0

    @model_validator(mode="after")
    def _backoff_grows(self) -> LifecycleConfig:
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError("backoff_max_s: below backoff_base_s")
        return self


class LeadershipConfig(_Strict):
    """Several daemons on one PostgreSQL database: the one holding the lease acts, the
    others serve reads and take over within 2 x ``ttl_s`` of its last renewal (renewed
    every ``ttl_s``/3). ``ready_intervals``: ``/readyz`` fails when a job has not ticked
    within that many of its intervals."""

    ttl_s: Annotated[float, Field(gt=0, le=600)] = 15.0
    shards: Annotated[int, Field(ge=1, le=256)] = 1
    ready_intervals: Annotated[int, Field(ge=1, le=100)] = 3


class TracingConfig(_Strict):
    """OpenTelemetry traces (the ``gpucap[otel]`` extra): spans for gRPC calls, store
    transactions and provider calls, exported over OTLP/HTTP. Absent: no tracing, and
    nothing of OpenTelemetry is imported."""

    otlp_endpoint: str = Field(pattern="^https?://")  # e.g. http://collector:4318/v1/traces
    service_name: str = Field(default="gpucap", min_length=1, max_length=128)


class DaemonConfig(_Strict):
    # default: SQLite in the state directory (the demo: a fresh demo.db each run, kept when
    # sim_state is set)
    database_url: str | None = None
    # The simulated cloud's state file (SQLite), shared by every daemon and restart on it
    # (the demo, provider_mode sim). None: the simulated cloud lives in memory.
    sim_state: str | None = None
    policies: list[str] = []  # policy files applied at start and on SIGHUP
    grpc: GrpcConfig = GrpcConfig()
    metrics_addr: str = "127.0.0.1:9464"  # Prometheus /metrics; "" disables it
    # Where nodes report their boot phases: the daemon's POST /v1/node-phases as the nodes
    # reach it (its HTTP port is metrics_addr). None: no reports; the daemon polls health.
    node_report_url: str | None = Field(default=None, pattern="^https?://")
    intervals: Intervals = Intervals()
    lifecycle: LifecycleConfig = LifecycleConfig()
    # Point a cloud's SDK at an emulator (moto, the GCP/OCI fakes) instead of the real API.
    endpoints: dict[Cloud, str] = {}
    # "cloud": real providers; "sim": the simulated cloud (staging without credentials).
    provider_mode: str = Field(default="cloud", pattern="^(cloud|sim)$")
    log_level: str = Field(default="info", pattern="^(debug|info|warning|error)$")
    metrics: MetricsConfig = MetricsConfig()
    leadership: LeadershipConfig = LeadershipConfig()
    tracing: TracingConfig | None = None  # None: no traces
