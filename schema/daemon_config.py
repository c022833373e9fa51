"""The daemon's own configuration file (``gpucap daemon --config FILE``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from schema.types import Cloud


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GrpcConfig(_Strict):
    # Loopback by default: the server refuses other addresses unless TLS and a token are set.
    addr: str = "127.0.0.1:50051"
    tls_cert: str | None = None  # PEM file paths
    tls_key: str | None = None
    token_file: str | None = None  # a file holding the bearer token (never the token inline)


class Intervals(_Strict):
    collect_s: Annotated[float, Field(gt=0)] = 15.0
    decide_s: Annotated[float, Field(gt=0)] = 15.0
    place_s: Annotated[float, Field(gt=0)] = 15.0
    reconcile_s: Annotated[float, Field(gt=0)] = 10.0


class DaemonConfig(_Strict):
    database_url: str | None = None  # default: SQLite in the state directory
    policies: list[str] = []  # policy files applied at start and on SIGHUP
    grpc: GrpcConfig = GrpcConfig()
    metrics_addr: str = "127.0.0.1:9464"  # Prometheus /metrics; "" disables it
    intervals: Intervals = Intervals()
    # Point a cloud's SDK at an emulator (moto, the GCP/OCI fakes) instead of the real API.
    endpoints: dict[Cloud, str] = {}
    # "cloud": real providers; "sim": the simulated cloud (staging without credentials).
    provider_mode: str = Field(default="cloud", pattern="^(cloud|sim)$")
    log_level: str = Field(default="info", pattern="^(debug|info|warning|error)$")
