"""A wire-level fake of the Compute Engine REST API (plus the two small pieces of Cloud
Storage and IAM Credentials that gpucap uses), for tests driven through the real
``google.cloud.compute_v1`` REST clients.

It speaks the real paths and JSON shapes recorded in ``../shared/reference/clouds.md`` §E.2:
camelCase bodies, int64 as strings, zonal and global Operation objects that go
RUNNING -> DONE and carry ``error.errors[]`` plus ``httpErrorStatusCode`` when they fail, and
``{"error": {"code", "message", "errors": [{"reason"...}]}}`` error payloads. Like the real
API it

- deduplicates ``requestId`` per project: a repeat returns the original operation (even a
  failed one) and never makes a second instance (§A.4: "the server ignores a repeat");
- keeps instance names unique per zone (409 ``alreadyExists``), names being GCP's
  idempotency anchor (§A.1);
- stops and starts instances (``instances.stop`` / ``instances.start``, zonal operations):
  RUNNING -> STOPPING -> TERMINATED (GCE's word for a stopped VM, which still exists with
  its disks) and TERMINATED -> PROVISIONING -> RUNNING; asking for the state the VM is in
  or heading to is a no-op operation, starting one still stopping is 400
  ``resourceNotReady``, and a start can meet a stockout like an insert (fault
  ``stockout`` with ``method="instances.start"``);
- enforces regional GPU quotas on insert (403 ``quotaExceeded``), when a limit is set;
- keeps regional resource policies (compact placement policies: ``groupPlacementPolicy``),
  unique per project and region (409 ``alreadyExists``), created and deleted through region
  operations; an instance naming one in ``resourcePolicies`` must find it in its own region
  (else 404 / 400), holds it as a full URL, and keeps it from being deleted (400
  ``resourceInUseByAnotherResource``) until the instance is gone;
- enforces project access for restricted projects (403 ``forbidden``), and mints tokens for
  service-account impersonation (``generateAccessToken``) only for permitted callers.

Faults are injected per request on the wire (:meth:`FakeGcp.inject`): stockout inside a
finished operation (``ZONE_RESOURCE_POOL_EXHAUSTED`` and ``_WITH_DETAILS``), quota (regional
and ``GPUS_ALL_REGIONS``, sync 403 or inside the operation), rate limits (403 and 429), 5xx,
401/403 auth errors, a dropped connection after the work was done (a lost response), and
latency. The server binds 127.0.0.1 on a free port, in a thread; :func:`start` returns it.

Usage::

    fake = start()                     # FakeGcp; fake.endpoint == "http://127.0.0.1:PORT"
    fake.inject("stockout", zone="us-central1-a")
    ...
    fake.stop()
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import itertools
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qs, quote, unquote, urlsplit

import crc32c

ANONYMOUS = "anonymous"

# --- the world the fake serves ---------------------------------------------------------


@dataclass(frozen=True)
class MachineType:
    name: str
    cpus: int
    memory_mb: int
    accelerator: str = ""  # e.g. nvidia-h100-80gb
    accelerators: int = 0
    quota_metric: str = ""  # the regional GPU quota metric an instance of it consumes


# Shapes from clouds.md §A.1; quota metrics from §A.1 notes (NVIDIA_H100_GPUS, ...).
A3_HIGH = MachineType("a3-highgpu-8g", 208, 1872 * 1024, "nvidia-h100-80gb", 8, "NVIDIA_H100_GPUS")
A3_MEGA = MachineType(
    "a3-megagpu-8g", 208, 1872 * 1024, "nvidia-h100-mega-80gb", 8, "NVIDIA_H100_MEGA_GPUS"
)
A3_ULTRA = MachineType(
    "a3-ultragpu-8g", 224, 2952 * 1024, "nvidia-h200-141gb", 8, "NVIDIA_H200_GPUS"
)
N2_STANDARD = MachineType("n2-standard-8", 8, 32 * 1024)

# region -> zone -> machine types offered there. Deliberately uneven, like the real thing:
# not every zone of a region offers every A3 shape.
DEFAULT_TOPOLOGY: dict[str, dict[str, tuple[MachineType, ...]]] = {
    "us-central1": {
        "us-central1-a": (A3_HIGH, A3_MEGA, A3_ULTRA, N2_STANDARD),
        "us-central1-b": (A3_HIGH, A3_ULTRA, N2_STANDARD),
        "us-central1-c": (A3_MEGA, N2_STANDARD),
    },
    "us-east4": {
        "us-east4-a": (A3_HIGH, A3_MEGA, N2_STANDARD),
        "us-east4-b": (A3_ULTRA, N2_STANDARD),
    },
    "europe-west4": {
        "europe-west4-a": (A3_HIGH, A3_ULTRA, N2_STANDARD),
        "europe-west4-b": (A3_MEGA, N2_STANDARD),
    },
}

INSERT = "instances.insert"
STOP = "instances.stop"
START = "instances.start"


@dataclass
class Fault:
    kind: str
    remaining: int
    zone: str | None
    method: str
    seconds: float = 0.0
    skip: int = 0  # let this many matching requests through first


@dataclass
class Operation:
    name: str
    project: str
    scope: str  # "zones/<zone>", "regions/<region>" or "global"
    kind: str  # insert | delete
    target_link: str
    target_id: str
    polls_left: int
    status: str = "RUNNING"
    error: dict[str, Any] | None = None
    http_status: int | None = None
    http_message: str = ""
    on_done: Callable[[], None] | None = None
    insert_time: str = ""
    request_id: str = ""

    def finish(self) -> None:
        if self.status == "DONE":
            return
        self.status = "DONE"
        if self.error is None and self.on_done is not None:
            self.on_done()

    def to_json(self, base: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(abs(hash(self.name)) % 10**18),
            "name": self.name,
            "operationType": self.kind,
            "status": self.status,
            "progress": 100 if self.status == "DONE" else 0,
            "targetLink": self.target_link,
            "targetId": self.target_id,
            "insertTime": self.insert_time,
            "selfLink": f"{base}/projects/{self.project}/{self.scope}/operations/{self.name}",
        }
        if self.scope.startswith("zones/"):
            body["zone"] = f"{base}/projects/{self.project}/{self.scope}"
        if self.scope.startswith("regions/"):
            body["region"] = f"{base}/projects/{self.project}/{self.scope}"
        if self.status == "DONE":
            body["endTime"] = self.insert_time
            if self.error is not None:
                body["error"] = self.error
                if self.http_status is not None:
                    body["httpErrorStatusCode"] = self.http_status
                    body["httpErrorMessage"] = self.http_message
        return body


class SeenRequest(NamedTuple):
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names lowercased


class HttpError(Exception):
    """Raised inside a handler; becomes a Google-style JSON error response."""

    def __init__(
        self,
        status: int,
        message: str,
        reason: str,
        *,
        domain: str = "global",
        rpc_status: str = "",
        headers: dict[str, str] | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.domain = domain
        self.rpc_status = rpc_status
        self.headers = headers or {}
        self.details = details or []

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {
            "code": self.status,
            "message": self.message,
            "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
        }
        if self.rpc_status:
            err["status"] = self.rpc_status
        if self.details:
            err["details"] = self.details
        return {"error": err}


def _not_found(what: str) -> HttpError:
    return HttpError(404, f"The resource '{what}' was not found", "notFound")


def _now_rfc3339() -> str:
    """Now as GCE writes it: Pacific time with its offset."""
    pacific = dt.datetime.now(dt.timezone(dt.timedelta(hours=-7)))
    return pacific.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "-07:00"


class _DropConnection(Exception):
    """The work is done but the response is lost (the socket is closed without a reply)."""


# --- the fake ---------------------------------------------------------------------------


class FakeGcp:
    """State and behaviour of the fake; the HTTP plumbing is :class:`_Handler`."""

    def __init__(
        self,
        topology: dict[str, dict[str, tuple[MachineType, ...]]] | None = None,
        *,
        op_polls: int = 1,
        wait_is_best_effort: bool = False,
        rewrite_chunk_bytes: int = 1024,
    ) -> None:
        self.topology = topology or DEFAULT_TOPOLOGY
        self.zone_region = {z: r for r, zones in self.topology.items() for z in zones}
        # How many operation GETs return RUNNING before DONE (0: the first GET says DONE).
        self.op_polls = op_polls
        # zoneOperations.wait is best effort in GCP (§A.4: returns after ~2 min even when not
        # DONE); when True the fake's wait advances one step only, like a GET.
        self.wait_is_best_effort = wait_is_best_effort
        self.rewrite_chunk_bytes = rewrite_chunk_bytes
        self.lock = threading.RLock()
        self._ids = itertools.count(5_000_000_000_000_000_001)
        self._ops = itertools.count(1)
        self.instances: dict[tuple[str, str, str], dict[str, Any]] = {}  # (project, zone, name)
        # Instances whose delete is running. GCE shows them STOPPING, the same status as a
        # stop in progress, so the fake keeps the difference here (never on the wire).
        self.deleting: set[tuple[str, str, str]] = set()
        self.operations: dict[tuple[str, str, str], Operation] = {}  # (project, scope, name)
        self.request_ids: dict[tuple[str, str], Operation] = {}  # (project, requestId)
        self.images: dict[tuple[str, str], dict[str, Any]] = {}  # (project, name)
        self.disk_images: dict[tuple[str, str, str], str] = {}  # (project, zone, disk): source
        # (project, region, name) -> resource policy
        self.resource_policies: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.objects: dict[tuple[str, str], bytes] = {}  # (bucket, name)
        self.zone_status: dict[str, str] = {}  # zone -> "DOWN" to take a zone down
        # (project, region) -> metric -> limit; unset metrics are unlimited. Project-wide
        # quotas (GPUS_ALL_REGIONS) live under region "global".
        self.quota_limits: dict[tuple[str, str], dict[str, float]] = {}
        self.faults: list[Fault] = []
        self.latency_s = 0.0
        # Auth: bearer token -> principal; project -> principals allowed (absent: open);
        # service account -> source principals allowed to impersonate it (None: anyone).
        self.tokens: dict[str, str] = {}
        self.project_members: dict[str, set[str]] = {}
        self.service_accounts: dict[str, set[str] | None] = {}
        self.requests_seen: list[SeenRequest] = []
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        assert self.server is not None, "not started"
        port = self.server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def start(self) -> FakeGcp:
        fake = self

        class Handler(_Handler):
            pass

        Handler.fake = fake
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def reset_faults(self) -> None:
        with self.lock:
            self.faults.clear()
            self.latency_s = 0.0

    def reset(self) -> None:
        """Forget all state and faults (keeps the topology and the server running)."""
        with self.lock:
            self.instances.clear()
            self.deleting.clear()
            self.operations.clear()
            self.request_ids.clear()
            self.images.clear()
            self.disk_images.clear()
            self.resource_policies.clear()
            self.objects.clear()
            self.zone_status.clear()
            self.quota_limits.clear()
            self.faults.clear()
            self.latency_s = 0.0
            self.tokens.clear()
            self.project_members.clear()
            self.service_accounts.clear()
            self.requests_seen.clear()

    # -- test knobs -----------------------------------------------------------------------

    def inject(
        self,
        kind: str,
        *,
        count: int = 1,
        zone: str | None = None,
        method: str = INSERT,
        seconds: float = 0.0,
        skip: int = 0,
    ) -> None:
        """Make the next ``count`` matching requests (after ``skip`` of them pass) fail with
        ``kind``:

        - in the finished operation: ``stockout`` (ZONE_RESOURCE_POOL_EXHAUSTED),
          ``stockout_details`` (…_WITH_DETAILS, with errorDetails/zonesAvailable),
          ``quota_op`` (QUOTA_EXCEEDED), ``op:<CODE>`` (any other operation error code);
        - on the wire: ``quota`` (403 quotaExceeded for the region's GPU metric),
          ``quota_global`` (403 quotaExceeded GPUS_ALL_REGIONS), ``rate_limit`` (403
          rateLimitExceeded), ``too_many_requests`` (429 RESOURCE_EXHAUSTED, Retry-After),
          ``server_error`` (503 backendError), ``internal`` (500), ``unauthenticated``
          (401), ``permission_denied`` (403 forbidden);
        - ``drop``: do the work, then close the connection without a response;
        - ``latency``: sleep ``seconds`` before answering.

        ``method`` is ``instances.insert`` by default (also: instances.get, instances.list,
        instances.delete, instances.stop, instances.start, operations.get, images.insert,
        machineTypes.list, regions.get, resourcePolicies.insert/get/list/delete,
        storage.rewrite, iam.generateAccessToken, or ``*`` for any request)."""
        with self.lock:
            self.faults.append(Fault(kind, count, zone, method, seconds, skip))

    def set_quota(self, project: str, region: str, metric: str, limit: float) -> None:
        with self.lock:
            self.quota_limits.setdefault((project, region), {})[metric] = limit

    def restrict_project(self, project: str, *principals: str) -> None:
        """Only these principals (service-account emails, or ``anonymous``) may use it."""
        with self.lock:
            self.project_members[project] = set(principals)

    def add_service_account(self, email: str, *, token_creators: Iterable[str] | None) -> None:
        """Register a service account; ``token_creators`` are the principals allowed to
        impersonate it (``roles/iam.serviceAccountTokenCreator``), None for anyone."""
        with self.lock:
            self.service_accounts[email] = None if token_creators is None else set(token_creators)

    def register_token(self, token: str, principal: str) -> None:
        with self.lock:
            self.tokens[token] = principal

    def add_image(self, project: str, name: str, *, family: str = "") -> None:
        """A READY image, as if baked earlier (test setup, e.g. the base image family)."""
        with self.lock:
            self.images[(project, name)] = {
                "kind": "compute#image",
                "id": str(next(self._ids)),
                "name": name,
                "family": family,
                "labels": {},
                "status": "READY",
                "storageLocations": ["us"],
                "creationTimestamp": _now_rfc3339(),
                "selfLink": f"{self.endpoint}/compute/v1/projects/{project}/global/images/{name}",
            }

    def put_object(self, bucket: str, name: str, data: bytes) -> None:
        with self.lock:
            self.objects[(bucket, name)] = data

    def get_object(self, bucket: str, name: str) -> bytes | None:
        with self.lock:
            return self.objects.get((bucket, name))

    def live_instances(self, project: str | None = None) -> list[dict[str, Any]]:
        """Ground truth for tests: instances that exist and are not being deleted (stopping
        and stopped ones are live: they keep their name and disks)."""
        with self.lock:
            return [
                dict(i)
                for key, i in self.instances.items()
                if (project is None or key[0] == project) and key not in self.deleting
            ]

    def boot_image_of(self, project: str, zone: str, name: str) -> str | None:
        """Ground truth for tests: the source image the instance's boot disk was made from."""
        with self.lock:
            inst = self.instances.get((project, zone, name))
            boot = next((d for d in (inst or {}).get("disks", []) if d["boot"]), None)
            if boot is None:
                return None
            return self.disk_images.get((project, zone, boot["source"].rsplit("/", 1)[-1]))

    def policies(self, project: str) -> list[dict[str, Any]]:
        """Ground truth for tests: the project's resource policies (any region)."""
        with self.lock:
            return [dict(r) for (p, _, _), r in self.resource_policies.items() if p == project]

    # -- fault plumbing -------------------------------------------------------------------

    def _take_fault(self, method: str, zone: str | None) -> Fault | None:
        with self.lock:
            for f in self.faults:
                if f.method not in (method, "*") or (f.zone and f.zone != zone):
                    continue
                if f.remaining <= 0:
                    continue
                if f.skip > 0:
                    f.skip -= 1
                    continue
                f.remaining -= 1
                self.faults = [x for x in self.faults if x.remaining > 0]
                return f
        return None

    def _sync_fault(self, fault: Fault, project: str, zone: str | None, mtype: str) -> None:
        region = self.zone_region.get(zone or "", zone or "")
        metric = self._metric_of(mtype) or "NVIDIA_H100_GPUS"
        k = fault.kind
        if k == "quota":
            raise HttpError(
                403,
                f"Quota '{metric}' exceeded.  Limit: 0.0 in region {region}.",
                "quotaExceeded",
                domain="usageLimits",
            )
        if k == "quota_global":
            raise HttpError(
                403,
                "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 8.0 globally.",
                "quotaExceeded",
                domain="usageLimits",
            )
        if k == "rate_limit":
            raise HttpError(
                403,
                "Rate Limit Exceeded",
                "rateLimitExceeded",
                domain="usageLimits",
            )
        if k == "too_many_requests":
            raise HttpError(
                429,
                "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of "
                f"service 'compute.googleapis.com' for consumer 'project_number:{project}'.",
                "rateLimitExceeded",
                domain="usageLimits",
                rpc_status="RESOURCE_EXHAUSTED",
                headers={"Retry-After": "1"},
            )
        if k == "server_error":
            raise HttpError(503, "Backend Error", "backendError")
        if k == "internal":
            raise HttpError(500, "Internal error. Please try again.", "internalError")
        if k == "unauthenticated":
            raise HttpError(
                401,
                "Request had invalid authentication credentials. Expected OAuth 2 access "
                "token, login cookie or other valid authentication credential.",
                "authError",
                rpc_status="UNAUTHENTICATED",
            )
        if k == "permission_denied":
            raise HttpError(
                403,
                f"Required 'compute.instances.create' permission for 'projects/{project}'",
                "forbidden",
            )

    def _op_fault(
        self, fault: Fault, project: str, zone: str, mtype: str
    ) -> tuple[dict, int | None]:
        """An operation ``error`` and its ``httpErrorStatusCode`` for an async fault."""
        region = self.zone_region.get(zone, "")
        pool_msg = (
            f"The zone 'projects/{project}/zones/{zone}' does not have enough resources "
            "available to fulfill the request.  Try a different zone, or try again later."
        )
        if fault.kind == "stockout":
            return {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": pool_msg}]}, 503
        if fault.kind == "stockout_details":
            others = sorted(z for z, r in self.zone_region.items() if r == region and z != zone)
            return {
                "errors": [
                    {
                        "code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                        "message": pool_msg,
                        "errorDetails": [
                            {
                                "errorInfo": {
                                    "reason": "resource_availability",
                                    "domain": "compute.googleapis.com",
                                    "metadatas": {
                                        "zone": zone,
                                        "vmType": mtype,
                                        "zonesAvailable": ",".join(others),
                                    },
                                }
                            },
                            {
                                "help": {
                                    "links": [
                                        {
                                            "description": "Troubleshooting documentation",
                                            "url": "https://cloud.google.com/compute/docs/"
                                            "resource-error",
                                        }
                                    ]
                                }
                            },
                        ],
                    }
                ]
            }, 503
        if fault.kind == "quota_op":
            metric = self._metric_of(mtype) or "NVIDIA_H100_GPUS"
            return {
                "errors": [
                    {
                        "code": "QUOTA_EXCEEDED",
                        "message": f"Quota '{metric}' exceeded.  Limit: 0.0 in region {region}.",
                        "errorDetails": [
                            {
                                "quotaInfo": {
                                    "metricName": f"compute.googleapis.com/{metric.lower()}",
                                    "limitName": f"{metric}-per-project-region",
                                    "dimensions": {"region": region},
                                    "limit": 0,
                                }
                            }
                        ],
                    }
                ]
            }, 403
        if fault.kind.startswith("op:"):
            code = fault.kind[3:]
            # No httpErrorStatusCode: the case where ExtendedOperation.result() stays silent
            # (clouds.md §E.2 pitfall 3); only a check of ``error`` catches it.
            return {"errors": [{"code": code, "message": f"{code} (injected)"}]}, None
        raise ValueError(f"not an operation fault: {fault.kind}")

    # -- helpers --------------------------------------------------------------------------

    def _metric_of(self, mtype: str) -> str:
        for zones in self.topology.values():
            for types in zones.values():
                for t in types:
                    if t.name == mtype:
                        return t.quota_metric
        return ""

    def _gpus_of(self, mtype: str) -> int:
        for zones in self.topology.values():
            for types in zones.values():
                for t in types:
                    if t.name == mtype:
                        return t.accelerators
        return 0

    def _usage(self, project: str, region: str, metric: str) -> float:
        used = 0.0
        for (p, zone, _), inst in self.instances.items():
            if p != project or (region != "global" and self.zone_region.get(zone) != region):
                continue
            mtype = inst["machineType"].rsplit("/", 1)[-1]
            gpus = self._gpus_of(mtype)
            if metric == "GPUS_ALL_REGIONS" or self._metric_of(mtype) == metric:
                used += gpus
        return used

    def _new_op(
        self, project: str, scope: str, kind: str, target_link: str, target_id: str
    ) -> Operation:
        name = f"operation-{int(time.time() * 1000)}-{next(self._ops):06d}"
        op = Operation(
            name=name,
            project=project,
            scope=scope,
            kind=kind,
            target_link=target_link,
            target_id=target_id,
            polls_left=self.op_polls,
            insert_time=_now_rfc3339(),
        )
        self.operations[(project, scope, name)] = op
        return op


# --- filters (the subset of the Compute list filter syntax gpucap uses) ------------------

_TERM = re.compile(
    r"\(?\s*(?P<field>labels\.[a-z][a-z0-9_-]*|name|status)\s*(?P<op>=|!=|eq|ne)\s*"
    r"(?P<value>\"[^\"]*\"|[^\s)]+)\s*\)?"
)


def parse_filter(text: str) -> list[tuple[str, str, str]]:
    """``labels.a = "x" AND (labels.b = y)`` -> [(field, op, value)]. Raises on anything else,
    so an unsupported filter is a 400, never silently ignored."""
    terms: list[tuple[str, str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TERM.match(text, pos)
        if not m:
            raise HttpError(400, f"Invalid value for field 'filter': '{text}'.", "invalid")
        value = m["value"].strip('"')
        op = {"eq": "=", "ne": "!="}.get(m["op"], m["op"])
        terms.append((m["field"], op, value))
        pos = m.end()
        rest = re.match(r"\s*(AND\s+)?", text[pos:])
        pos += rest.end() if rest else 0
    return terms


def _matches(resource: dict[str, Any], terms: list[tuple[str, str, str]]) -> bool:
    for fld, op, value in terms:
        if fld.startswith("labels."):
            actual = resource.get("labels", {}).get(fld[len("labels.") :])
        else:
            actual = resource.get(fld)
        if (actual == value) != (op == "="):
            return False
    return True


# --- HTTP --------------------------------------------------------------------------------

Route = tuple[str, re.Pattern[str], str]
_P = r"(?P<project>[a-z][a-z0-9-]{3,61}[a-z0-9])"
_Z = r"(?P<zone>[a-z0-9-]+)"
_N = r"(?P<name>[^/?]+)"
_R = r"(?P<region>[a-z0-9-]+)"
ROUTES: list[Route] = [
    ("POST", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/instances$"), "insert"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/instances$"), "list"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/instances/{_N}$"), "get"),
    ("DELETE", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/instances/{_N}$"), "delete"),
    ("POST", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/instances/{_N}/stop$"), "stop"),
    ("POST", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/instances/{_N}/start$"), "start"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/aggregated/instances$"), "agg_instances"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/operations/{_N}$"), "op_get"),
    (
        "POST",
        re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/operations/{_N}/wait$"),
        "op_wait",
    ),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/regions/{_R}/operations/{_N}$"), "rop_get"),
    (
        "POST",
        re.compile(rf"^/compute/v1/projects/{_P}/regions/{_R}/operations/{_N}/wait$"),
        "rop_wait",
    ),
    (
        "POST",
        re.compile(rf"^/compute/v1/projects/{_P}/regions/{_R}/resourcePolicies$"),
        "rp_insert",
    ),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/regions/{_R}/resourcePolicies$"), "rp_list"),
    (
        "GET",
        re.compile(rf"^/compute/v1/projects/{_P}/regions/{_R}/resourcePolicies/{_N}$"),
        "rp_get",
    ),
    (
        "DELETE",
        re.compile(rf"^/compute/v1/projects/{_P}/regions/{_R}/resourcePolicies/{_N}$"),
        "rp_delete",
    ),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/global/operations/{_N}$"), "gop_get"),
    ("POST", re.compile(rf"^/compute/v1/projects/{_P}/global/operations/{_N}/wait$"), "gop_wait"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/machineTypes$"), "mt_list"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}/machineTypes/{_N}$"), "mt_get"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/aggregated/machineTypes$"), "mt_agg"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/zones$"), "zones_list"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/zones/{_Z}$"), "zone_get"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/regions$"), "regions_list"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/regions/{_N}$"), "region_get"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}$"), "project_get"),
    ("POST", re.compile(rf"^/compute/v1/projects/{_P}/global/images$"), "image_insert"),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/global/images$"), "image_list"),
    (
        "GET",
        re.compile(rf"^/compute/v1/projects/{_P}/global/images/family/{_N}$"),
        "image_family",
    ),
    ("GET", re.compile(rf"^/compute/v1/projects/{_P}/global/images/{_N}$"), "image_get"),
    ("DELETE", re.compile(rf"^/compute/v1/projects/{_P}/global/images/{_N}$"), "image_delete"),
    ("GET", re.compile(r"^/storage/v1/b/(?P<bucket>[^/]+)/o$"), "obj_list"),
    ("GET", re.compile(r"^/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<object>[^/]+)$"), "obj_get"),
    (
        "DELETE",
        re.compile(r"^/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<object>[^/]+)$"),
        "obj_delete",
    ),
    (
        "POST",
        re.compile(
            r"^/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<object>[^/]+)"
            r"/rewriteTo/b/(?P<dbucket>[^/]+)/o/(?P<dobject>[^/]+)$"
        ),
        "obj_rewrite",
    ),
    (
        "POST",
        re.compile(r"^/v1/projects/-/serviceAccounts/(?P<sa>[^/:]+):generateAccessToken$"),
        "iam_token",
    ),
]

# Route handler name -> the method name faults are keyed by.
FAULT_METHOD = {
    "insert": INSERT,
    "list": "instances.list",
    "get": "instances.get",
    "delete": "instances.delete",
    "stop": STOP,
    "start": START,
    "agg_instances": "instances.aggregatedList",
    "op_get": "operations.get",
    "op_wait": "operations.wait",
    "rop_get": "operations.get",
    "rop_wait": "operations.wait",
    "rp_insert": "resourcePolicies.insert",
    "rp_list": "resourcePolicies.list",
    "rp_get": "resourcePolicies.get",
    "rp_delete": "resourcePolicies.delete",
    "gop_get": "operations.get",
    "gop_wait": "operations.wait",
    "mt_list": "machineTypes.list",
    "mt_get": "machineTypes.get",
    "mt_agg": "machineTypes.aggregatedList",
    "zones_list": "zones.list",
    "zone_get": "zones.get",
    "regions_list": "regions.list",
    "region_get": "regions.get",
    "project_get": "projects.get",
    "image_insert": "images.insert",
    "image_list": "images.list",
    "image_family": "images.getFromFamily",
    "image_get": "images.get",
    "image_delete": "images.delete",
    "obj_list": "storage.list",
    "obj_get": "storage.get",
    "obj_delete": "storage.delete",
    "obj_rewrite": "storage.rewrite",
    "iam_token": "iam.generateAccessToken",
}
ASYNC_FAULTS = ("stockout", "stockout_details", "quota_op")
# The statuses in which a stop / a start has nothing to do (there already, or on the way).
_POWER_NOOP = {"stop": ("STOPPING", "TERMINATED"), "start": ("PROVISIONING", "STAGING", "RUNNING")}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGcp
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read state
        del format, args

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # -- dispatch -------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        fake = self.fake
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        with fake.lock:
            fake.requests_seen.append(
                SeenRequest(
                    method, url.path, query, {k.lower(): v for k, v in self.headers.items()}
                )
            )
        if fake.latency_s:
            time.sleep(fake.latency_s)
        try:
            for verb, pattern, name in ROUTES:
                m = pattern.match(url.path) if verb == method else None
                if m is None:
                    continue
                params = {k: unquote(v) for k, v in m.groupdict().items()}
                body = json.loads(raw) if raw else {}
                fault = fake._take_fault(FAULT_METHOD[name], params.get("zone"))
                if fault is not None and fault.kind == "latency":
                    time.sleep(fault.seconds)
                    fault = None
                status, payload = getattr(self, f"_h_{name}")(params, query, body, fault)
                self._reply(status, payload)
                return
            raise _not_found(url.path)
        except _DropConnection:
            self.close_connection = True
            return
        except HttpError as e:
            self._reply(e.status, e.body(), e.headers)
        except json.JSONDecodeError as e:
            self._reply(400, HttpError(400, f"Invalid JSON payload: {e}", "parseError").body())

    def _reply(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if status == 204 else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    @property
    def base(self) -> str:
        host = self.headers.get("Host", "127.0.0.1")
        return f"http://{host}/compute/v1"

    # -- auth -----------------------------------------------------------------------------

    def _principal(self) -> str:
        auth = self.headers.get("Authorization", "")
        if not auth:
            return ANONYMOUS
        token = auth.removeprefix("Bearer ").strip()
        principal = self.fake.tokens.get(token)
        if principal is None:
            raise HttpError(
                401,
                "Request had invalid authentication credentials. Expected OAuth 2 access "
                "token, login cookie or other valid authentication credential.",
                "authError",
                rpc_status="UNAUTHENTICATED",
            )
        return principal

    def _authorize(self, project: str, permission: str) -> None:
        members = self.fake.project_members.get(project)
        if members is None:
            return
        principal = self._principal()
        if principal not in members:
            raise HttpError(
                403, f"Required '{permission}' permission for 'projects/{project}'", "forbidden"
            )

    def _check_zone(self, project: str, zone: str) -> str:
        region = self.fake.zone_region.get(zone)
        if region is None:
            raise HttpError(
                400, f"Invalid value for field 'zone': '{zone}'. Unknown zone.", "invalid"
            )
        return region

    # -- instances ------------------------------------------------------------------------

    def _h_insert(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        fake, project, zone = self.fake, p["project"], p["zone"]
        self._authorize(project, "compute.instances.create")
        region = self._check_zone(project, zone)
        with fake.lock:
            rid = q.get("requestId", "")
            if rid:
                # §A.4: the same requestId returns the original operation; nothing new runs.
                seen = fake.request_ids.get((project, rid))
                if seen is not None:
                    if fault is not None and fault.kind == "drop":
                        raise _DropConnection
                    return 200, seen.to_json(self.base)
            mtype_path = body.get("machineType", "")
            mtype = mtype_path.rsplit("/", 1)[-1]
            name = body.get("name", "")
            sync = fault is not None and fault.kind not in (*ASYNC_FAULTS, "drop")
            if fault is not None and sync and not fault.kind.startswith("op:"):
                fake._sync_fault(fault, project, zone, mtype)
            if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
                raise HttpError(
                    400,
                    f"Invalid value for field 'resource.name': '{name}'. Must be a match of "
                    "regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'",
                    "invalid",
                )
            offered = {t.name for t in fake.topology[region][zone]}
            if mtype not in offered:
                raise HttpError(
                    400,
                    f"Invalid value for field 'resource.machineType': '{mtype_path}'. Machine "
                    f"type with name '{mtype}' does not exist in zone '{zone}'.",
                    "invalid",
                )
            for k, v in (body.get("labels") or {}).items():
                if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", k) or not re.fullmatch(
                    r"[a-z0-9_-]{0,63}", v
                ):
                    raise HttpError(
                        400,
                        f"Invalid value for field 'resource.labels': '{k}={v}'. Label keys and "
                        "values may contain only lowercase letters, digits, '_' and '-'.",
                        "invalid",
                    )
            if (project, zone, name) in fake.instances:
                raise HttpError(
                    409,
                    f"The resource 'projects/{project}/zones/{zone}/instances/{name}' "
                    "already exists",
                    "alreadyExists",
                )
            self._check_source_images(project, body)
            self._check_quota(project, region, mtype)
            body = {**body, "resourcePolicies": self._policy_links(project, region, body)}
            link = f"{self.base}/projects/{project}/zones/{zone}/instances/{name}"
            iid = str(next(fake._ids))
            op = fake._new_op(project, f"zones/{zone}", "insert", link, iid)
            op.request_id = rid
            if rid:
                fake.request_ids[(project, rid)] = op
            if fault is not None and (fault.kind in ASYNC_FAULTS or fault.kind.startswith("op:")):
                op.error, op.http_status = fake._op_fault(fault, project, zone, mtype)
                op.http_message = {503: "SERVICE UNAVAILABLE", 403: "FORBIDDEN"}.get(
                    op.http_status or 0, ""
                )
                return 200, op.to_json(self.base)
            inst = self._instance_resource(project, zone, name, iid, body)
            fake.instances[(project, zone, name)] = inst
            op.on_done = lambda: inst.update(status="RUNNING")
            if fault is not None and fault.kind == "drop":
                raise _DropConnection
            return 200, op.to_json(self.base)

    def _check_source_images(self, project: str, body: dict) -> None:
        """Each new disk's ``initializeParams.sourceImage`` is a path or URL, as GCE wants
        (``[projects/P/]global/images/NAME`` or ``.../images/family/F``; a bare name is
        invalid), and a named image of a project this fake holds images of exists and is
        READY. Families are not checked: the fake publishes no base images."""
        for i, d in enumerate(body.get("disks") or []):
            src = (d.get("initializeParams") or {}).get("sourceImage")
            if src is None:
                continue
            m = re.search(r"(?:^|/)(?:projects/(?P<p>[^/]+)/)?global/images/(?P<n>.+)$", src)
            if m is None:
                field = f"resource.disks[{i}].initializeParams.sourceImage"
                raise HttpError(400, f"Invalid value for field '{field}': '{src}'.", "invalid")
            owner, name = m["p"] or project, m["n"]
            if name.startswith("family/") or all(pp != owner for pp, _ in self.fake.images):
                continue
            image = self.fake.images.get((owner, name))
            if image is None:
                raise _not_found(f"projects/{owner}/global/images/{name}")
            if image["status"] != "READY":
                raise HttpError(
                    400,
                    f"The resource 'projects/{owner}/global/images/{name}' is not ready",
                    "resourceNotReady",
                )

    def _policy_links(self, project: str, region: str, body: dict) -> list[str]:
        """The instance's ``resourcePolicies`` as full URLs, each checked to exist in the
        instance's own region (a partial or full URL may be sent, as in GCP)."""
        out = []
        for ref in body.get("resourcePolicies") or []:
            m = re.search(r"projects/([^/]+)/regions/([^/]+)/resourcePolicies/([^/]+)$", ref)
            if m is None:
                raise HttpError(
                    400, f"Invalid value for field 'resource.resourcePolicies': '{ref}'.", "invalid"
                )
            policy = self.fake.resource_policies.get((m[1], m[2], m[3]))
            if policy is None:
                raise _not_found(f"projects/{m[1]}/regions/{m[2]}/resourcePolicies/{m[3]}")
            if m[2] != region:
                raise HttpError(
                    400,
                    f"Invalid value for field 'resource.resourcePolicies': '{ref}'. Resource "
                    f"policy must be in the same region as the instance ('{region}').",
                    "invalid",
                )
            out.append(policy["selfLink"])
        return out

    def _check_quota(self, project: str, region: str, mtype: str) -> None:
        fake = self.fake
        gpus = fake._gpus_of(mtype)
        if not gpus:
            return
        metric = fake._metric_of(mtype)
        for scope, m in ((region, metric), ("global", "GPUS_ALL_REGIONS")):
            limit = fake.quota_limits.get((project, scope), {}).get(m)
            if limit is not None and fake._usage(project, scope, m) + gpus > limit:
                where = "globally" if scope == "global" else f"in region {region}"
                raise HttpError(
                    403,
                    f"Quota '{m}' exceeded.  Limit: {limit:.1f} {where}.",
                    "quotaExceeded",
                    domain="usageLimits",
                )

    def _instance_resource(
        self, project: str, zone: str, name: str, iid: str, body: dict
    ) -> dict[str, Any]:
        base = self.base
        disks = []
        for i, d in enumerate(body.get("disks") or []):
            disk_name = name if d.get("boot") else f"{name}-{i}"
            disks.append(
                {
                    "type": "PERSISTENT",
                    "mode": "READ_WRITE",
                    "deviceName": d.get("deviceName") or disk_name,
                    "boot": bool(d.get("boot")),
                    "autoDelete": bool(d.get("autoDelete")),
                    "index": i,
                    "source": f"{base}/projects/{project}/zones/{zone}/disks/{disk_name}",
                    "diskSizeGb": (d.get("initializeParams") or {}).get("diskSizeGb", "10"),
                }
            )
            source_image = (d.get("initializeParams") or {}).get("sourceImage", "")
            self.fake.disk_images[(project, zone, disk_name)] = source_image
        return {
            "kind": "compute#instance",
            "id": iid,
            "name": name,
            "zone": f"{base}/projects/{project}/zones/{zone}",
            "machineType": f"{base}/projects/{project}/{body.get('machineType', '')}",
            "status": "PROVISIONING",
            "labels": dict(body.get("labels") or {}),
            "metadata": {
                "kind": "compute#metadata",
                "fingerprint": secrets.token_urlsafe(8),
                "items": list((body.get("metadata") or {}).get("items") or []),
            },
            "disks": disks,
            "networkInterfaces": [
                {
                    "name": "nic0",
                    "network": body.get("networkInterfaces", [{}])[0].get("network", ""),
                    "networkIP": f"10.128.{int(iid) % 250}.{int(iid) // 250 % 250 + 2}",
                }
            ],
            "scheduling": body.get("scheduling") or {},
            "reservationAffinity": body.get("reservationAffinity") or {},
            "resourcePolicies": list(body.get("resourcePolicies") or []),
            # GCE answers the attached identity with its scopes; absent when none was asked.
            **({"serviceAccounts": body["serviceAccounts"]} if body.get("serviceAccounts") else {}),
            "creationTimestamp": _now_rfc3339(),
            "selfLink": f"{base}/projects/{project}/zones/{zone}/instances/{name}",
        }

    def _h_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, zone, name = p["project"], p["zone"], p["name"]
        self._authorize(project, "compute.instances.get")
        inst = self.fake.instances.get((project, zone, name))
        if inst is None:
            raise _not_found(f"projects/{project}/zones/{zone}/instances/{name}")
        return 200, inst

    def _h_list(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, zone = p["project"], p["zone"]
        self._authorize(project, "compute.instances.list")
        self._check_zone(project, zone)
        terms = parse_filter(q.get("filter", ""))
        with self.fake.lock:
            items = [
                i
                for (pp, z, _), i in sorted(self.fake.instances.items())
                if pp == project and z == zone and _matches(i, terms)
            ]
        return 200, self._page(f"projects/{project}/zones/{zone}/instances", items, q)

    def _h_agg_instances(
        self, p: dict, q: dict, body: dict, fault: Fault | None
    ) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.instances.list")
        terms = parse_filter(q.get("filter", ""))
        out: dict[str, Any] = {}
        with self.fake.lock:
            for zone in sorted(self.fake.zone_region):
                items = [
                    i
                    for (pp, z, _), i in sorted(self.fake.instances.items())
                    if pp == project and z == zone and _matches(i, terms)
                ]
                if items:
                    out[f"zones/{zone}"] = {"instances": items}
                else:
                    out[f"zones/{zone}"] = {
                        "warning": {
                            "code": "NO_RESULTS_ON_PAGE",
                            "message": "There are no results for scope "
                            f"'zones/{zone}' on this page.",
                        }
                    }
        return 200, {"kind": "compute#instanceAggregatedList", "items": out}

    def _h_delete(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        fake, project, zone, name = self.fake, p["project"], p["zone"], p["name"]
        self._authorize(project, "compute.instances.delete")
        with fake.lock:
            rid = q.get("requestId", "")
            if rid and (project, rid) in fake.request_ids:
                return 200, fake.request_ids[(project, rid)].to_json(self.base)
            inst = fake.instances.get((project, zone, name))
            if inst is None:
                raise _not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            inst["status"] = "STOPPING"
            fake.deleting.add((project, zone, name))
            op = fake._new_op(project, f"zones/{zone}", "delete", inst["selfLink"], inst["id"])
            if rid:
                fake.request_ids[(project, rid)] = op

            def gone() -> None:
                if fake.instances.get((project, zone, name)) is inst:
                    del fake.instances[(project, zone, name)]
                    fake.deleting.discard((project, zone, name))

            op.on_done = gone
            return 200, op.to_json(self.base)

    def _h_stop(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        return self._power(p, q, fault, "stop")

    def _h_start(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        return self._power(p, q, fault, "start")

    def _power(self, p: dict, q: dict, fault: Fault | None, verb: str) -> tuple[int, Any]:
        """instances.stop / instances.start: a zonal operation, the status moving when it is
        DONE (the fake's operations have one step, so a start skips STAGING)."""
        fake, project, zone, name = self.fake, p["project"], p["zone"], p["name"]
        self._authorize(project, f"compute.instances.{verb}")
        with fake.lock:
            rid = q.get("requestId", "")
            if rid and (project, rid) in fake.request_ids:
                if fault is not None and fault.kind == "drop":
                    raise _DropConnection
                return 200, fake.request_ids[(project, rid)].to_json(self.base)
            key = (project, zone, name)
            inst = fake.instances.get(key)
            if inst is None:
                raise _not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            mtype = inst["machineType"].rsplit("/", 1)[-1]
            is_async = fault is not None and (
                fault.kind in ASYNC_FAULTS or fault.kind.startswith("op:")
            )
            if fault is not None and not is_async and fault.kind != "drop":
                fake._sync_fault(fault, project, zone, mtype)
            status, dying = inst["status"], key in fake.deleting
            if verb == "start" and (dying or status in ("STOPPING", "SUSPENDING")):
                raise HttpError(
                    400,
                    f"The resource 'projects/{project}/zones/{zone}/instances/{name}' is not ready",
                    "resourceNotReady",
                )
            op = fake._new_op(project, f"zones/{zone}", verb, inst["selfLink"], inst["id"])
            op.request_id = rid
            if rid:
                fake.request_ids[(project, rid)] = op
            if fault is not None and is_async:
                # The VM stays as it was: a start that found no host leaves it TERMINATED.
                op.error, op.http_status = fake._op_fault(fault, project, zone, mtype)
                op.http_message = {503: "SERVICE UNAVAILABLE", 403: "FORBIDDEN"}.get(
                    op.http_status or 0, ""
                )
                return 200, op.to_json(self.base)
            # Already there or on the way: GCE answers with an operation that changes nothing.
            there = _POWER_NOOP[verb]
            if not dying and status not in there:
                inst["status"] = "STOPPING" if verb == "stop" else "PROVISIONING"
                moving, final = inst["status"], "TERMINATED" if verb == "stop" else "RUNNING"

                def arrive() -> None:
                    # Only if nothing else (a delete, the other verb) moved it meanwhile.
                    mine = fake.instances.get(key) is inst and key not in fake.deleting
                    if mine and inst["status"] == moving:
                        inst["status"] = final

                op.on_done = arrive
            if fault is not None and fault.kind == "drop":
                raise _DropConnection
            return 200, op.to_json(self.base)

    # -- operations -----------------------------------------------------------------------

    def _op(self, project: str, scope: str, name: str) -> Operation:
        op = self.fake.operations.get((project, scope, name))
        if op is None:
            raise _not_found(f"projects/{project}/{scope}/operations/{name}")
        return op

    def _advance(self, op: Operation, *, wait: bool) -> dict[str, Any]:
        with self.fake.lock:
            if wait and not self.fake.wait_is_best_effort:
                op.polls_left = 0
            if op.polls_left > 0:
                op.polls_left -= 1
            else:
                op.finish()
            return op.to_json(self.base)

    def _h_op_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        return 200, self._advance(
            self._op(p["project"], f"zones/{p['zone']}", p["name"]), wait=False
        )

    def _h_op_wait(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        return 200, self._advance(
            self._op(p["project"], f"zones/{p['zone']}", p["name"]), wait=True
        )

    def _h_rop_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        return 200, self._advance(
            self._op(p["project"], f"regions/{p['region']}", p["name"]), wait=False
        )

    def _h_rop_wait(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        return 200, self._advance(
            self._op(p["project"], f"regions/{p['region']}", p["name"]), wait=True
        )

    def _h_gop_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        return 200, self._advance(self._op(p["project"], "global", p["name"]), wait=False)

    def _h_gop_wait(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        return 200, self._advance(self._op(p["project"], "global", p["name"]), wait=True)

    def _maybe_sync_fault(self, fault: Fault | None, p: dict) -> None:
        if fault is not None:
            if fault.kind == "drop":
                raise _DropConnection
            self.fake._sync_fault(fault, p.get("project", ""), p.get("zone"), "")

    # -- resource policies (regional) ------------------------------------------------------

    def _check_region(self, region: str) -> None:
        if region not in self.fake.topology:
            raise HttpError(
                400, f"Invalid value for field 'region': '{region}'. Unknown region.", "invalid"
            )

    def _h_rp_insert(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        if fault is not None and fault.kind != "drop":
            self._maybe_sync_fault(fault, p)
        fake, project, region = self.fake, p["project"], p["region"]
        self._authorize(project, "compute.resourcePolicies.create")
        self._check_region(region)
        with fake.lock:
            rid = q.get("requestId", "")
            if rid and (project, rid) in fake.request_ids:
                return 200, fake.request_ids[(project, rid)].to_json(self.base)
            name = body.get("name", "")
            if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
                raise HttpError(
                    400, f"Invalid value for field 'resource.name': '{name}'.", "invalid"
                )
            kinds = ("groupPlacementPolicy", "snapshotSchedulePolicy", "instanceSchedulePolicy")
            if not any(body.get(k) for k in kinds):
                raise HttpError(
                    400, "Invalid resource policy: exactly one policy must be set.", "invalid"
                )
            if (project, region, name) in fake.resource_policies:
                raise HttpError(
                    409,
                    f"The resource 'projects/{project}/regions/{region}/resourcePolicies/{name}'"
                    " already exists",
                    "alreadyExists",
                )
            link = f"{self.base}/projects/{project}/regions/{region}/resourcePolicies/{name}"
            rid_ = str(next(fake._ids))
            policy: dict[str, Any] = {
                "kind": "compute#resourcePolicy",
                "id": rid_,
                "creationTimestamp": _now_rfc3339(),
                "name": name,
                "description": body.get("description", ""),
                "region": f"{self.base}/projects/{project}/regions/{region}",
                "selfLink": link,
                "status": "READY",
            }
            policy.update({k: body[k] for k in kinds if body.get(k)})
            fake.resource_policies[(project, region, name)] = policy
            op = fake._new_op(project, f"regions/{region}", "insert", link, rid_)
            if rid:
                fake.request_ids[(project, rid)] = op
            if fault is not None and fault.kind == "drop":
                raise _DropConnection
            return 200, op.to_json(self.base)

    def _h_rp_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, region, name = p["project"], p["region"], p["name"]
        self._authorize(project, "compute.resourcePolicies.get")
        policy = self.fake.resource_policies.get((project, region, name))
        if policy is None:
            raise _not_found(f"projects/{project}/regions/{region}/resourcePolicies/{name}")
        return 200, policy

    def _h_rp_list(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, region = p["project"], p["region"]
        self._authorize(project, "compute.resourcePolicies.list")
        terms = parse_filter(q.get("filter", ""))
        with self.fake.lock:
            items = [
                r
                for (pp, rr, _), r in sorted(self.fake.resource_policies.items())
                if pp == project and rr == region and _matches(r, terms)
            ]
        return 200, self._page(f"projects/{project}/regions/{region}/resourcePolicies", items, q)

    def _h_rp_delete(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        fake, project, region, name = self.fake, p["project"], p["region"], p["name"]
        self._authorize(project, "compute.resourcePolicies.delete")
        with fake.lock:
            policy = fake.resource_policies.get((project, region, name))
            if policy is None:
                raise _not_found(f"projects/{project}/regions/{region}/resourcePolicies/{name}")
            # Any instance that still exists (one being deleted included) holds it.
            user = next(
                (i for i in fake.instances.values() if policy["selfLink"] in i["resourcePolicies"]),
                None,
            )
            if user is not None:
                raise HttpError(
                    400,
                    f"The resource_policy resource 'projects/{project}/regions/{region}/"
                    f"resourcePolicies/{name}' is already being used by '{user['selfLink']}'",
                    "resourceInUseByAnotherResource",
                )
            policy["status"] = "DELETING"
            op = fake._new_op(
                project, f"regions/{region}", "delete", policy["selfLink"], policy["id"]
            )

            def gone() -> None:
                if fake.resource_policies.get((project, region, name)) is policy:
                    del fake.resource_policies[(project, region, name)]

            op.on_done = gone
            return 200, op.to_json(self.base)

    # -- machine types, zones, regions, project --------------------------------------------

    def _machine_type(self, project: str, zone: str, t: MachineType) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "compute#machineType",
            "id": str(abs(hash(t.name)) % 10**12),
            "name": t.name,
            "description": f"{t.cpus} vCPUs, {t.memory_mb // 1024} GB RAM",
            "guestCpus": t.cpus,
            "memoryMb": t.memory_mb,
            "zone": zone,
            "isSharedCpu": False,
            "selfLink": f"{self.base}/projects/{project}/zones/{zone}/machineTypes/{t.name}",
        }
        if t.accelerators:
            body["accelerators"] = [
                {"guestAcceleratorType": t.accelerator, "guestAcceleratorCount": t.accelerators}
            ]
        return body

    def _h_mt_list(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, zone = p["project"], p["zone"]
        self._authorize(project, "compute.machineTypes.list")
        region = self._check_zone(project, zone)
        terms = parse_filter(q.get("filter", ""))
        items = [self._machine_type(project, zone, t) for t in self.fake.topology[region][zone]]
        items = [i for i in items if _matches(i, terms)]
        return 200, self._page(f"projects/{project}/zones/{zone}/machineTypes", items, q)

    def _h_mt_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, zone = p["project"], p["zone"]
        self._authorize(project, "compute.machineTypes.get")
        region = self._check_zone(project, zone)
        for t in self.fake.topology[region][zone]:
            if t.name == p["name"]:
                return 200, self._machine_type(project, zone, t)
        raise _not_found(f"projects/{project}/zones/{zone}/machineTypes/{p['name']}")

    def _h_mt_agg(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.machineTypes.list")
        terms = parse_filter(q.get("filter", ""))
        out: dict[str, Any] = {}
        for region, zones in self.fake.topology.items():
            del region
            for zone, types in zones.items():
                items = [self._machine_type(project, zone, t) for t in types]
                out[f"zones/{zone}"] = {"machineTypes": [i for i in items if _matches(i, terms)]}
        return 200, {"kind": "compute#machineTypeAggregatedList", "items": out}

    def _zone(self, project: str, zone: str) -> dict[str, Any]:
        region = self.fake.zone_region[zone]
        return {
            "kind": "compute#zone",
            "name": zone,
            "status": self.fake.zone_status.get(zone, "UP"),
            "region": f"{self.base}/projects/{project}/regions/{region}",
            "selfLink": f"{self.base}/projects/{project}/zones/{zone}",
        }

    def _h_zones_list(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.zones.list")
        items = [self._zone(project, z) for z in sorted(self.fake.zone_region)]
        return 200, self._page(f"projects/{project}/zones", items, q)

    def _h_zone_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, zone = p["project"], p["zone"]
        self._authorize(project, "compute.zones.get")
        if zone not in self.fake.zone_region:
            raise _not_found(f"projects/{project}/zones/{zone}")
        return 200, self._zone(project, zone)

    def _region(self, project: str, region: str) -> dict[str, Any]:
        fake = self.fake
        limits = fake.quota_limits.get((project, region), {})
        metrics = sorted(
            {t.quota_metric for z in fake.topology[region].values() for t in z if t.quota_metric}
            | set(limits)
        )
        quotas = [
            {
                "metric": m,
                "limit": float(limits.get(m, 1_000_000.0)),
                "usage": fake._usage(project, region, m),
            }
            for m in metrics
        ]
        return {
            "kind": "compute#region",
            "name": region,
            "status": "UP",
            "zones": [
                f"{self.base}/projects/{project}/zones/{z}" for z in sorted(fake.topology[region])
            ],
            "quotas": quotas,
            "selfLink": f"{self.base}/projects/{project}/regions/{region}",
        }

    def _h_regions_list(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.regions.list")
        items = [self._region(project, r) for r in sorted(self.fake.topology)]
        return 200, self._page(f"projects/{project}/regions", items, q)

    def _h_region_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project, region = p["project"], p["name"]
        self._authorize(project, "compute.regions.get")
        if region not in self.fake.topology:
            raise _not_found(f"projects/{project}/regions/{region}")
        return 200, self._region(project, region)

    def _h_project_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.projects.get")
        limit = self.fake.quota_limits.get((project, "global"), {}).get(
            "GPUS_ALL_REGIONS", 1_000_000.0
        )
        return 200, {
            "kind": "compute#project",
            "name": project,
            "id": str(abs(hash(project)) % 10**12),
            "quotas": [
                {
                    "metric": "GPUS_ALL_REGIONS",
                    "limit": float(limit),
                    "usage": self.fake._usage(project, "global", "GPUS_ALL_REGIONS"),
                }
            ],
            "selfLink": f"{self.base}/projects/{project}",
        }

    # -- images ---------------------------------------------------------------------------

    def _h_image_insert(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        fake, project = self.fake, p["project"]
        self._authorize(project, "compute.images.create")
        with fake.lock:
            rid = q.get("requestId", "")
            if rid and (project, rid) in fake.request_ids:
                return 200, fake.request_ids[(project, rid)].to_json(self.base)
            name = body.get("name", "")
            if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
                raise HttpError(
                    400, f"Invalid value for field 'resource.name': '{name}'.", "invalid"
                )
            if (project, name) in fake.images:
                raise HttpError(
                    409,
                    f"The resource 'projects/{project}/global/images/{name}' already exists",
                    "alreadyExists",
                )
            source = body.get("sourceDisk", "")
            m = re.search(r"zones/([^/]+)/disks/([^/]+)$", source)
            owner = None
            if m:
                owner = next(
                    (
                        i
                        for (pp, z, _), i in fake.instances.items()
                        if pp == project
                        and z == m[1]
                        and any(
                            d["source"].endswith(f"zones/{m[1]}/disks/{m[2]}") for d in i["disks"]
                        )
                    ),
                    None,
                )
            if owner is None:
                raise HttpError(
                    400,
                    f"Invalid value for field 'resource.sourceDisk': '{source}'. The referenced "
                    "source disk is not found.",
                    "invalid",
                )
            if owner["status"] == "RUNNING" and q.get("forceCreate") != "true":
                raise HttpError(
                    400,
                    f"The disk resource '{source}' is already being used by '{owner['selfLink']}'",
                    "resourceInUseByAnotherResource",
                )
            iid = str(next(fake._ids))
            link = f"{self.base}/projects/{project}/global/images/{name}"
            image = {
                "kind": "compute#image",
                "id": iid,
                "name": name,
                "family": body.get("family", ""),
                "labels": dict(body.get("labels") or {}),
                "sourceDisk": source,
                "status": "PENDING",
                "storageLocations": body.get("storageLocations") or ["us"],
                "creationTimestamp": _now_rfc3339(),
                "selfLink": link,
            }
            fake.images[(project, name)] = image
            op = fake._new_op(project, "global", "insert", link, iid)
            if rid:
                fake.request_ids[(project, rid)] = op
            op.on_done = lambda: image.update(status="READY")
            return 200, op.to_json(self.base)

    def _h_image_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.images.get")
        image = self.fake.images.get((project, p["name"]))
        if image is None:
            raise _not_found(f"projects/{project}/global/images/{p['name']}")
        return 200, image

    def _h_image_family(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.images.getFromFamily")
        found = [
            i
            for (pp, _), i in self.fake.images.items()
            if pp == project and i["family"] == p["name"] and i["status"] == "READY"
        ]
        if not found:
            raise _not_found(f"projects/{project}/global/images/family/{p['name']}")
        return 200, max(found, key=lambda i: int(i["id"]))

    def _h_image_list(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        project = p["project"]
        self._authorize(project, "compute.images.list")
        terms = parse_filter(q.get("filter", ""))
        items = [
            i
            for (pp, _), i in sorted(self.fake.images.items())
            if pp == project and _matches(i, terms)
        ]
        return 200, self._page(f"projects/{project}/global/images", items, q)

    def _h_image_delete(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        fake, project, name = self.fake, p["project"], p["name"]
        self._authorize(project, "compute.images.delete")
        with fake.lock:
            image = fake.images.get((project, name))
            if image is None:
                raise _not_found(f"projects/{project}/global/images/{name}")
            del fake.images[(project, name)]
            op = fake._new_op(project, "global", "delete", image["selfLink"], image["id"])
            return 200, op.to_json(self.base)

    # -- storage (JSON API) -----------------------------------------------------------------

    def _object_json(self, bucket: str, name: str, data: bytes) -> dict[str, Any]:
        return {
            "kind": "storage#object",
            "bucket": bucket,
            "name": name,
            "id": f"{bucket}/{name}/1",
            "size": str(len(data)),
            # base64 of the MD5 and of the big-endian CRC32C, as GCS gives them
            "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
            "crc32c": base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode(),
            "generation": "1",
            "selfLink": f"/storage/v1/b/{bucket}/o/{quote(name, safe='')}",
        }

    def _h_obj_list(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        bucket, prefix = p["bucket"], q.get("prefix", "")
        with self.fake.lock:
            items = [
                self._object_json(b, n, d)
                for (b, n), d in sorted(self.fake.objects.items())
                if b == bucket and n.startswith(prefix)
            ]
        page = self._page("", items, q)
        page["kind"] = "storage#objects"
        return 200, page

    def _h_obj_get(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        data = self.fake.get_object(p["bucket"], p["object"])
        if data is None:
            raise HttpError(404, f"No such object: {p['bucket']}/{p['object']}", "notFound")
        return 200, self._object_json(p["bucket"], p["object"], data)

    def _h_obj_delete(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        with self.fake.lock:
            if self.fake.objects.pop((p["bucket"], p["object"]), None) is None:
                raise HttpError(404, f"No such object: {p['bucket']}/{p['object']}", "notFound")
        return 204, None

    def _h_obj_rewrite(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        """objects.rewrite: server-side copy in chunks, resumed with ``rewriteToken``."""
        self._maybe_sync_fault(fault, p)
        fake = self.fake
        data = fake.get_object(p["bucket"], p["object"])
        if data is None:
            raise HttpError(404, f"No such object: {p['bucket']}/{p['object']}", "notFound")
        token = q.get("rewriteToken", "")
        done_bytes = int(token.split(":", 1)[0]) if token else 0
        chunk = int(q.get("maxBytesRewrittenPerCall") or fake.rewrite_chunk_bytes)
        chunk = max(chunk, fake.rewrite_chunk_bytes)
        done_bytes = min(len(data), done_bytes + chunk)
        resp: dict[str, Any] = {
            "kind": "storage#rewriteResponse",
            "totalBytesRewritten": str(done_bytes),
            "objectSize": str(len(data)),
            "done": done_bytes >= len(data),
        }
        if resp["done"]:
            fake.put_object(p["dbucket"], p["dobject"], data)
            resp["resource"] = self._object_json(p["dbucket"], p["dobject"], data)
        else:
            resp["rewriteToken"] = f"{done_bytes}:{secrets.token_hex(4)}"
        return 200, resp

    # -- IAM Credentials --------------------------------------------------------------------

    def _h_iam_token(self, p: dict, q: dict, body: dict, fault: Fault | None) -> tuple[int, Any]:
        self._maybe_sync_fault(fault, p)
        fake, sa = self.fake, p["sa"]
        caller = self._principal()
        with fake.lock:
            if sa not in fake.service_accounts:
                raise HttpError(
                    404,
                    f"Not found; Gaia id not found for email {sa}",
                    "notFound",
                    rpc_status="NOT_FOUND",
                )
            allowed = fake.service_accounts[sa]
            if allowed is not None and caller not in allowed:
                raise HttpError(
                    403,
                    "Permission 'iam.serviceAccounts.getAccessToken' denied on resource "
                    "(or it may not exist).",
                    "forbidden",
                    rpc_status="PERMISSION_DENIED",
                    details=[
                        {
                            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "IAM_PERMISSION_DENIED",
                            "domain": "iam.googleapis.com",
                            "metadata": {"permission": "iam.serviceAccounts.getAccessToken"},
                        }
                    ],
                )
            token = "ya29.fake-" + secrets.token_urlsafe(24)
            fake.tokens[token] = sa
        lifetime = int(str(body.get("lifetime", "3600s")).rstrip("s") or 3600)
        expire = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=lifetime)
        return 200, {"accessToken": token, "expireTime": expire.strftime("%Y-%m-%dT%H:%M:%SZ")}

    # -- paging ---------------------------------------------------------------------------

    def _page(self, scope: str, items: list[dict[str, Any]], q: dict[str, str]) -> dict[str, Any]:
        size = int(q.get("maxResults") or 500)
        start = int(q.get("pageToken") or 0)
        page = items[start : start + size]
        out: dict[str, Any] = {"items": page, "selfLink": f"{self.base}/{scope}"}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out


def start(**kwargs: Any) -> FakeGcp:
    """Start a fake on 127.0.0.1 (free port) in a daemon thread; ``stop()`` it when done."""
    return FakeGcp(**kwargs).start()
