"""The per-customer policy file: which accounts, clouds, regions and GPU shapes a customer's
models may use, their replica bounds and SLOs, and the overflow rules.

Two layers of checking, so every problem can name its field path:
- structure (types, unknown fields, ranges) is pydantic's job, on the models below;
- meaning (a region that a cloud does not have, an inverted bound, a shape that no cloud
  offers, a model allowed on a cloud it has no account for) is :func:`semantic_problems`.
``schema.policy_file`` joins both to YAML line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schema.catalog import INSTANCE_TYPES_BY_NAME, REGIONS, parse_gpu_shape
from schema.runtime import Runtime, runtime_problems
from schema.types import Cloud, Owner

Name = Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]

# Bounds on what one policy (or one API call) may ask for, so no input can make a job's
# work, a stored row or an error message unbounded (issue 26: a model with min_replicas
# 2^32-1 was accepted, and the place job then looped once per missing replica). gpucap's own
# choices, none a cloud's limit: each is far past anything real, at most an order of
# magnitude below where a tick or a request gets slow.
# Replicas per model: the fleet-scale target is 10,000 models on 12,500 nodes (issue 26
# item 5), so one model of 10,000 replicas would be a whole fleet.
MAX_REPLICAS = 10_000
# Shared-overflow replicas per customer (overflow.max_replicas), the same fleet-sized cap.
MAX_OVERFLOW_REPLICAS = 10_000
MAX_ACCOUNTS = 256  # per policy
MAX_MODELS = 10_000  # per policy: one customer may hold the whole fleet-scale benchmark
MAX_REGIONS = 64  # per account or model; the catalog knows fewer than 40 (schema/catalog)
MAX_SHAPES = 32  # per model; the catalog has fewer distinct GPU shapes than that
MAX_CLOUDS = 8  # per model; there are three clouds (a list of more only repeats them)
MAX_MIRRORS = 8  # weights.mirrors: one per cloud is all that is accepted
MAX_COMMITMENTS = 256  # per account
MAX_PRICES = 256  # per account: the catalog's instance types
MAX_TEXT = 2048  # URIs, ARNs, image references (S3 keys are 1,024 bytes; ARNs 2,048)
# How much of a caller's value an error message repeats: enough to recognise it, and never
# so much that a status grows past gRPC's 8 KB metadata limit (a 5 KB name came back as
# RESOURCE_EXHAUSTED instead of INVALID_ARGUMENT).
ECHO_CHARS = 64

Text = Annotated[str, Field(max_length=MAX_TEXT)]
Region = Annotated[str, Field(max_length=64)]  # the longest known is under 30 characters
Count = Annotated[int, Field(ge=0, le=MAX_REPLICAS)]


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters with an ellipsis
    (and the full length) when longer: errors repeat a caller's input, never all of it."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    size = f" ({len(value)} chars)" if isinstance(value, str | bytes) else ""
    return f"{shown[:limit]}...{size}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Field names that would carry a secret. Policies hold references only (role ARN, service
# account, OCI profile); these names get a specific message rather than "unknown field".
SECRET_FIELDS = frozenset(
    {
        "aws_access_key_id",
        "aws_secret_access_key",
        "access_key",
        "secret_key",
        "secret_access_key",
        "session_token",
        "password",
        "private_key",
        "key_content",
        "key_file",
        "pass_phrase",
        "credentials_json",
        "token",
    }
)


class Credentials(_Strict):
    """A *reference* to credentials, never the secret itself.

    - aws: ``role_arn`` of a role in the customer's account that gpucap assumes (gpucap
      generates the ExternalId per customer; it is never taken from the customer), or
      ``profile`` for gpucap's own shared accounts.
    - gcp: ``project`` and, for customer-owned projects, ``service_account`` to impersonate.
    - oci: ``tenancy`` and ``compartment_id``, plus ``profile`` (a section of the OCI config
      file) or ``principal`` (instance or resource principal).

    The nodes' own identity, what a node reads its weights with (no credential goes into
    user data): on aws ``instance_profile`` (an instance profile's ARN, attached at launch),
    on gcp ``node_service_account`` (attached at launch, scope cloud-platform); on oci a
    dynamic group matching the compartment's instances needs nothing here.
    """

    role_arn: Text | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
    profile: Text | None = None
    project: Text | None = None
    service_account: Text | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+$")
    tenancy: Text | None = None
    compartment_id: Text | None = None
    principal: str | None = Field(default=None, pattern=r"^(instance|resource)$")
    instance_profile: Text | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:instance-profile/.+$"
    )
    node_service_account: Text | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+$")


class Commitment(_Strict):
    """Capacity the customer already pays for (reserved instances, CUDs, capacity blocks)."""

    instance_type: Annotated[str, Field(max_length=64)]
    region: Region
    count: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    reservation: Text | None = None  # e.g. an AWS capacity reservation id (cr-...)


# Object-store bucket names the three clouds accept (S3's rules are the strictest: 3-63
# lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# gpucap's default prices of standard object storage, USD per GB-month (the vendors' list
# prices, first tier, as published in 2026; not in shared/reference/, so an account may set
# its own with ``staging.usd_per_gb_month``): S3 Standard $0.023 (aws.amazon.com/s3/pricing),
# Cloud Storage Standard regional $0.020 (cloud.google.com/storage/pricing), OCI Object
# Storage Standard $0.0255 (oracle.com/cloud/price-list).
STORAGE_USD_PER_GB_MONTH = {Cloud.AWS: 0.023, Cloud.GCP: 0.020, Cloud.OCI: 0.0255}
# gpucap's default prices of a stopped node's boot volume, USD per GB-month (the vendors'
# list prices, as published in 2026; not in shared/reference/): EBS gp3 $0.08
# (aws.amazon.com/ebs/pricing), Persistent Disk balanced $0.10
# (cloud.google.com/compute/disks-image-pricing), OCI Block Volume balanced $0.0425
# ($0.0255 storage + 10 VPU x $0.0017, oracle.com/cloud/price-list).
BLOCK_USD_PER_GB_MONTH = {Cloud.AWS: 0.08, Cloud.GCP: 0.10, Cloud.OCI: 0.0425}


class AccountStaging(_Strict):
    """Where this account keeps staged copies of model weights (``coldstart.staging``): one
    bucket per region (``{region}`` in the name stands for it), under ``prefix``, at most
    ``budget_gb`` per region (least recently used copies go first)."""

    bucket: Annotated[str, Field(min_length=3, max_length=63)]
    prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")] = (
        "gpucap-weights"
    )
    budget_gb: Annotated[float, Field(gt=0)] = 1000.0
    namespace: Text | None = None  # OCI's Object Storage namespace (the tenancy's)
    usd_per_gb_month: Annotated[float, Field(ge=0)] | None = None  # default: the cloud's

    def bucket_in(self, region: str) -> str:
        return self.bucket.replace("{region}", region)

    def price(self, cloud: Cloud) -> float:
        if self.usd_per_gb_month is not None:
            return self.usd_per_gb_month
        return STORAGE_USD_PER_GB_MONTH[cloud]


class Account(_Strict):
    name: Name
    cloud: Cloud
    owner: Owner = Owner.CUSTOMER
    regions: Annotated[list[Region], Field(min_length=1, max_length=MAX_REGIONS)]
    credentials: Credentials = Credentials()
    committed: Annotated[list[Commitment], Field(max_length=MAX_COMMITMENTS)] = []
    # Per-account override of catalog list prices, USD per node-hour, by instance type.
    prices: Annotated[
        dict[Annotated[str, Field(max_length=64)], Annotated[float, Field(gt=0)]],
        Field(max_length=MAX_PRICES),
    ] = {}
    staging: AccountStaging | None = None  # None: no weights are staged in this account

    def staging_uri(self, region: str) -> str | None:
        """The prefix staged weights live under in ``region`` (None: no staging here)."""
        st = self.staging
        if st is None:
            return None
        bucket = st.bucket_in(region)
        if self.cloud == Cloud.AWS:
            return f"s3://{bucket}/{st.prefix}/"
        if self.cloud == Cloud.GCP:
            return f"gs://{bucket}/{st.prefix}/"
        return (
            f"https://objectstorage.{region}.oraclecloud.com/n/{st.namespace}/b/{bucket}"
            f"/o/{st.prefix}/"
        )


class TargetMetric(StrEnum):
    CONCURRENCY = "concurrency"  # in-flight requests per replica
    TOKENS_PER_S = "tokens_per_s"  # generated tokens per second per replica


class ShapeOption(_Strict):
    """One accepted GPU shape for a model, with what one replica of it sustains."""

    shape: Annotated[str, Field(max_length=64)]
    # Requests one replica serves at once; the bound is the API's uint32 (schema/proto).
    max_concurrency: Annotated[int, Field(ge=1, le=2**32 - 1)]
    tokens_per_s: Annotated[float, Field(gt=0)] | None = None

    @field_validator("shape")
    @classmethod
    def _known_shape(cls, v: str) -> str:
        parse_gpu_shape(v)
        return v


def cloud_of_uri(uri: str) -> Cloud | None:
    """The cloud whose object store a weights URI names (None: another kind, e.g. file://)."""
    if uri.startswith("s3://"):
        return Cloud.AWS
    if uri.startswith("gs://"):
        return Cloud.GCP
    if uri.startswith("oci://") or re.match(
        r"^https://objectstorage\.[a-z0-9-]+\.oraclecloud", uri
    ):
        return Cloud.OCI
    return None


class Weights(_Strict):
    uri: Text  # the origin: one object, or a prefix ending in "/" (a directory of shards)
    size_gb: Annotated[float, Field(gt=0)]
    # The same bytes in other clouds' object stores, one per cloud: staging copies within a
    # cloud only (a server-side copy cannot cross clouds), from that cloud's origin.
    mirrors: Annotated[list[Text], Field(max_length=MAX_MIRRORS)] = []

    def origin_for(self, cloud: Cloud) -> str | None:
        return next((u for u in [self.uri, *self.mirrors] if cloud_of_uri(u) == cloud), None)


class Staging(_Strict):
    """Weight pre-staging for one model: copies of its weights in the object stores of the
    regions where it runs, and of the next ``regions_ahead`` regions placement would pick
    for it (its overflow pools included), within each account's ``staging`` budget."""

    enabled: bool = True
    regions_ahead: Annotated[int, Field(ge=0, le=20)] = 1


class BakedImage(_Strict):
    """Boot this model's nodes from a baked machine image per account, region and runtime
    image (``coldstart.images``): the driver checked, the container runtime and the engine's
    image layers in it (coldstart.md §1.2-§1.3: minutes of bootstrap and pull saved per
    node). Until one is ready, and if a build fails, nodes boot the base image with the
    full bootstrap."""

    enabled: bool = True


class WarmMode(StrEnum):
    """How a warm node waits: ``stopped`` bills its disk only (coldstart.md §4: an EC2
    warm pool's Stopped instances pay EBS + EIP; instance-store NVMe is wiped, so weights
    are fetched again on resume); ``ready`` keeps it running with its engine loaded, billed
    as a running node ("strongly" discouraged for cost by AWS), resumed at once."""

    STOPPED = "stopped"
    READY = "ready"


class WarmPool(_Strict):
    """Per pool, up to ``max_nodes`` nodes of this model waiting to be resumed instead of
    created (``controlplane.lifecycle.warm``): as many as the autoscaler's forecast says the
    model may add within one cold start of a create, and at least one replica's."""

    max_nodes: Annotated[int, Field(ge=1, le=1000)]
    mode: WarmMode = WarmMode.STOPPED
    # What a stopped node keeps billing: its boot volume, GB (priced per cloud with
    # ``BLOCK_USD_PER_GB_MONTH``).
    disk_gb: Annotated[int, Field(ge=1, le=65536)] = 200


class ScalingTarget(_Strict):
    metric: TargetMetric = TargetMetric.CONCURRENCY
    # Load per replica the autoscaler aims at, as a fraction of the shape's capacity for the
    # metric (Knative's container-concurrency-target-percentage is 0.7; autoscalers.md §1.8).
    utilization: Annotated[float, Field(gt=0, le=1)] = 0.7


class ScalingLimits(TypedDict):
    """:meth:`ScalingBehavior.limits`: keyword arguments of ``autoscaler.types.ScalingSpec``."""

    scale_up_delay_s: float
    scale_down_delay_s: float
    max_scale_up_rate: float
    max_scale_down_rate: float


class ScalingBehavior(_Strict):
    """How fast a model's replica count may move; every field optional. The rate limits
    default to Knative's (autoscalers.md §1.8). gpucap scales up at once by default (HPA's
    scale-up stabilization is 0 s, §4.2: a cold start is minutes, so waiting only adds late
    requests) and holds a lower need for one cold start before releasing anyway
    (autoscaler/gpucap.py step 6), so ``scale_down_delay_s`` matters where it is longer."""

    # Scale up only to the least need seen over this window (HPA's scaleUp
    # stabilizationWindowSeconds, §4.2). Each need already covers the peak of the stable
    # window (60 s), so a spike launches nothing when it is shorter than this delay minus
    # that window. A model at zero replicas still wakes on its first request.
    scale_up_delay_s: Annotated[float, Field(ge=0, le=3600)] = 0.0
    # Release only after this long of lower need (Knative's scale-down-delay, a max window).
    # Unset: the daemon's default (120 s).
    scale_down_delay_s: Annotated[float, Field(ge=0, le=86400)] | None = None
    # Per decision, at most this many times the live replicas (Knative max-scale-up-rate).
    max_scale_up_rate: Annotated[float, Field(gt=1)] = 1000.0
    # Per decision, release at most live / this (Knative max-scale-down-rate).
    max_scale_down_rate: Annotated[float, Field(gt=1)] = 2.0

    def limits(self, default_scale_down_delay_s: float) -> ScalingLimits:
        """These settings as the autoscaler's ``ScalingSpec`` fields, an unset scale-down
        delay taking the caller's default (the daemon's tuning, or the simulator's)."""
        down = self.scale_down_delay_s
        return {
            "scale_up_delay_s": self.scale_up_delay_s,
            "scale_down_delay_s": default_scale_down_delay_s if down is None else down,
            "max_scale_up_rate": self.max_scale_up_rate,
            "max_scale_down_rate": self.max_scale_down_rate,
        }


class Health(_Strict):
    """How a serving replica is watched and let go. Defaults are Kubernetes' (a probe's
    ``failureThreshold`` 3; a pod's ``terminationGracePeriodSeconds`` 30 s): an engine
    failing three probes in a row is replaced, and a drain waits up to the grace period for
    the engine's in-flight requests (read from its own metrics) before the node goes."""

    failure_threshold: Annotated[int, Field(ge=1, le=100)] = 3
    timeout_s: Annotated[float, Field(gt=0, le=60)] = 2.0
    drain_timeout_s: Annotated[float, Field(ge=0, le=86400)] = 30.0


class Model(_Strict):
    name: Name
    shapes: Annotated[list[ShapeOption], Field(min_length=1, max_length=MAX_SHAPES)]
    min_replicas: Count = 0
    max_replicas: Count = 10
    target: ScalingTarget = ScalingTarget()
    latency_slo_ms: Annotated[int, Field(ge=1, le=3_600_000)] = 2000  # at most an hour
    # empty: every cloud the customer has an account on
    clouds: Annotated[list[Cloud], Field(max_length=MAX_CLOUDS)] = []
    # empty: every region of the allowed accounts
    regions: Annotated[list[Region], Field(max_length=MAX_REGIONS)] = []
    priority: Annotated[int, Field(ge=0, le=1000)] = 100
    runtime: Runtime = Runtime()  # the inference engine a replica runs (schema/runtime.py)
    image: Text | None = None  # the runtime's image, as older policies name it: runtime.image
    weights: Weights | None = None
    staging: Staging | None = None  # None: weights are fetched from their origin
    baked_image: BakedImage | None = None  # None: nodes boot the base image
    warm_pool: WarmPool | None = None  # None: every scale-up creates its nodes
    scale_to_zero_grace_s: Annotated[float, Field(ge=0, le=30 * 86400)] = 600.0  # <= 30 days
    scaling: ScalingBehavior = ScalingBehavior()
    health: Health = Health()


class Overflow(_Strict):
    """May this customer's models spill onto gpucap's shared capacity, and how much."""

    enabled: bool = False
    max_replicas: Annotated[int, Field(ge=0, le=MAX_OVERFLOW_REPLICAS)] = 0
    max_usd_per_hour: Annotated[float, Field(ge=0)] | None = None
    # empty: every model
    models: Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=MAX_MODELS)] = []


class Policy(_Strict):
    customer: Name
    accounts: Annotated[list[Account], Field(min_length=1, max_length=MAX_ACCOUNTS)]
    models: Annotated[list[Model], Field(max_length=MAX_MODELS)] = []
    overflow: Overflow = Overflow()
    # Applying this file may delete models and drain replicas (a model or account left
    # out, pools with live nodes no longer allowed). Without it such a change is refused
    # and the active policy stays: a half-written file must not drain what it lost.
    allow_deletes: bool = False
    # Models deployed through the API that this file takes over (docs/policy.md,
    # "Ownership"); any other API-owned model named in ``models`` is a conflict.
    adopt_models: Annotated[list[Name], Field(max_length=MAX_MODELS)] = []

    def model(self, name: str) -> Model | None:
        return next((m for m in self.models if m.name == name), None)

    def account(self, name: str) -> Account | None:
        return next((a for a in self.accounts if a.name == name), None)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a policy: where (field path, and line once mapped) and why."""

    path: tuple[str | int, ...]
    reason: str
    file: str = "<policy>"
    line: int | None = None
    column: int | None = None

    @property
    def field(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out or "<document>"

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.column is not None and self.line is not None:
            where += f":{self.column}"
        return f"{where}: {self.field}: {self.reason}"


def semantic_problems(policy: Policy) -> list[Problem]:
    """Problems that pydantic's per-field checks cannot see. Pure; order is document order."""
    return list(_semantic(policy))


def _semantic(p: Policy) -> Iterator[Problem]:
    seen: dict[str, int] = {}
    for i, acct in enumerate(p.accounts):
        if acct.name in seen:
            yield Problem(("accounts", i, "name"), f"duplicate account name {echo(acct.name)}")
        seen[acct.name] = i
        known = REGIONS[acct.cloud]
        for j, region in enumerate(acct.regions):
            if region not in known:
                yield Problem(
                    ("accounts", i, "regions", j),
                    f"unknown {acct.cloud.value} region {echo(region)} (known: {', '.join(known)})",
                )
        yield from _credential_problems(i, acct)
        for j, c in enumerate(acct.committed):
            it = INSTANCE_TYPES_BY_NAME.get(c.instance_type)
            if it is None or it.cloud != acct.cloud:
                offered = ", ".join(
                    n for n, t in INSTANCE_TYPES_BY_NAME.items() if t.cloud == acct.cloud
                )
                yield Problem(
                    ("accounts", i, "committed", j, "instance_type"),
                    f"{echo(c.instance_type)} is not a {acct.cloud.value} GPU instance type "
                    f"(known: {offered})",
                )
            if c.region not in acct.regions:
                yield Problem(
                    ("accounts", i, "committed", j, "region"),
                    f"region {echo(c.region)} is not one of this account's regions",
                )
        yield from _staging_problems(i, acct)
        for name in acct.prices:
            it = INSTANCE_TYPES_BY_NAME.get(name)
            if it is None or it.cloud != acct.cloud:
                yield Problem(
                    ("accounts", i, "prices", name),
                    f"{echo(name)} is not a {acct.cloud.value} GPU instance type",
                )

    clouds = {a.cloud for a in p.accounts}
    all_regions = {r for a in p.accounts for r in a.regions}
    models_seen: set[str] = set()
    for i, m in enumerate(p.models):
        if m.name in models_seen:
            yield Problem(("models", i, "name"), f"duplicate model name {echo(m.name)}")
        models_seen.add(m.name)
        if m.min_replicas > m.max_replicas:
            yield Problem(
                ("models", i, "min_replicas"),
                f"min_replicas ({m.min_replicas}) is greater than max_replicas ({m.max_replicas})",
            )
        yield from _overflow_bound_problems(i, m, p)
        yield from _warm_pool_problems(i, m)
        shapes_seen: set[str] = set()
        for j, opt in enumerate(m.shapes):
            if opt.shape in shapes_seen:
                yield Problem(("models", i, "shapes", j, "shape"), f"duplicate {echo(opt.shape)}")
            shapes_seen.add(opt.shape)
            if m.target.metric == "tokens_per_s" and opt.tokens_per_s is None:
                yield Problem(
                    ("models", i, "shapes", j, "tokens_per_s"),
                    "required when target.metric is tokens_per_s",
                )
        if m.image is not None and m.runtime.image is not None:
            yield Problem(("models", i, "image"), "give runtime.image or image, not both")
        shapes = [parse_gpu_shape(opt.shape) for opt in m.shapes]  # (checked by ShapeOption)
        for path, reason in runtime_problems(m.runtime, shapes):
            yield Problem(("models", i, "runtime", *path), reason)
        yield from _weights_problems(i, m)
        for j, cloud in enumerate(m.clouds):
            if cloud not in clouds:
                yield Problem(
                    ("models", i, "clouds", j),
                    f"cloud {echo(cloud.value)} has no account in this policy",
                )
        for j, region in enumerate(m.regions):
            if region not in all_regions:
                yield Problem(
                    ("models", i, "regions", j),
                    f"region {echo(region)} is not in any account of this policy",
                )
    for j, name in enumerate(p.adopt_models):
        if name not in models_seen:
            yield Problem(("adopt_models", j), f"{echo(name)} is not a model of this policy")
    for j, name in enumerate(p.overflow.models):
        if name not in models_seen:
            yield Problem(("overflow", "models", j), f"unknown model {echo(name)}")
    if p.overflow.enabled and not any(a.owner == Owner.SHARED for a in p.accounts):
        yield Problem(
            ("overflow", "enabled"), "overflow is enabled but no account has owner: shared"
        )


def _staging_problems(i: int, acct: Account) -> Iterator[Problem]:
    st = acct.staging
    if st is None:
        return
    where = ("accounts", i, "staging")
    if "{region}" not in st.bucket and len(acct.regions) > 1:
        yield Problem(
            (*where, "bucket"),
            "a bucket lives in one region: put {region} in the name for an account with "
            f"{len(acct.regions)} regions",
        )
    for region in acct.regions[:1] if "{region}" not in st.bucket else acct.regions:
        name = st.bucket_in(region)
        if not _BUCKET.match(name) or ".." in name:
            yield Problem(
                (*where, "bucket"),
                f"{echo(name)} is not a valid bucket name (3-63 lowercase letters, digits, dots "
                "and hyphens, starting and ending with a letter or digit)",
            )
            break
    if acct.cloud == Cloud.OCI and not st.namespace:
        yield Problem((*where, "namespace"), "an oci account's staging needs its namespace")
    if acct.cloud != Cloud.OCI and st.namespace is not None:
        yield Problem(
            (*where, "namespace"), f"only oci buckets have a namespace, not {acct.cloud.value}"
        )


def _weights_problems(i: int, m: Model) -> Iterator[Problem]:
    w = m.weights
    if w is not None:
        seen: dict[Cloud, str] = {}
        for j, uri in enumerate(w.mirrors):
            cloud = cloud_of_uri(uri)
            path = ("models", i, "weights", "mirrors", j)
            if cloud is None:
                yield Problem(path, f"{echo(uri)} is not an s3://, gs:// or oci:// object URI")
            elif cloud == cloud_of_uri(w.uri) or cloud in seen:
                yield Problem(path, f"a second {cloud.value} origin (one per cloud)")
            else:
                seen[cloud] = uri
    if m.staging is not None and m.staging.enabled:
        if w is None:
            yield Problem(
                ("models", i, "staging"), "staging needs the model's weights (uri, size_gb)"
            )
        elif not any(cloud_of_uri(u) for u in [w.uri, *w.mirrors]):
            yield Problem(
                ("models", i, "staging"),
                f"weights {echo(w.uri)} are in no cloud's object store: nothing to copy from",
            )


def _overflow_bound_problems(i: int, m: Model, p: Policy) -> Iterator[Problem]:
    """A model that may run only on gpucap's shared accounts holds at most the customer's
    overflow.max_replicas there, so a larger min_replicas is one the loop could never meet."""
    allowed = [
        a
        for a in p.accounts
        if (not m.clouds or a.cloud in m.clouds)
        and (not m.regions or set(a.regions) & set(m.regions))
    ]
    if not allowed or any(a.owner != Owner.SHARED for a in allowed):
        return
    cap = p.overflow.max_replicas if p.overflow.enabled else 0
    if m.min_replicas > cap:
        yield Problem(
            ("models", i, "min_replicas"),
            f"min_replicas ({m.min_replicas}) is more than this model can hold: it may run "
            f"only on shared accounts, where overflow.max_replicas is {cap}"
            + ("" if p.overflow.enabled else " (overflow is not enabled)"),
        )


def _warm_pool_problems(i: int, m: Model) -> Iterator[Problem]:
    wp = m.warm_pool
    if wp is None:
        return
    least = min(parse_gpu_shape(o.shape).nodes for o in m.shapes)
    if wp.max_nodes < least:
        yield Problem(
            ("models", i, "warm_pool", "max_nodes"),
            f"max_nodes ({wp.max_nodes}) holds no replica: the smallest shape has {least} nodes",
        )


def _credential_problems(i: int, acct: Account) -> Iterator[Problem]:
    c = acct.credentials
    allowed: dict[Cloud, set[str]] = {
        Cloud.AWS: {"role_arn", "profile", "instance_profile"},
        Cloud.GCP: {"project", "service_account", "node_service_account"},
        Cloud.OCI: {"tenancy", "compartment_id", "profile", "principal"},
    }
    for name in c.model_fields_set:
        if getattr(c, name) is not None and name not in allowed[acct.cloud]:
            yield Problem(
                ("accounts", i, "credentials", name),
                f"not a {acct.cloud.value} credential reference "
                f"(use: {', '.join(sorted(allowed[acct.cloud]))})",
            )
    if acct.owner == Owner.CUSTOMER:
        required = {Cloud.AWS: "role_arn", Cloud.GCP: "service_account", Cloud.OCI: None}[
            acct.cloud
        ]
        if required and getattr(c, required) is None:
            yield Problem(
                ("accounts", i, "credentials", required),
                f"a customer-owned {acct.cloud.value} account needs {required}",
            )
        if acct.cloud == Cloud.OCI and c.profile is None and c.principal is None:
            yield Problem(
                ("accounts", i, "credentials", "profile"),
                "a customer-owned oci account needs profile or principal",
            )
    if acct.cloud == Cloud.GCP and c.project is None:
        yield Problem(("accounts", i, "credentials", "project"), "a gcp account needs project")
    if acct.cloud == Cloud.OCI and c.compartment_id is None:
        yield Problem(
            ("accounts", i, "credentials", "compartment_id"), "an oci account needs compartment_id"
        )


# The version of gpucap's file formats (every file's ``apiVersion``, schema.policy_file).
API_VERSION = "gpucap.dev/v1"


def with_header(schema: dict[str, Any], kind: str) -> dict[str, Any]:
    """A file's JSON Schema with its header, ``apiVersion`` and ``kind`` (read by
    schema.policy_file before the rest of the file)."""
    header = {
        "apiVersion": {"const": API_VERSION, "title": "Apiversion"},
        "kind": {"const": kind, "title": "Kind"},
    }
    return {**schema, "properties": {**header, **schema.get("properties", {})}}


def json_schema() -> dict[str, Any]:
    """JSON Schema of the policy file, for editors (``gpucap policy schema``)."""
    schema = with_header(Policy.model_json_schema(), "Policy")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpucap customer policy"
    return schema
