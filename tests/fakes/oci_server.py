"""A wire-level fake of the OCI REST APIs gpucap uses, for tests driven through the real
``oci`` SDK clients (``service_endpoint`` pointed here; clouds.md §E.3, §E.4).

It speaks the real paths and bodies:

- Core Services (``/20160918``): instances (launch, get, list, terminate, the STOP /
  SOFTSTOP / START instance actions), images (create, get, list, delete), shapes, compute
  capacity reports, subnets;
- Identity (``/20160918/availabilityDomains``);
- Limits (``/20190729/limitValues``,
  ``/20190729/services/compute/limits/{name}/resourceAvailability``);
- Object Storage (``/n/{ns}/b/{bucket}/o/{object}``, ``/actions/copyObject``,
  ``/workRequests/{id}``).

JSON bodies are camelCase, every response carries ``opc-request-id``, errors are
``{"code": ..., "message": ...}`` with the status and codes of clouds.md §A.6.

What it enforces, as the real API does:
- **Request signing.** The ``keyId`` of the ``Authorization`` header names the tenancy; a
  tenancy registered with a public key must sign with it (RSA-SHA256 over the listed
  headers), otherwise 401 ``NotAuthenticated``.
- **Compartment access.** A tenancy sees its own compartments and the ones granted to it
  (cross-tenancy "Admit" policies, clouds.md §C); anything else is 404
  ``NotAuthorizedOrNotFound`` (OCI never says which of the two it is).
- **opc-retry-token.** The same token with the same body returns the original response and
  creates nothing; the same token with a different body is 409.
- **Host capacity.** Each (region, AD, shape) has a host count; launching past it is the real
  stockout, 500 ``InternalError`` "Out of host capacity.". A stopped instance gives its
  host back, so a START can meet the same stockout.
- **Service limits.** GPUs per AD per tenancy; launching past one is 400 ``LimitExceeded``.
- **Fault domains.** Three per AD; a launch's ``faultDomain`` is kept (an unknown one is 400
  ``InvalidParameter``), and a launch without one gets the AD's least used fault domain.

Region routing: the real service has one host per region. Tests point the SDK at
``{url}/{region}``; a path without a region prefix is served as ``default_region``.

Faults (stockout, quota, throttle, 5xx, auth), latency and a dropped response after a
successful launch can be injected per operation.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

API = "/20160918"
GPU_SHAPES = ("BM.GPU.H100.8", "BM.GPU.H200.8")
OTHER_SHAPES = ("VM.Standard.E5.Flex",)
REGION_KEYS = {
    "us-ashburn-1": "iad",
    "us-phoenix-1": "phx",
    "us-chicago-1": "ord",
    "eu-frankfurt-1": "fra",
    "uk-london-1": "lhr",
}

# Shape records as ListShapes returns them (clouds.md §A.1; OCI "Compute Shapes").
SHAPE_RECORDS: dict[str, dict[str, Any]] = {
    "BM.GPU.H100.8": {
        "shape": "BM.GPU.H100.8",
        "processorDescription": "4th Gen Intel Xeon",
        "ocpus": 112.0,
        "memoryInGBs": 2048.0,
        "gpus": 8,
        "gpuDescription": "NVIDIA H100 80GB",
        "localDisks": 16,
        "localDisksTotalSizeInGBs": 61440.0,
        "localDiskDescription": "3.84TB NVMe SSD",
        "networkingBandwidthInGbps": 100.0,
        "rdmaPorts": 16,
        "rdmaBandwidthInGbps": 200,
        "isBilledForStoppedInstance": False,
    },
    "BM.GPU.H200.8": {
        "shape": "BM.GPU.H200.8",
        "processorDescription": "4th Gen Intel Xeon",
        "ocpus": 112.0,
        "memoryInGBs": 3072.0,
        "gpus": 8,
        "gpuDescription": "NVIDIA H200 141GB",
        "localDisks": 8,
        "localDisksTotalSizeInGBs": 30720.0,
        "localDiskDescription": "3.84TB NVMe SSD",
        "networkingBandwidthInGbps": 200.0,
        "rdmaPorts": 8,
        "rdmaBandwidthInGbps": 400,
        "isBilledForStoppedInstance": False,
    },
    "VM.Standard.E5.Flex": {
        "shape": "VM.Standard.E5.Flex",
        "processorDescription": "4th Gen AMD EPYC",
        "ocpus": 1.0,
        "memoryInGBs": 12.0,
        "gpus": 0,
        "networkingBandwidthInGbps": 1.0,
        "isFlexible": True,
    },
}

CAPACITY_MESSAGE = "Out of host capacity."

# Service limits (Limits API, ``/20190729``), counted in GPUs per AD. The names follow OCI's
# "<family>-count" pattern but are this fake's: the reference does not record the real ones,
# which is why the adapter discovers GPU limits by listing them rather than naming them.
GPU_LIMITS = {"BM.GPU.H100.8": "gpu-h100-count", "BM.GPU.H200.8": "gpu-h200-count"}
DEFAULT_GPU_LIMIT = 4096  # generous: tests that need a limit set one

# Preset faults with the wire shapes of clouds.md §A.6 / §E.3.
PRESETS: dict[str, tuple[int, str, str]] = {
    "capacity": (500, "InternalError", CAPACITY_MESSAGE),
    "quota": (
        400,
        "LimitExceeded",
        "The following service limits were exceeded: gpu-h100-count. Request a service limit "
        "increase from the service limits page in the console.",
    ),
    "compartment_quota": (400, "QuotaExceeded", "Compartment quota exceeded: gpu-h100-count"),
    "throttle": (429, "TooManyRequests", "Too many requests for the user"),
    "transient": (503, "ServiceUnavailable", "The service is currently unavailable."),
    "internal": (500, "InternalServerError", "Internal server error."),
    "auth": (
        401,
        "NotAuthenticated",
        "The required information to complete authentication was not provided or was incorrect.",
    ),
    "not_authorized_or_not_found": (
        404,
        "NotAuthorizedOrNotFound",
        "Authorization failed or requested resource not found.",
    ),
    "invalid": (400, "InvalidParameter", "Invalid shape configuration."),
}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


@dataclass
class Fault:
    status: int
    code: str
    message: str
    operation: str
    remaining: int
    ad: str | None = None
    retry_after: int | None = None


@dataclass
class Tenancy:
    ocid: str
    namespace: str
    ad_prefix: str
    keys: dict[str, Any] = field(default_factory=dict)  # keyId -> RSA public key
    compartments: set[str] = field(default_factory=set)


@dataclass
class Logged:
    method: str
    operation: str
    region: str
    status: int
    tenancy: str | None
    headers: dict[str, str]
    body: bytes


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def resource_principal_token(
    tenancy: str, compartment: str, public_pem: str, *, ttl_s: int = 3600
) -> str:
    """A resource principal session token (RPST) as OCI's auth service would issue one: a JWT
    naming the resource's tenancy and compartment and carrying the session public key
    (``jwk``). The fake is its own issuer, so the JWT signature is a placeholder; requests
    signed with ``keyId="ST$<token>"`` are verified against the key in the token."""
    key = serialization.load_pem_public_key(public_pem.encode())
    assert isinstance(key, rsa.RSAPublicKey)
    numbers = key.public_numbers()
    now = int(time.time())
    jwk = {
        "kty": "RSA",
        "alg": "RS256",
        "use": "sig",
        "kid": "session",
        "n": _b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
        "e": _b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")),
    }
    header = {"alg": "RS256", "typ": "JWT", "kid": "fake-issuer"}
    payload = {
        "sub": f"ocid1.datasciencenotebooksession.oc1..{_short(compartment)}",
        "res_tenant": tenancy,
        "res_compartment": compartment,
        "res_type": "resource",
        "iat": now,
        "exp": now + ttl_s,
        "jwk": json.dumps(jwk),
    }
    parts = [_b64url(json.dumps(x).encode()) for x in (header, payload)]
    return ".".join([*parts, _b64url(b"fake-issuer-signature")])


def generate_key_pair(pass_phrase: str | None = None) -> tuple[str, str, str]:
    """A throwaway RSA key pair for request signing: (private PEM, public PEM, fingerprint).
    The fingerprint is OCI's: MD5 of the DER public key, colon-separated."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    enc: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(pass_phrase.encode())
        if pass_phrase
        else serialization.NoEncryption()
    )
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc
    ).decode()
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    digest = hashlib.md5(der).hexdigest()  # noqa: S324 - OCI's fingerprint format
    fingerprint = ":".join(digest[i : i + 2] for i in range(0, 32, 2))
    return private_pem, public_pem, fingerprint


class FakeOci:
    """The fake's state and controls; :meth:`start` serves it on 127.0.0.1 (free port)."""

    def __init__(
        self,
        *,
        regions: Iterable[str] = ("us-ashburn-1", "us-phoenix-1"),
        default_region: str = "us-ashburn-1",
        ads_per_region: int = 3,
        hosts_per_shape: int = 32,
    ) -> None:
        self.regions = tuple(regions)
        self.default_region = default_region
        self.ads_per_region = ads_per_region
        self.hosts_per_shape = hosts_per_shape
        self.latency_s = 0.0
        self.page_size = 100  # when the client sends no ``limit``
        self.default_tenancy: str | None = None  # who an unsigned (no keyId) request acts as
        self.log: list[Logged] = []
        self._lock = threading.RLock()
        self._tenancies: dict[str, Tenancy] = {}
        self._grants: set[tuple[str, str]] = set()  # (tenancy, compartment) cross-tenancy
        # (tenancy, region, "AD-n", limit name) -> GPUs allowed; absent = DEFAULT_GPU_LIMIT
        self._limits: dict[tuple[str, str, str, str], int] = {}
        self._instances: dict[str, dict[str, Any]] = {}
        self._images: dict[str, dict[str, Any]] = {}
        self._subnets: dict[str, dict[str, Any]] = {}
        self._vnics: dict[str, dict[str, Any]] = {}  # vnic id -> VNIC (private IP)
        self._vnic_attachments: dict[str, dict[str, Any]] = {}  # instance id -> attachment
        self._buckets: dict[tuple[str, str, str], str] = {}  # (region, ns, name) -> compartment
        self._objects: dict[tuple[str, str, str, str], bytes] = {}
        self._work_requests: dict[str, dict[str, Any]] = {}
        self._pending_copies: dict[str, Callable[[], None]] = {}
        self._tokens: dict[tuple[str, str, str, str], tuple[Any, int, Any, dict[str, str]]] = {}
        self._faults: list[Fault] = []
        self._drop: dict[str, list[int]] = {}  # operation -> requests to let through first
        # (region, AD name suffix "AD-n", shape) -> free hosts. Default: H100 in every AD,
        # H200 only in AD-1, so offerings have an unavailable (not offered) case.
        self._hosts: dict[tuple[str, str, str], int] = {}
        for region in self.regions:
            for n in range(1, ads_per_region + 1):
                self._hosts[(region, f"AD-{n}", "BM.GPU.H100.8")] = hosts_per_shape
                self._hosts[(region, f"AD-{n}", "VM.Standard.E5.Flex")] = 1000
                if n == 1:
                    self._hosts[(region, f"AD-{n}", "BM.GPU.H200.8")] = hosts_per_shape
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._seq = 0
        for region in self.regions:
            ensure_platform_image(self, region)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOci:
        fake = self

        class Handler(_Handler):
            state = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def endpoint_template(self) -> str:
        """What the adapter's ``endpoint_url`` should be: one "host" per region."""
        return self.url + "/{region}"

    # --- setup -----------------------------------------------------------------------------

    def add_tenancy(
        self,
        tenancy: str,
        *,
        compartments: Iterable[str] = (),
        key_id: str | None = None,
        public_key_pem: str | None = None,
        ad_prefix: str = "Uocm",
    ) -> None:
        """Register a tenancy, its compartments and (optionally) an uploaded API signing key
        (``key_id`` = "tenancy/user/fingerprint")."""
        with self._lock:
            t = self._tenancies.get(tenancy)
            if t is None:
                t = Tenancy(tenancy, namespace="ns" + _short(tenancy)[:10], ad_prefix=ad_prefix)
                self._tenancies[tenancy] = t
            t.compartments.update(compartments)
            t.compartments.add(tenancy)  # the root compartment is the tenancy itself
            if key_id and public_key_pem:
                t.keys[key_id] = serialization.load_pem_public_key(public_key_pem.encode())

    def grant(self, tenancy: str, compartment: str) -> None:
        """Cross-tenancy access: ``tenancy`` may manage resources in ``compartment``."""
        with self._lock:
            self._grants.add((tenancy, compartment))

    def namespace(self, tenancy: str) -> str:
        return self._tenancies[tenancy].namespace

    def ad_name(self, tenancy: str, region: str, n: int) -> str:
        prefix = self._tenancies[tenancy].ad_prefix
        # "Uocm:US-ASHBURN-AD-1": the prefix is per tenancy, the region loses its number.
        return f"{prefix}:{region.rsplit('-', 1)[0].upper()}-AD-{n}"

    def set_hosts(self, region: str, ad: str, shape: str, count: int) -> None:
        """Free host count for a shape in an AD (``ad`` "AD-n" or a full AD name)."""
        with self._lock:
            self._hosts[(region, _ad_suffix(ad), shape)] = count

    def set_limit(self, tenancy: str, region: str, ad: str, name: str, gpus: int) -> None:
        """A tenancy's service limit for ``name`` (e.g. "gpu-h100-count") in an AD."""
        with self._lock:
            self._limits[(tenancy, region, _ad_suffix(ad), name)] = gpus

    def _limit(self, tenancy: str, region: str, ad: str, name: str) -> int:
        return self._limits.get((tenancy, region, _ad_suffix(ad), name), DEFAULT_GPU_LIMIT)

    def _gpus_used(self, tenancy: str, region: str, ad: str, name: str) -> int:
        owned = self._tenancies[tenancy].compartments
        return sum(
            int(SHAPE_RECORDS[i["shape"]].get("gpus", 0))
            for i in self._instances.values()
            if i["compartmentId"] in owned
            and i["region"] == region
            and _ad_suffix(i["availabilityDomain"]) == _ad_suffix(ad)
            and GPU_LIMITS.get(i["shape"]) == name
            and i["lifecycleState"] not in ("TERMINATING", "TERMINATED")
        )

    def create_bucket(self, tenancy: str, region: str, name: str, compartment: str) -> None:
        with self._lock:
            self._buckets[(region, self.namespace(tenancy), name)] = compartment

    # --- faults ----------------------------------------------------------------------------

    def inject(
        self,
        fault: str,
        *,
        operation: str = "LaunchInstance",
        count: int = 1,
        ad: str | None = None,
        status: int | None = None,
        code: str | None = None,
        message: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Fail the next ``count`` requests of ``operation`` (in ``ad`` only, when given) with a
        preset fault (see :data:`PRESETS`) or an explicit status/code/message."""
        if fault in PRESETS:
            p_status, p_code, p_message = PRESETS[fault]
        elif status is None or code is None:
            raise ValueError(f"unknown fault {fault!r}; presets: {', '.join(PRESETS)}")
        else:
            p_status, p_code, p_message = status, code, message or code
        with self._lock:
            self._faults.append(
                Fault(
                    status if status is not None else p_status,
                    code or p_code,
                    message or p_message,
                    operation,
                    count,
                    ad=_ad_suffix(ad) if ad else None,
                    retry_after=retry_after,
                )
            )

    def drop_next_response(self, operation: str = "LaunchInstance", *, skip: int = 0) -> None:
        """After letting ``skip`` requests of ``operation`` through, the next one succeeds here
        but the connection is closed before the response is written (a crash or network
        loss after the cloud acted)."""
        with self._lock:
            self._drop.setdefault(operation, []).append(skip)

    def expire_retry_tokens(self) -> None:
        """What 24 hours do (clouds.md §A.5): every opc-retry-token is forgotten."""
        with self._lock:
            self._tokens.clear()

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._drop.clear()
            self.latency_s = 0.0

    # --- ground truth (read directly, never through the adapter) ---------------------------

    def instances(self) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(i) for i in self._instances.values()]

    def images(self) -> list[dict[str, Any]]:
        with self._lock:
            return [_public(copy.deepcopy(i)) for i in self._images.values()]

    def live_instances(self, **freeform_tags: str) -> list[dict[str, Any]]:
        return [
            i
            for i in self.instances()
            if i["lifecycleState"] not in ("TERMINATING", "TERMINATED")
            and all(i["freeformTags"].get(k) == v for k, v in freeform_tags.items())
        ]

    def live_instances_with_tag(self, key: str, value: str) -> list[dict[str, Any]]:
        return [
            i
            for i in self.instances()
            if i["lifecycleState"] not in ("TERMINATING", "TERMINATED")
            and i["freeformTags"].get(key) == value
        ]

    def put_object(self, region: str, namespace: str, bucket: str, name: str, data: bytes) -> None:
        with self._lock:
            self._objects[(region, namespace, bucket, name)] = data

    def get_object(self, region: str, namespace: str, bucket: str, name: str) -> bytes | None:
        with self._lock:
            return self._objects.get((region, namespace, bucket, name))

    def requests(self, operation: str | None = None) -> list[Logged]:
        with self._lock:
            return [r for r in self.log if operation is None or r.operation == operation]

    # --- internals used by the handler -----------------------------------------------------

    def _next_id(self, kind: str, region: str) -> str:
        with self._lock:
            self._seq += 1
            seq = self._seq
        key = REGION_KEYS.get(region, region)
        return f"ocid1.{kind}.oc1.{key}.fake{uuid.uuid4().hex[:20]}{seq:06d}"

    def _take_fault(self, operation: str, ad: str | None) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.operation != operation or f.remaining <= 0:
                    continue
                if f.ad is not None and (ad is None or _ad_suffix(ad) != f.ad):
                    continue
                f.remaining -= 1
                return f
            return None

    def _take_drop(self, operation: str) -> bool:
        with self._lock:
            queue = self._drop.get(operation)
            if not queue:
                return False
            if queue[0] > 0:
                queue[0] -= 1
                return False
            queue.pop(0)
            return True


def _ad_suffix(ad: str) -> str:
    m = re.search(r"AD-(\d+)$", ad)
    if not m:
        raise ValueError(f"not an availability domain: {ad!r}")
    return f"AD-{m.group(1)}"


_SIG_FIELD = re.compile(r'(\w+)="([^"]*)"')


@dataclass
class Request:
    method: str
    region: str
    path: str  # without the region prefix and the query
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    tenancy: str

    def json(self) -> Any:
        if not self.body:
            raise ApiError(400, "MissingParameter", "The request body is missing.")
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ApiError(400, "CannotParseRequest", f"Invalid JSON: {exc}") from None


Response = tuple[int, Any, dict[str, str]]  # status, JSON-able body (or bytes), headers


class _Handler(BaseHTTPRequestHandler):
    state: FakeOci
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle plus the client's
    # delayed ACK stalls every keep-alive response by ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # quiet: tests read ``FakeOci.log`` instead

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        fake = self.state
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        path = split.path
        region = fake.default_region
        m = re.match(r"^/([a-z]+-[a-z]+-\d+)(/.*)$", path)
        if m and m.group(1) in fake.regions:
            region, path = m.group(1), m.group(2)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        request_id = headers.get("opc-request-id") or uuid.uuid4().hex.upper()
        operation = "Unknown"
        tenancy: str | None = None
        status: int
        payload: Any
        extra: dict[str, str] = {}
        try:
            if fake.latency_s:
                time.sleep(fake.latency_s)
            route = _route(method, path)
            if route is None:
                raise ApiError(404, "NotFound", f"No route for {method} {path}")
            operation, handler, params = route
            tenancy = self._authenticate(headers, method, body)
            req = Request(method, region, path, query, headers, body, tenancy)
            status, payload, extra = handler(fake, req, **params)
            if fake._take_drop(operation):
                fake.log.append(Logged(method, operation, region, -1, tenancy, headers, body))
                self.close_connection = True
                return  # the cloud acted; the caller never hears about it
        except ApiError as err:
            status, payload, extra = (
                err.status,
                {"code": err.code, "message": err.message},
                err.headers,
            )
        with fake._lock:
            fake.log.append(Logged(method, operation, region, status, tenancy, headers, body))
        self._write(status, payload, {"opc-request-id": request_id, **extra}, method)

    def _write(self, status: int, payload: Any, headers: dict[str, str], method: str) -> None:
        if isinstance(payload, bytes):
            data, ctype = payload, "application/octet-stream"
        elif payload is None:
            data, ctype = b"", "application/json"
        else:
            data, ctype = json.dumps(payload).encode(), "application/json"
        self.send_response(status)
        self.send_header("content-type", headers.pop("content-type", ctype))
        self.send_header("content-length", str(len(data)))
        self.send_header("date", formatdate(usegmt=True))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if method != "HEAD" and data:
            self.wfile.write(data)

    def _authenticate(self, headers: dict[str, str], method: str, body: bytes) -> str:
        fake = self.state
        auth = headers.get("authorization", "")
        fields = dict(_SIG_FIELD.findall(auth))
        key_id = fields.get("keyId")
        if key_id is None:
            if fake.default_tenancy is None:
                raise ApiError(401, *PRESETS["auth"][1:])
            return fake.default_tenancy
        if key_id.startswith("ST$"):
            tenancy_ocid, public_key = _session_key(fake, key_id[3:])
        else:
            tenancy_ocid = key_id.split("/")[0]
            tenancy = fake._tenancies.get(tenancy_ocid)
            if tenancy is None or not tenancy.keys:
                raise ApiError(401, *PRESETS["auth"][1:])
            public_key = tenancy.keys.get(key_id)
            if public_key is None:
                raise ApiError(401, *PRESETS["auth"][1:])
        lines = []
        for name in fields.get("headers", "").split():
            if name == "(request-target)":
                lines.append(f"(request-target): {method.lower()} {self.path}")
            else:
                lines.append(f"{name}: {headers.get(name, '')}")
        if body and "x-content-sha256" in headers:
            digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
            if digest != headers["x-content-sha256"]:
                raise ApiError(401, "NotAuthenticated", "x-content-sha256 does not match body")
        try:
            public_key.verify(
                base64.b64decode(fields.get("signature", "")),
                "\n".join(lines).encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (InvalidSignature, ValueError):
            raise ApiError(401, "NotAuthenticated", "The request signature is invalid.") from None
        return tenancy_ocid


def _session_key(fake: FakeOci, token: str) -> tuple[str, Any]:
    """(tenancy, session public key) from a security token the fake issued."""
    try:
        claims = json.loads(_b64url_decode(token.split(".")[1]))
        jwk = json.loads(claims["jwk"])
        n = int.from_bytes(_b64url_decode(jwk["n"]), "big")
        e = int.from_bytes(_b64url_decode(jwk["e"]), "big")
        tenancy = str(claims["res_tenant"])
        expired = int(claims["exp"]) < time.time()
    except (IndexError, KeyError, ValueError, TypeError):
        raise ApiError(401, "NotAuthenticated", "The security token is malformed.") from None
    if expired or tenancy not in fake._tenancies:
        raise ApiError(401, "NotAuthenticated", "The security token is expired or unknown.")
    return tenancy, rsa.RSAPublicNumbers(e, n).public_key()


# --- routes -------------------------------------------------------------------------------

Handler = Callable[..., Response]
_ROUTES: list[tuple[str, re.Pattern[str], str, Handler]] = []


def route(method: str, pattern: str, operation: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        _ROUTES.append((method, re.compile(f"^{pattern}$"), operation, fn))
        return fn

    return deco


def _route(method: str, path: str) -> tuple[str, Handler, dict[str, str]] | None:
    for m, rx, op, fn in _ROUTES:
        if m != method and not (method == "HEAD" and m == "GET"):
            continue
        match = rx.match(path)
        if match:
            return op, fn, {k: unquote(v) for k, v in match.groupdict().items()}
    return None


def _check_compartment(fake: FakeOci, tenancy: str, compartment: str | None) -> None:
    if not compartment:
        raise ApiError(400, "MissingParameter", "compartmentId is required.")
    with fake._lock:
        own = fake._tenancies.get(tenancy)
        if own is not None and compartment in own.compartments:
            return
        if (tenancy, compartment) in fake._grants:
            return
    raise ApiError(*PRESETS["not_authorized_or_not_found"])


def _compartment_tenancy(fake: FakeOci, compartment: str) -> Tenancy:
    for t in fake._tenancies.values():
        if compartment in t.compartments:
            return t
    raise ApiError(*PRESETS["not_authorized_or_not_found"])


def _paginate(fake: FakeOci, items: list[Any], query: dict[str, str]) -> Response:
    limit = int(query.get("limit") or fake.page_size)
    start = int(query.get("page") or 0)
    page = items[start : start + limit]
    headers = {}
    if start + limit < len(items):
        headers["opc-next-page"] = str(start + limit)
    return 200, page, headers


def _fault(fake: FakeOci, operation: str, ad: str | None = None) -> None:
    f = fake._take_fault(operation, ad)
    if f is not None:
        headers = {"retry-after": str(f.retry_after)} if f.retry_after is not None else {}
        raise ApiError(f.status, f.code, f.message, headers)


def _idempotent(
    fake: FakeOci, req: Request, operation: str, act: Callable[[], Response]
) -> Response:
    """opc-retry-token semantics: a replay returns the first response; a different body with
    the same token is a 409."""
    token = req.headers.get("opc-retry-token")
    if not token:
        return act()
    key = (req.tenancy, req.region, operation, token)
    body = json.loads(req.body) if req.body else None
    with fake._lock:
        seen = fake._tokens.get(key)
        if seen is not None:
            old_body, status, payload, headers = seen
            if old_body != body:
                raise ApiError(
                    409,
                    "InvalidatedRetryToken",
                    "The retry token was already used for a different request.",
                )
            return status, copy.deepcopy(payload), dict(headers)
        status, payload, headers = act()
        fake._tokens[key] = (body, status, copy.deepcopy(payload), dict(headers))
        return status, payload, headers


def _public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if not k.startswith("_")}


# Identity ---------------------------------------------------------------------------------


@route("GET", f"{API}/availabilityDomains", "ListAvailabilityDomains")
def _list_ads(fake: FakeOci, req: Request) -> Response:
    comp = req.query.get("compartmentId")
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "ListAvailabilityDomains")
    owner = _compartment_tenancy(fake, comp or "")
    ads = [
        {
            "name": fake.ad_name(owner.ocid, req.region, n),
            "id": f"ocid1.availabilitydomain.oc1..{_short(owner.ocid + req.region)}{n}",
            "compartmentId": owner.ocid,
        }
        for n in range(1, fake.ads_per_region + 1)
    ]
    return 200, ads, {}


# Core: instances --------------------------------------------------------------------------


# Where each transitional lifecycle state is one read later.
_NEXT_STATE = {
    "PROVISIONING": "RUNNING",
    "STARTING": "RUNNING",
    "STOPPING": "STOPPED",
    "TERMINATING": "TERMINATED",
}
# States in which an instance does not hold a host (a stopped BM instance gives it back).
_HOSTLESS = frozenset({"STOPPING", "STOPPED", "TERMINATING", "TERMINATED"})


def _instance_view(fake: FakeOci, inst: dict[str, Any]) -> dict[str, Any]:
    """Reading an instance advances its lifecycle by one step, as time would."""
    with fake._lock:
        inst["lifecycleState"] = _NEXT_STATE.get(inst["lifecycleState"], inst["lifecycleState"])
        att = fake._vnic_attachments.get(inst["id"])
        if att is not None:
            if inst["lifecycleState"] == "RUNNING":
                att.update(lifecycleState="ATTACHED", vnicId=att["_vnic"])
            elif inst["lifecycleState"] in ("TERMINATING", "TERMINATED"):
                att["lifecycleState"] = "DETACHED"
        return _public(copy.deepcopy(inst))


@route("POST", f"{API}/instances", "LaunchInstance")
def _launch(fake: FakeOci, req: Request) -> Response:
    d = req.json()
    comp = d.get("compartmentId")
    _check_compartment(fake, req.tenancy, comp)
    ad = d.get("availabilityDomain")
    shape = d.get("shape")
    if not ad or not shape:
        raise ApiError(400, "MissingParameter", "availabilityDomain and shape are required.")
    _fault(fake, "LaunchInstance", ad)

    def act() -> Response:
        owner = _compartment_tenancy(fake, comp)
        valid_ads = {
            fake.ad_name(owner.ocid, req.region, n) for n in range(1, fake.ads_per_region + 1)
        }
        if ad not in valid_ads:
            raise ApiError(400, "InvalidParameter", f"Invalid availabilityDomain {ad!r}.")
        if shape not in SHAPE_RECORDS:
            raise ApiError(400, "InvalidParameter", f"Invalid shape {shape!r}.")
        fault_domain = d.get("faultDomain")
        if fault_domain is not None and fault_domain not in FAULT_DOMAINS:
            raise ApiError(400, "InvalidParameter", f"Invalid faultDomain {fault_domain!r}.")
        source = d.get("sourceDetails") or {}
        image_id = source.get("imageId") or d.get("imageId")
        image = fake._images.get(image_id or "")
        if image is None or image["lifecycleState"] != "AVAILABLE":
            raise ApiError(
                404, "RelatedResourceNotAuthorizedOrNotFound", f"Image {image_id} not found."
            )
        subnet_id = (d.get("createVnicDetails") or {}).get("subnetId") or d.get("subnetId")
        if subnet_id not in fake._subnets:
            raise ApiError(
                404, "RelatedResourceNotAuthorizedOrNotFound", f"Subnet {subnet_id} not found."
            )
        with fake._lock:
            key = (req.region, _ad_suffix(ad), shape)
            free = fake._hosts.get(key)
            if free is None:
                raise ApiError(
                    400,
                    "InvalidParameter",
                    f"Shape {shape} is not available in availability domain {ad}.",
                )
            limit_name = GPU_LIMITS.get(shape)
            if limit_name is not None:
                gpus = int(SHAPE_RECORDS[shape]["gpus"])
                used = fake._gpus_used(owner.ocid, req.region, ad, limit_name)
                if used + gpus > fake._limit(owner.ocid, req.region, ad, limit_name):
                    raise ApiError(
                        400,
                        "LimitExceeded",
                        f"The following service limits were exceeded: {limit_name}. Request a "
                        "service limit increase from the service limits page in the console.",
                    )
            if free <= 0:
                raise ApiError(500, "InternalError", CAPACITY_MESSAGE)
            fake._hosts[key] = free - 1
            # "If you do not specify the fault domain, the system selects one for you": here
            # the least used one of the AD, so unpinned launches spread as they would.
            fault_domain = fault_domain or min(
                FAULT_DOMAINS, key=lambda fd: _fault_domain_load(fake, comp, req.region, ad, fd)
            )
            iid = fake._next_id("instance", req.region)
            inst = {
                "id": iid,
                "compartmentId": comp,
                "availabilityDomain": ad,
                "faultDomain": fault_domain,
                "displayName": d.get("displayName") or iid,
                "shape": shape,
                "region": req.region,
                "imageId": image_id,
                "sourceDetails": source,
                "capacityReservationId": d.get("capacityReservationId"),
                "freeformTags": d.get("freeformTags") or {},
                "definedTags": d.get("definedTags") or {},
                "metadata": d.get("metadata") or {},
                "launchMode": "NATIVE",
                "lifecycleState": "PROVISIONING",
                "timeCreated": now_rfc3339(),
                "_subnet": subnet_id,
            }
            fake._instances[iid] = inst
            vnic_id = fake._next_id("vnic", req.region)
            n = len(fake._vnics)
            fake._vnics[vnic_id] = {
                "id": vnic_id,
                "compartmentId": comp,
                "availabilityDomain": ad,
                "subnetId": subnet_id,
                "privateIp": f"10.0.{n // 250}.{n % 250 + 2}",
                "isPrimary": True,
                "lifecycleState": "AVAILABLE",
            }
            fake._vnic_attachments[iid] = {
                "id": fake._next_id("vnicattachment", req.region),
                "instanceId": iid,
                "vnicId": None,  # OCI fills it in once attached (instance RUNNING)
                "_vnic": vnic_id,
                "compartmentId": comp,
                "availabilityDomain": ad,
                "subnetId": subnet_id,
                "lifecycleState": "ATTACHING",
                "timeCreated": inst["timeCreated"],
                "_region": req.region,
            }
        headers = {
            "opc-work-request-id": fake._next_id("coreservicesworkrequest", req.region),
            "etag": _short(iid),
        }
        return 200, _public(copy.deepcopy(inst)), headers

    return _idempotent(fake, req, "LaunchInstance", act)


# "Each availability domain contains three fault domains" (LaunchInstanceDetails.faultDomain).
FAULT_DOMAINS = ("FAULT-DOMAIN-1", "FAULT-DOMAIN-2", "FAULT-DOMAIN-3")


def _fault_domain_load(fake: FakeOci, comp: str, region: str, ad: str, fd: str) -> int:
    return sum(
        1
        for i in fake._instances.values()
        if i["compartmentId"] == comp
        and i["region"] == region
        and i["availabilityDomain"] == ad
        and i["faultDomain"] == fd
        and i["lifecycleState"] not in ("TERMINATING", "TERMINATED")
    )


def _get_instance_record(fake: FakeOci, req: Request, instance_id: str) -> dict[str, Any]:
    inst = fake._instances.get(instance_id)
    if inst is None or inst["region"] != req.region:
        raise ApiError(*PRESETS["not_authorized_or_not_found"])
    _check_compartment(fake, req.tenancy, inst["compartmentId"])
    return inst


@route("GET", f"{API}/instances/(?P<instance_id>[^/]+)", "GetInstance")
def _get_instance(fake: FakeOci, req: Request, instance_id: str) -> Response:
    _fault(fake, "GetInstance")
    return 200, _instance_view(fake, _get_instance_record(fake, req, instance_id)), {}


@route("GET", f"{API}/instances", "ListInstances")
def _list_instances(fake: FakeOci, req: Request) -> Response:
    comp = req.query.get("compartmentId")
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "ListInstances")
    with fake._lock:
        found = [
            _instance_view(fake, i)
            for i in fake._instances.values()
            if i["compartmentId"] == comp
            and i["region"] == req.region
            and req.query.get("availabilityDomain") in (None, i["availabilityDomain"])
            and req.query.get("displayName") in (None, i["displayName"])
        ]
    state = req.query.get("lifecycleState")
    if state:
        found = [i for i in found if i["lifecycleState"] == state]
    found.sort(key=lambda i: i["timeCreated"], reverse=True)
    return _paginate(fake, found, req.query)


@route("DELETE", f"{API}/instances/(?P<instance_id>[^/]+)", "TerminateInstance")
def _terminate(fake: FakeOci, req: Request, instance_id: str) -> Response:
    _fault(fake, "TerminateInstance")
    inst = _get_instance_record(fake, req, instance_id)
    with fake._lock:
        if inst["lifecycleState"] not in ("TERMINATING", "TERMINATED"):
            if inst["lifecycleState"] not in _HOSTLESS:  # (a stopped one gave it back already)
                key = (inst["region"], _ad_suffix(inst["availabilityDomain"]), inst["shape"])
                fake._hosts[key] = fake._hosts.get(key, 0) + 1
            inst["lifecycleState"] = "TERMINATING"
    return 204, None, {}


_POWER_ACTIONS = frozenset({"STOP", "SOFTSTOP", "START"})


@route("POST", f"{API}/instances/(?P<instance_id>[^/]+)", "InstanceAction")
def _instance_action(fake: FakeOci, req: Request, instance_id: str) -> Response:
    """InstanceAction (``POST /instances/{id}?action=``). STOP and SOFTSTOP take a RUNNING
    instance through STOPPING to STOPPED and give its host back; START takes a host again
    (STARTING, then RUNNING), or is 500 "Out of host capacity." when its AD has none free.
    Asking for the state the instance is in or heading to returns it unchanged (the adapter
    reads the state first, so it never relies on that); a transition the state does not
    allow (START while stopping, STOP while provisioning or starting, anything once
    terminating) is 409 ``IncorrectState``. Faults: operation ``InstanceAction`` (any
    action) or ``InstanceAction.<ACTION>``, in the instance's AD."""
    action = req.query.get("action", "")
    if action not in _POWER_ACTIONS:
        raise ApiError(400, "InvalidParameter", f"Unsupported instance action {action!r}.")
    inst = _get_instance_record(fake, req, instance_id)
    _fault(fake, f"InstanceAction.{action}", inst["availabilityDomain"])
    _fault(fake, "InstanceAction", inst["availabilityDomain"])

    def incorrect(state: str) -> ApiError:
        return ApiError(
            409, "IncorrectState", f"Instance {instance_id} is {state}: cannot {action} it."
        )

    def act() -> Response:
        with fake._lock:
            state = inst["lifecycleState"]
            key = (inst["region"], _ad_suffix(inst["availabilityDomain"]), inst["shape"])
            if action == "START":
                if state == "STOPPED":
                    free = fake._hosts.get(key, 0)
                    if free <= 0:
                        raise ApiError(500, "InternalError", CAPACITY_MESSAGE)
                    fake._hosts[key] = free - 1
                    inst["lifecycleState"] = "STARTING"
                elif state not in ("PROVISIONING", "STARTING", "RUNNING"):
                    raise incorrect(state)
            elif state == "RUNNING":
                fake._hosts[key] = fake._hosts.get(key, 0) + 1
                inst["lifecycleState"] = "STOPPING"
            elif state not in ("STOPPING", "STOPPED"):
                raise incorrect(state)
            view = _public(copy.deepcopy(inst))
        headers = {
            "opc-work-request-id": fake._next_id("coreservicesworkrequest", req.region),
            "etag": _short(instance_id + view["lifecycleState"]),
        }
        return 200, view, headers

    # A retry token names one action on one instance: the same token for another is a 409.
    what = json.dumps({"instanceId": instance_id, "action": action}).encode()
    return _idempotent(fake, replace(req, body=what), "InstanceAction", act)


# Core: shapes and capacity reports -------------------------------------------------------


@route("GET", f"{API}/shapes", "ListShapes")
def _list_shapes(fake: FakeOci, req: Request) -> Response:
    _check_compartment(fake, req.tenancy, req.query.get("compartmentId"))
    _fault(fake, "ListShapes")
    ad = req.query.get("availabilityDomain")
    with fake._lock:
        names = sorted(
            {
                s
                for (r, a, s) in fake._hosts
                if r == req.region and (ad is None or a == _ad_suffix(ad))
            }
        )
    return _paginate(fake, [SHAPE_RECORDS[n] for n in names], req.query)


@route("POST", f"{API}/computeCapacityReports", "CreateComputeCapacityReport")
def _capacity_report(fake: FakeOci, req: Request) -> Response:
    d = req.json()
    _check_compartment(fake, req.tenancy, d.get("compartmentId"))
    _fault(fake, "CreateComputeCapacityReport")
    ad = d.get("availabilityDomain") or ""
    out = []
    for item in d.get("shapeAvailabilities") or []:
        shape = item.get("instanceShape")
        with fake._lock:
            free = fake._hosts.get((req.region, _ad_suffix(ad), shape))
        if free is None:
            status, count = "HARDWARE_NOT_SUPPORTED", 0
        elif free <= 0:
            status, count = "OUT_OF_HOST_CAPACITY", 0
        else:
            status, count = "AVAILABLE", free
        out.append({"instanceShape": shape, "availableCount": count, "availabilityStatus": status})
    return (
        200,
        {
            "compartmentId": d.get("compartmentId"),
            "availabilityDomain": ad,
            "shapeAvailabilities": out,
            "timeCreated": now_rfc3339(),
        },
        {},
    )


# Core: images ------------------------------------------------------------------------------


def ensure_platform_image(fake: FakeOci, region: str) -> dict[str, Any]:
    """The Oracle Linux GPU platform image every region publishes (compartmentId null)."""
    with fake._lock:
        for img in fake._images.values():
            if img["compartmentId"] is None and img["_region"] == region:
                return img
        iid = f"ocid1.image.oc1.{REGION_KEYS.get(region, region)}.platformgpu{_short(region)}"
        img = {
            "id": iid,
            "compartmentId": None,
            "displayName": "Oracle-Linux-8.10-Gen2-GPU-2026.10.15-0",
            "operatingSystem": "Oracle Linux",
            "operatingSystemVersion": "8",
            "baseImageId": None,
            "createImageAllowed": True,
            "launchMode": "NATIVE",
            "lifecycleState": "AVAILABLE",
            "sizeInMBs": 51200,
            "timeCreated": "2026-10-15T00:00:00.000Z",
            "freeformTags": {},
            "_region": region,
        }
        fake._images[iid] = img
        return img


@route("GET", f"{API}/images", "ListImages")
def _list_images(fake: FakeOci, req: Request) -> Response:
    comp = req.query.get("compartmentId")
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "ListImages")
    ensure_platform_image(fake, req.region)
    q = req.query
    with fake._lock:
        found = [
            _public(copy.deepcopy(i))
            for i in fake._images.values()
            if i["_region"] == req.region
            and i["compartmentId"] in (None, comp)
            and q.get("operatingSystem") in (None, i["operatingSystem"])
            and q.get("displayName") in (None, i["displayName"])
            and q.get("lifecycleState") in (None, i["lifecycleState"])
            and i["lifecycleState"] != "DELETED"
        ]
    found.sort(key=lambda i: i["timeCreated"], reverse=q.get("sortOrder", "DESC") == "DESC")
    return _paginate(fake, found, q)


@route("POST", f"{API}/images", "CreateImage")
def _create_image(fake: FakeOci, req: Request) -> Response:
    d = req.json()
    comp = d.get("compartmentId")
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "CreateImage")

    def act() -> Response:
        src = _get_instance_record(fake, req, d.get("instanceId") or "")
        if src["lifecycleState"] in ("TERMINATING", "TERMINATED"):
            raise ApiError(409, "IncorrectState", "The instance is terminated.")
        iid = fake._next_id("image", req.region)
        img = {
            "id": iid,
            "compartmentId": comp,
            "displayName": d.get("displayName") or iid,
            "operatingSystem": "Oracle Linux",
            "operatingSystemVersion": "8",
            "baseImageId": src["imageId"],
            "createImageAllowed": True,
            "launchMode": "NATIVE",
            "lifecycleState": "PROVISIONING",
            "sizeInMBs": 51200,
            "timeCreated": now_rfc3339(),
            "freeformTags": d.get("freeformTags") or {},
            "_region": req.region,
        }
        with fake._lock:
            fake._images[iid] = img
        return (
            200,
            _public(copy.deepcopy(img)),
            {"opc-work-request-id": fake._next_id("coreservicesworkrequest", req.region)},
        )

    return _idempotent(fake, req, "CreateImage", act)


def _get_image_record(fake: FakeOci, req: Request, image_id: str) -> dict[str, Any]:
    img = fake._images.get(image_id)
    if img is None or img["_region"] != req.region:
        raise ApiError(*PRESETS["not_authorized_or_not_found"])
    if img["compartmentId"] is not None:
        _check_compartment(fake, req.tenancy, img["compartmentId"])
    return img


@route("GET", f"{API}/images/(?P<image_id>[^/]+)", "GetImage")
def _get_image(fake: FakeOci, req: Request, image_id: str) -> Response:
    _fault(fake, "GetImage")
    img = _get_image_record(fake, req, image_id)
    with fake._lock:
        if img["lifecycleState"] == "PROVISIONING":
            img["lifecycleState"] = "AVAILABLE"
        return 200, _public(copy.deepcopy(img)), {}


@route("DELETE", f"{API}/images/(?P<image_id>[^/]+)", "DeleteImage")
def _delete_image(fake: FakeOci, req: Request, image_id: str) -> Response:
    _fault(fake, "DeleteImage")
    img = _get_image_record(fake, req, image_id)
    with fake._lock:
        if img["compartmentId"] is None:
            raise ApiError(*PRESETS["not_authorized_or_not_found"])  # platform images
        if img["lifecycleState"] == "DELETED":
            raise ApiError(*PRESETS["not_authorized_or_not_found"])
        img["lifecycleState"] = "DELETED"
    return 204, None, {}


# Virtual network: subnets -------------------------------------------------------------------


@route("GET", f"{API}/subnets", "ListSubnets")
def _list_subnets(fake: FakeOci, req: Request) -> Response:
    comp = req.query.get("compartmentId") or ""
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "ListSubnets")
    with fake._lock:
        found = [
            s
            for s in fake._subnets.values()
            if s["compartmentId"] == comp and s["_region"] == req.region
        ]
        if not found:  # every compartment gets a regional private subnet, as a VCN wizard would
            sid = f"ocid1.subnet.oc1.{REGION_KEYS.get(req.region, req.region)}.{_short(comp)}"
            sub = {
                "id": sid,
                "compartmentId": comp,
                "vcnId": sid.replace("subnet", "vcn"),
                "availabilityDomain": None,
                "cidrBlock": "10.0.0.0/16",
                "displayName": "gpucap-private",
                "lifecycleState": "AVAILABLE",
                "prohibitPublicIpOnVnic": True,
                "freeformTags": {"gpucap-subnet": "true"},
                "_region": req.region,
            }
            fake._subnets[sid] = sub
            found = [sub]
        return _paginate(fake, [_public(s) for s in found], req.query)


# Object Storage ----------------------------------------------------------------------------


@route("GET", "/n/?", "GetNamespace")
def _get_namespace(fake: FakeOci, req: Request) -> Response:
    return 200, fake.namespace(req.tenancy), {}


def _check_bucket(fake: FakeOci, req: Request, region: str, ns: str, bucket: str) -> None:
    with fake._lock:
        comp = fake._buckets.get((region, ns, bucket))
    if comp is None:
        raise ApiError(
            404,
            "BucketNotFound",
            f"Either the bucket named '{bucket}' does not exist "
            f"in the namespace '{ns}' or you are not authorized to access it",
        )
    _check_compartment(fake, req.tenancy, comp)


@route("PUT", "/n/(?P<ns>[^/]+)/b/(?P<bucket>[^/]+)/o/(?P<name>.+)", "PutObject")
def _put_object(fake: FakeOci, req: Request, ns: str, bucket: str, name: str) -> Response:
    _check_bucket(fake, req, req.region, ns, bucket)
    fake.put_object(req.region, ns, bucket, name, req.body)
    return 200, None, {"etag": _short(name + str(len(req.body)))}


def _md5(data: bytes) -> str:
    """Object Storage's content-md5 (and a listing's ``md5``): base64 of the MD5."""
    return base64.b64encode(hashlib.md5(data).digest()).decode()


@route("GET", "/n/(?P<ns>[^/]+)/b/(?P<bucket>[^/]+)/o", "ListObjects")
def _list_objects(fake: FakeOci, req: Request, ns: str, bucket: str) -> Response:
    _check_bucket(fake, req, req.region, ns, bucket)
    prefix = req.query.get("prefix") or ""
    with fake._lock:
        found = sorted(
            (n, d)
            for (r, s, b, n), d in fake._objects.items()
            if (r, s, b) == (req.region, ns, bucket) and n.startswith(prefix)
        )
    start = req.query.get("start") or ""
    limit = int(req.query.get("limit") or 1000)
    page = [(n, d) for n, d in found if n >= start][:limit]
    body: dict[str, Any] = {
        "objects": [{"name": n, "size": len(d), "md5": _md5(d)} for n, d in page]
    }
    rest = [n for n, _ in found if n >= start][limit:]
    if rest:
        body["nextStartWith"] = rest[0]
    return 200, body, {}


@route("GET", "/n/(?P<ns>[^/]+)/b/(?P<bucket>[^/]+)/o/(?P<name>.+)", "GetObject")
def _get_object(fake: FakeOci, req: Request, ns: str, bucket: str, name: str) -> Response:
    _check_bucket(fake, req, req.region, ns, bucket)
    data = fake.get_object(req.region, ns, bucket, name)
    if data is None:
        raise ApiError(
            404, "ObjectNotFound", f"The object '{name}' was not found in the bucket '{bucket}'"
        )
    return 200, data, {"etag": _short(name + str(len(data))), "content-md5": _md5(data)}


@route("DELETE", "/n/(?P<ns>[^/]+)/b/(?P<bucket>[^/]+)/o/(?P<name>.+)", "DeleteObject")
def _delete_object(fake: FakeOci, req: Request, ns: str, bucket: str, name: str) -> Response:
    _check_bucket(fake, req, req.region, ns, bucket)
    with fake._lock:
        if fake._objects.pop((req.region, ns, bucket, name), None) is None:
            raise ApiError(
                404, "ObjectNotFound", f"The object '{name}' was not found in the bucket '{bucket}'"
            )
    return 204, None, {}


@route("POST", "/n/(?P<ns>[^/]+)/b/(?P<bucket>[^/]+)/actions/copyObject", "CopyObject")
def _copy_object(fake: FakeOci, req: Request, ns: str, bucket: str) -> Response:
    d = req.json()
    _check_bucket(fake, req, req.region, ns, bucket)
    _fault(fake, "CopyObject")
    src_name = d.get("sourceObjectName") or ""
    data = fake.get_object(req.region, ns, bucket, src_name)
    if data is None:
        raise ApiError(
            404, "ObjectNotFound", f"The object '{src_name}' was not found in the bucket '{bucket}'"
        )
    dst_region = d.get("destinationRegion") or req.region
    dst = (
        dst_region,
        d.get("destinationNamespace") or ns,
        d.get("destinationBucket") or "",
        d.get("destinationObjectName") or src_name,
    )
    _check_bucket(fake, req, dst[0], dst[1], dst[2])
    wid = fake._next_id("objectstorageworkrequest", req.region)
    record = {
        "id": wid,
        "operationType": "COPY_OBJECT",
        "status": "ACCEPTED",
        "compartmentId": fake._buckets[(req.region, ns, bucket)],
        "percentComplete": 0.0,
        "timeAccepted": now_rfc3339(),
        "resources": [
            {
                "actionType": "WRITTEN",
                "entityType": "object",
                "namespaceName": dst[1],
                "bucketName": dst[2],
                "objectName": dst[3],
                "region": dst[0],
            }
        ],
    }
    with fake._lock:
        fake._work_requests[wid] = record
        # The server copies asynchronously; it is done by the time the work request is read.
        fake._pending_copies[wid] = lambda: fake.put_object(*dst, data)
    return 202, None, {"opc-work-request-id": wid}


@route("GET", "/workRequests/(?P<work_request_id>[^/]+)", "GetWorkRequest")
def _get_work_request(fake: FakeOci, req: Request, work_request_id: str) -> Response:
    with fake._lock:
        record = fake._work_requests.get(work_request_id)
        if record is None:
            raise ApiError(*PRESETS["not_authorized_or_not_found"])
        _check_compartment(fake, req.tenancy, record["compartmentId"])
        pending = fake._pending_copies.pop(work_request_id, None)
        if pending is not None:
            pending()
            record.update(
                status="COMPLETED",
                percentComplete=100.0,
                timeStarted=now_rfc3339(),
                timeFinished=now_rfc3339(),
            )
        return 200, copy.deepcopy(record), {}


# Limits ------------------------------------------------------------------------------------


@route("GET", "/20190729/limitValues", "ListLimitValues")
def _list_limit_values(fake: FakeOci, req: Request) -> Response:
    comp = req.query.get("compartmentId") or ""
    if comp not in fake._tenancies:
        raise ApiError(400, "InvalidParameter", "compartmentId must be a tenancy (root) OCID.")
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "ListLimitValues")
    if req.query.get("serviceName") != "compute":
        return _paginate(fake, [], req.query)
    ad_filter = req.query.get("availabilityDomain")
    items = [
        {
            "name": name,
            "scopeType": "AD",
            "availabilityDomain": fake.ad_name(comp, req.region, n),
            "value": fake._limit(comp, req.region, f"AD-{n}", name),
        }
        for name in sorted(set(GPU_LIMITS.values()))
        for n in range(1, fake.ads_per_region + 1)
        if req.query.get("name") in (None, name)
        and ad_filter in (None, fake.ad_name(comp, req.region, n))
    ]
    return _paginate(fake, items, req.query)


@route(
    "GET",
    "/20190729/services/(?P<service>[^/]+)/limits/(?P<limit>[^/]+)/resourceAvailability",
    "GetResourceAvailability",
)
def _resource_availability(fake: FakeOci, req: Request, service: str, limit: str) -> Response:
    comp = req.query.get("compartmentId") or ""
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "GetResourceAvailability")
    ad = req.query.get("availabilityDomain")
    if service != "compute" or limit not in GPU_LIMITS.values() or not ad:
        raise ApiError(400, "InvalidParameter", f"Unknown limit {service}/{limit} or no AD.")
    owner = _compartment_tenancy(fake, comp)
    with fake._lock:
        value = fake._limit(owner.ocid, req.region, ad, limit)
        used = fake._gpus_used(owner.ocid, req.region, ad, limit)
    return (
        200,
        {
            "used": used,
            "available": max(0, value - used),
            "fractionalUsage": float(used),
            "fractionalAvailability": float(max(0, value - used)),
            "effectiveQuotaValue": float(value),
        },
        {},
    )


# Core: VNIC attachments and VNICs (where an instance's private IP lives) -------------------


@route("GET", f"{API}/vnicAttachments", "ListVnicAttachments")
def _list_vnic_attachments(fake: FakeOci, req: Request) -> Response:
    comp = req.query.get("compartmentId")
    _check_compartment(fake, req.tenancy, comp)
    _fault(fake, "ListVnicAttachments")
    q = req.query
    with fake._lock:
        found = [
            _public(copy.deepcopy(a))
            for a in fake._vnic_attachments.values()
            if a["compartmentId"] == comp
            and a["_region"] == req.region
            and q.get("instanceId") in (None, a["instanceId"])
            and q.get("availabilityDomain") in (None, a["availabilityDomain"])
        ]
    return _paginate(fake, found, q)


@route("GET", f"{API}/privateIps", "ListPrivateIps")
def _list_private_ips(fake: FakeOci, req: Request) -> Response:
    """Only the filters the real API takes: a subnet, a VNIC, or an address in a subnet."""
    q = req.query
    subnet, vnic_id, address = q.get("subnetId"), q.get("vnicId"), q.get("ipAddress")
    if not (subnet or vnic_id) or (address and not subnet):
        raise ApiError(400, "InvalidParameter", "give subnetId, vnicId, or ipAddress with subnetId")
    _fault(fake, "ListPrivateIps")
    with fake._lock:
        found = []
        for vid, v in sorted(fake._vnics.items()):
            if subnet not in (None, v["subnetId"]) or vnic_id not in (None, vid):
                continue
            if address not in (None, v["privateIp"]):
                continue
            _check_compartment(fake, req.tenancy, v["compartmentId"])
            found.append(
                {
                    "id": vid.replace("vnic", "privateip", 1),
                    "vnicId": vid,
                    "subnetId": v["subnetId"],
                    "ipAddress": v["privateIp"],
                    "isPrimary": v["isPrimary"],
                    "compartmentId": v["compartmentId"],
                    "availabilityDomain": v["availabilityDomain"],
                    "timeCreated": v.get("timeCreated", now_rfc3339()),
                }
            )
    return _paginate(fake, found, q)


@route("GET", f"{API}/vnics/(?P<vnic_id>[^/]+)", "GetVnic")
def _get_vnic(fake: FakeOci, req: Request, vnic_id: str) -> Response:
    _fault(fake, "GetVnic")
    with fake._lock:
        vnic = fake._vnics.get(vnic_id)
        if vnic is None:
            raise ApiError(*PRESETS["not_authorized_or_not_found"])
        _check_compartment(fake, req.tenancy, vnic["compartmentId"])
        return 200, copy.deepcopy(vnic), {}
