"""moto in server mode behind a fault-injecting HTTP proxy, for the AWS adapter's tests.

moto keeps the state (instances, tags, AMIs, S3, STS and per-account isolation through
assumed roles; clouds.md §E.1) but never produces capacity, limit or throttling errors. The
proxy in front of it serves those as real EC2 XML error responses with the real HTTP status
(clouds.md §A.6), so the *real* botocore client parses them and applies its own retry rules
(a 500 ``InsufficientInstanceCapacity`` is retried by botocore unless the client turns
retries off, exactly as against AWS). It can also let a request through and then drop the
connection before the response, to simulate a crash after the cloud accepted a create.

moto 5.2.5 has no placement groups (CreatePlacementGroup and the rest are not implemented,
and RunInstances drops ``Placement.GroupName``), so the proxy plays them too:
:class:`PlacementGroups`.

No SDK internals are touched: clients are pointed at the proxy with ``endpoint_url``.
Both servers listen on 127.0.0.1 on ports chosen by the OS, and stop with the session.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import threading
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode
from xml.sax.saxutils import escape

import pytest

_ISSUED = re.compile(r"<(?:SecretAccessKey|SessionToken)>([^<]+)</")

# Hop-by-hop headers a proxy must not forward (RFC 9110 §7.6.1).
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}

# Fault -> (EC2 error code, HTTP status), from clouds.md §A.6.
HARNESS_FAULTS: dict[str, tuple[str, int]] = {
    "capacity": ("InsufficientInstanceCapacity", 500),
    "quota": ("VcpuLimitExceeded", 400),
    "throttle": ("RequestLimitExceeded", 503),
    "transient": ("InternalError", 500),
    "auth": ("AuthFailure", 401),
}


@dataclass
class FaultRule:
    action: str  # AWS query Action, e.g. "RunInstances"
    code: str = ""
    status: int = 500
    message: str = ""
    remaining: int = 1
    zone: str | None = None  # only requests naming this AZ
    drop_response: bool = False  # forward, then drop the connection instead of answering
    body: bytes | None = None  # a canned JSON answer (status ``status``) for what moto lacks
    corrupt: bool = False  # forward, then answer with the first byte of the body flipped


@dataclass
class FaultInjector:
    rules: list[FaultRule] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)  # requests per Action on the wire
    lock: threading.Lock = field(default_factory=threading.Lock)
    # moto's STS assumes any role with any ExternalId (clouds.md §E.1). The proxy plays the
    # customer's trust policy: role ARN -> the ExternalId its condition requires.
    trust: dict[str, str] = field(default_factory=dict)
    assume_role_calls: list[dict[str, str]] = field(default_factory=list)  # no secrets in it
    # The last request body per Action, for fields moto accepts but ignores (e.g. a
    # capacity reservation target). Query forms carry no credentials (those are headers).
    last_form: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # Secret values the emulator handed out (assumed-role keys and tokens), so the hygiene
    # tests can grep logs and the database for them.
    issued_secrets: list[str] = field(default_factory=list)

    def add(self, rule: FaultRule) -> None:
        with self.lock:
            self.rules.append(rule)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.seen.clear()
            self.trust.clear()
            self.assume_role_calls.clear()
            self.issued_secrets.clear()
            self.last_form.clear()

    def check_trust(self, form: dict[str, list[str]]) -> FaultRule | None:
        call = {k: form.get(k, [""])[0] for k in ("RoleArn", "RoleSessionName", "ExternalId")}
        with self.lock:
            self.assume_role_calls.append(call)
            wanted = self.trust.get(call["RoleArn"])
        if wanted is not None and call["ExternalId"] != wanted:
            return FaultRule(
                "AssumeRole",
                "AccessDenied",
                403,
                f"User is not authorized to perform: sts:AssumeRole on resource: {call['RoleArn']}",
            )
        return None

    def pending(self) -> int:
        with self.lock:
            return sum(r.remaining for r in self.rules)

    def take(self, action: str, zone: str | None) -> FaultRule | None:
        with self.lock:
            self.seen[action] += 1
            for rule in self.rules:
                if rule.action == action and (rule.zone is None or rule.zone == zone):
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self.rules.remove(rule)
                    return rule
            return None


def ec2_error_body(code: str, message: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        f"</Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()


def query_error_body(code: str, message: str, status: int) -> bytes:
    """STS / IAM (query protocol, non-EC2) error shape."""
    kind = "Sender" if status < 500 else "Receiver"
    return (
        f"<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code>"
        f"<Message>{message}</Message></Error><RequestId>{uuid.uuid4()}</RequestId>"
        "</ErrorResponse>"
    ).encode()


def s3_error_body(code: str, message: str) -> bytes:
    """S3's REST error shape."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<RequestId>{uuid.uuid4().hex[:16]}</RequestId></Error>"
    ).encode()


def s3_action(method: str, path: str, headers: Any) -> str:
    """The S3 operation a REST request is (S3 names none on the wire): what fault rules
    for S3 match on, e.g. ``UploadPartCopy`` or ``CompleteMultipartUpload``."""
    query = parse_qs(path.partition("?")[2], keep_blank_values=True)
    has_key = "/" in path.partition("?")[0].strip("/")
    copy = bool(headers.get("x-amz-copy-source"))
    if method == "PUT":
        if "partNumber" in query:
            return "UploadPartCopy" if copy else "UploadPart"
        if not has_key:
            return "CreateBucket"
        return "CopyObject" if copy else "PutObject"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
        return "DeleteObjects" if "delete" in query else "PostObject"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if "uploadId" in query:
        return "ListParts"
    if "uploads" in query:
        return "ListMultipartUploads"
    return "GetObject" if has_key else "ListObjectsV2"


S3_ACTIONS = frozenset(
    {
        "UploadPartCopy",
        "UploadPart",
        "CreateBucket",
        "CopyObject",
        "PutObject",
        "CreateMultipartUpload",
        "CompleteMultipartUpload",
        "DeleteObjects",
        "PostObject",
        "AbortMultipartUpload",
        "DeleteObject",
        "HeadObject",
        "HeadBucket",
        "ListParts",
        "ListMultipartUploads",
        "GetObject",
        "ListObjectsV2",
    }
)

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
PLACEMENT_ACTIONS = frozenset(
    {"CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup"}
)
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([a-z0-9-]+)/")
_ASSUMED_KEY = re.compile(r"<AccessKeyId>([^<]+)</AccessKeyId>")
_ASSUMED_ACCOUNT = re.compile(r"<Arn>arn:aws:sts::(\d{12}):assumed-role/")
GroupKey = tuple[str, str, str]  # (account, region, group name)


class PlacementError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class PlacementGroups:
    """EC2 placement groups, which moto 5.2.5 lacks, kept by the proxy per account and region.

    The three placement-group actions are answered here with EC2's XML shapes and codes (EC2
    API reference, CreatePlacementGroup / DescribePlacementGroups / DeletePlacementGroup and
    "Error codes"): a taken name is ``InvalidPlacementGroup.Duplicate``, an unknown one
    ``InvalidPlacementGroup.Unknown`` (also for RunInstances into it), and a group with
    instances that are not terminated ``InvalidPlacementGroup.InUse`` (their state is asked
    of moto). RunInstances into a group is forwarded to moto and the new instances recorded,
    and every ``placement/groupName`` in moto's RunInstances and DescribeInstances answers is
    filled in from that record, so the SDK reads ``Placement.GroupName`` as EC2 reports it.

    The account is moto's: the default one for gpucap's own keys, the role's for keys an
    AssumeRole handed out (the proxy reads them from the answers it forwards)."""

    groups: dict[GroupKey, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, GroupKey] = field(default_factory=dict)  # instance id -> its group
    accounts: dict[str, str] = field(default_factory=dict)  # assumed-role key -> account
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self.lock:
            self.groups.clear()
            self.members.clear()
            self.accounts.clear()

    def learn_assumed_role(self, payload: str) -> None:
        key, account = _ASSUMED_KEY.search(payload), _ASSUMED_ACCOUNT.search(payload)
        if key and account:
            with self.lock:
                self.accounts[key[1]] = account[1]

    def caller(self, authorization: str) -> tuple[str, str]:
        """(account, region) of a SigV4-signed request."""
        m = _CREDENTIAL.search(authorization)
        key, region = (m[1], m[2]) if m else ("", "us-east-1")
        with self.lock:
            return self.accounts.get(key, DEFAULT_ACCOUNT_ID), region

    def handle(
        self,
        action: str,
        form: dict[str, list[str]],
        caller: tuple[str, str],
        states: Any,  # Callable[[list[str]], dict[str, str]]: instance id -> moto's state
    ) -> bytes:
        """The XML answer to one placement-group action; raises PlacementError."""
        account, region = caller
        one = {k: v[0] for k, v in form.items()}
        with self.lock:
            if action == "CreatePlacementGroup":
                inner = self._create(account, region, one)
            elif action == "DescribePlacementGroups":
                inner = self._describe(account, region, one)
            else:
                name = one.get("GroupName", "")
                key = (account, region, name)
                if key not in self.groups:
                    raise PlacementError(
                        "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."
                    )
                ids = [i for i, k in self.members.items() if k == key]
                live = [i for i, st in states(ids).items() if st != "terminated"] if ids else []
                if live:
                    raise PlacementError(
                        "InvalidPlacementGroup.InUse",
                        f"The placement group '{name}' is in use and may not be deleted.",
                    )
                del self.groups[key]
                for i in ids:
                    del self.members[i]
                inner = "<return>true</return>"
        return (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{EC2_NS}">'
            f"<requestId>{uuid.uuid4()}</requestId>{inner}</{action}Response>"
        ).encode()

    def _create(self, account: str, region: str, one: dict[str, str]) -> str:
        name, strategy = one.get("GroupName", ""), one.get("Strategy", "")
        if not name:
            raise PlacementError("MissingParameter", "The request must contain GroupName")
        if strategy not in ("cluster", "spread", "partition"):
            raise PlacementError("InvalidParameterValue", f"Invalid strategy: '{strategy}'")
        if (account, region, name) in self.groups:
            raise PlacementError(
                "InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists."
            )
        tags: dict[str, str] = {}
        for spec in _indexed(one, "TagSpecification"):
            if one.get(f"TagSpecification.{spec}.ResourceType") != "placement-group":
                continue
            for t in _indexed(one, f"TagSpecification.{spec}.Tag"):
                tags[one[f"TagSpecification.{spec}.Tag.{t}.Key"]] = one.get(
                    f"TagSpecification.{spec}.Tag.{t}.Value", ""
                )
        group = {
            "groupName": name,
            "groupId": f"pg-{uuid.uuid4().hex[:17]}",
            "strategy": strategy,
            "state": "available",
            "groupArn": f"arn:aws:ec2:{region}:{account}:placement-group/{name}",
            "tags": tags,
        }
        self.groups[(account, region, name)] = group
        return f"<placementGroup>{_group_xml(group)}</placementGroup>"

    def _describe(self, account: str, region: str, one: dict[str, str]) -> str:
        names = [one[f"GroupName.{i}"] for i in _indexed(one, "GroupName")]
        ids = [one[f"GroupId.{i}"] for i in _indexed(one, "GroupId")]
        mine = {k[2]: g for k, g in self.groups.items() if k[:2] == (account, region)}
        for n in names:
            if n not in mine:
                raise PlacementError(
                    "InvalidPlacementGroup.Unknown", f"The Placement Group '{n}' is unknown."
                )
        found = [
            g
            for n, g in sorted(mine.items())
            if (not names or n in names) and (not ids or g["groupId"] in ids)
        ]
        for f in _indexed(one, "Filter"):
            fname = one[f"Filter.{f}.Name"]
            values = {one[f"Filter.{f}.Value.{v}"] for v in _indexed(one, f"Filter.{f}.Value")}
            found = [g for g in found if _filter_value(g, fname) in values]
        items = "".join(f"<item>{_group_xml(g)}</item>" for g in found)
        return f"<placementGroupSet>{items}</placementGroupSet>"

    def check_launch(self, form: dict[str, list[str]], caller: tuple[str, str]) -> None:
        name = form.get("Placement.GroupName", [""])[0]
        with self.lock:
            if name and (*caller, name) not in self.groups:
                raise PlacementError(
                    "InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown."
                )

    def record_launch(
        self, form: dict[str, list[str]], caller: tuple[str, str], payload: bytes
    ) -> None:
        name = form.get("Placement.GroupName", [""])[0]
        if not name:
            return
        root = ET.fromstring(payload)
        ns = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
        with self.lock:
            for item in _instance_items(root, ns):
                self.members[item.findtext(f"{ns}instanceId") or ""] = (*caller, name)

    def annotate(self, payload: bytes) -> bytes:
        """moto's instance XML with each member's ``placement/groupName`` filled in."""
        with self.lock:
            members = {i: k[2] for i, k in self.members.items() if i.encode() in payload}
        if not members:
            return payload
        root = ET.fromstring(payload)
        ns = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
        for item in _instance_items(root, ns):
            name = members.get(item.findtext(f"{ns}instanceId") or "")
            placement = item.find(f"{ns}placement")
            if name is None or placement is None:
                continue
            node = placement.find(f"{ns}groupName")
            if node is None:
                node = ET.SubElement(placement, f"{ns}groupName")
            node.text = name
        if ns:
            ET.register_namespace("", ns[1:-1])
        return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _indexed(one: dict[str, str], prefix: str) -> list[str]:
    """The N of every ``prefix.N.…`` / ``prefix.N`` key of an EC2 query form, in order."""
    pat = re.compile(rf"^{re.escape(prefix)}\.(\d+)(?:\.|$)")
    return sorted({m[1] for k in one if (m := pat.match(k))}, key=int)


def _filter_value(group: dict[str, Any], name: str) -> str | None:
    if name.startswith("tag:"):
        value: str | None = group["tags"].get(name[4:])
        return value
    fields = {"group-name": "groupName", "group-id": "groupId", "state": "state"}
    if name not in (*fields, "strategy"):
        raise PlacementError("InvalidParameterValue", f"The filter '{name}' is invalid")
    return str(group[fields.get(name, name)])


def _group_xml(g: dict[str, Any]) -> str:
    tags = "".join(
        f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>"
        for k, v in sorted(g["tags"].items())
    )
    return "".join(
        f"<{k}>{escape(str(g[k]))}</{k}>"
        for k in ("groupName", "groupId", "strategy", "state", "groupArn")
    ) + (f"<tagSet>{tags}</tagSet>")


def _instance_items(root: ET.Element, ns: str) -> list[ET.Element]:
    """The instance records of a RunInstances / DescribeInstances answer: the ``item``s that
    carry an ``instanceId`` and a ``placement`` of their own."""
    return [
        i
        for i in root.iter(f"{ns}item")
        if i.find(f"{ns}instanceId") is not None and i.find(f"{ns}placement") is not None
    ]


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True
    upstream: tuple[str, int]
    faults: FaultInjector
    placement: PlacementGroups


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self) -> None:
        body = self._body()
        action, zone, form = "", None, {}
        ctype = self.headers.get("Content-Type", "")
        if self.command == "POST" and "x-www-form-urlencoded" in ctype:
            form = parse_qs(body.decode("utf-8", "replace"))
            action = form.get("Action", [""])[0]
            zone = form.get("Placement.AvailabilityZone", [None])[0]
            with self.server.faults.lock:
                self.server.faults.last_form[action] = form
        target = self.headers.get("X-Amz-Target", "")
        if not action and target:  # JSON-protocol services name the operation in a header
            action = target.rsplit(".", 1)[-1]
        if not action and not form:  # S3's REST requests
            action = s3_action(self.command, self.path, self.headers)
        rule = self.server.faults.take(action, zone) if action else None
        if rule is not None and rule.body is not None:
            self.send_response(rule.status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(rule.body)))
            self.end_headers()
            self.wfile.write(rule.body)
            return
        if rule is None and action == "AssumeRole":
            rule = self.server.faults.check_trust(form)
        if rule is not None and not rule.drop_response and not rule.corrupt:
            self._reply_error(rule, action)
            return
        pg = self.server.placement
        caller = pg.caller(self.headers.get("Authorization", ""))
        try:
            if action in PLACEMENT_ACTIONS:  # moto has none: the proxy is the cloud here
                status, headers = 200, [("Content-Type", "text/xml;charset=UTF-8")]
                payload = pg.handle(action, form, caller, self._instance_states)
            else:
                if action == "RunInstances":
                    pg.check_launch(form, caller)
                status, headers, payload = self._forward(body)
        except PlacementError as err:
            self._reply_error(FaultRule(action, err.code, 400, err.message), action)
            return
        if action == "RunInstances" and status == 200:
            pg.record_launch(form, caller, payload)
        if action in ("RunInstances", "DescribeInstances") and status == 200:
            payload = pg.annotate(payload)
        if action == "AssumeRole" and status == 200:
            text = payload.decode("utf-8", "replace")
            found = _ISSUED.findall(text)
            with self.server.faults.lock:
                self.server.faults.issued_secrets.extend(found)
            pg.learn_assumed_role(text)
        if rule is not None and rule.corrupt and payload:  # bytes damaged on the way
            payload = bytes([payload[0] ^ 0xFF]) + payload[1:]
            rule = None
        if rule is not None:  # the upstream did the work; the caller never hears about it
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in _HOP and k.lower() != "content-length":
                self.send_header(k, v)
        if self.command == "HEAD":
            length = next((v for k, v in headers if k.lower() == "content-length"), "0")
            self.send_header("Content-Length", length)
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _reply_error(self, rule: FaultRule, action: str) -> None:
        message = rule.message or f"injected {rule.code}"
        is_ec2 = "/sts" not in self.path and action not in ("AssumeRole", "GetCallerIdentity")
        if action in S3_ACTIONS:
            payload = s3_error_body(rule.code, message)
        elif is_ec2:
            payload = ec2_error_body(rule.code, message)
        else:
            payload = query_error_body(rule.code, message, rule.status)
        self.send_response(rule.status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _instance_states(self, ids: list[str]) -> dict[str, str]:
        """instance id -> state name, asked of moto as the caller (its account)."""
        form = {"Action": "DescribeInstances", "Version": "2016-11-15"}
        form["Filter.1.Name"] = "instance-id"
        form.update({f"Filter.1.Value.{n}": i for n, i in enumerate(ids, 1)})
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
            for h in ("Authorization", "X-Amz-Security-Token"):
                if self.headers.get(h):
                    headers[h] = self.headers[h]
            conn.request("POST", "/", body=urlencode(form), headers=headers)
            root = ET.fromstring(conn.getresponse().read())
        finally:
            conn.close()
        ns = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
        return {
            i.findtext(f"{ns}instanceId") or "": i.findtext(f"{ns}instanceState/{ns}name") or ""
            for i in _instance_items(root, ns)
        }

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            return resp.status, resp.getheaders(), payload
        finally:
            conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle


@dataclass
class MotoEmulator:
    """A running moto server and the fault proxy in front of it."""

    endpoint_url: str  # through the proxy: what the adapter under test uses
    direct_url: str  # straight to moto: ground truth for the tests
    faults: FaultInjector
    # The placement groups the proxy plays for moto; read them through ``endpoint_url``.
    placement: PlacementGroups = field(default_factory=PlacementGroups)

    def inject(
        self,
        code: str,
        status: int,
        *,
        action: str = "RunInstances",
        count: int = 1,
        zone: str | None = None,
        message: str = "",
    ) -> None:
        self.faults.add(FaultRule(action, code, status, message, count, zone))

    def respond(self, action: str, body: dict[str, Any], *, count: int = 1) -> None:
        """Answer the next ``count`` ``action`` calls (JSON protocol) with ``body``."""
        self.faults.add(
            FaultRule(action, status=200, remaining=count, body=json.dumps(body).encode())
        )

    def reset_state(self) -> None:
        """Forget every resource moto holds (``POST /moto-api/reset``), for tests that
        need an empty account."""
        req = urllib.request.Request(f"{self.direct_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - 127.0.0.1
            resp.read()
        self.placement.clear()

    def drop_next_response(self, action: str = "RunInstances") -> None:
        self.faults.add(FaultRule(action, drop_response=True))

    def corrupt_next_response(self, action: str) -> None:
        """The next ``action`` is done by moto and answered with one byte flipped."""
        self.faults.add(FaultRule(action, corrupt=True))

    def reset_faults(self) -> None:
        self.faults.clear()


# Base credentials of gpucap's own (shared) account in the emulator. The values are made
# distinctive per session so the secret-hygiene tests can grep for them.
BASE_ACCESS_KEY = f"AKIAGPUCAPTEST{uuid.uuid4().hex[:6].upper()}"
BASE_SECRET_KEY = f"gpucapBaseSecret{uuid.uuid4().hex}"
DEFAULT_ACCOUNT_ID = "123456789012"  # moto's account for unknown access keys


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoEmulator]:
    from moto.server import ThreadedMotoServer

    env = {
        "AWS_ACCESS_KEY_ID": BASE_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": BASE_SECRET_KEY,
        "AWS_CONFIG_FILE": os.devnull,  # never read a developer's real AWS config
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            mp.delenv(k, raising=False)
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        proxy = _Proxy(("127.0.0.1", 0), _Handler)
        proxy.upstream = (host, port)
        proxy.faults = FaultInjector()
        proxy.placement = PlacementGroups()
        thread = threading.Thread(target=proxy.serve_forever, daemon=True)
        thread.start()
        try:
            yield MotoEmulator(
                endpoint_url=f"http://127.0.0.1:{proxy.server_address[1]}",
                direct_url=f"http://{host}:{port}",
                faults=proxy.faults,
                placement=proxy.placement,
            )
        finally:
            proxy.shutdown()
            proxy.server_close()
            thread.join(timeout=5)
            moto.stop()


@pytest.fixture
def moto(moto_server: MotoEmulator) -> Iterator[MotoEmulator]:
    """The session's emulator with no faults pending before and after the test."""
    moto_server.reset_faults()
    yield moto_server
    moto_server.reset_faults()
