"""Server-side object copy in OCI Object Storage (model weights between buckets/regions).

``CopyObject`` is asynchronous: it answers 202 with an ``opc-work-request-id`` and the copy
runs inside Object Storage (no bytes pass through gpucap); we poll the work request until it
completes or fails, with a bounded wait.

URIs:
- ``oci://BUCKET@NAMESPACE/OBJECT``: in the account's home region (its first region);
- ``https://objectstorage.REGION.oraclecloud.com/n/NAMESPACE/b/BUCKET/o/OBJECT``: the native
  form, which names the region.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from providers.base import CopyStep, StoredObject
from providers.errors import InvalidRequest, NotFound, Scope, TransientError
from providers.oci.errors import Target, Where
from providers.oci.session import OciSession

_OCI_URI = re.compile(r"^oci://(?P<bucket>[^@/]+)@(?P<ns>[^/]+)/(?P<name>.+)$")
_HTTPS_URI = re.compile(
    r"^https://objectstorage\.(?P<region>[a-z0-9-]+)\.oraclecloud\.com"
    r"/n/(?P<ns>[^/]+)/b/(?P<bucket>[^/]+)/o/(?P<name>.+)$"
)
_DONE = {"COMPLETED"}
_FAILED = {"FAILED", "CANCELED", "CANCELING"}


@dataclass(frozen=True)
class ObjectRef:
    region: str
    namespace: str
    bucket: str
    name: str


def parse_uri(uri: str, home_region: str) -> ObjectRef:
    m = _OCI_URI.match(uri)
    if m:
        return ObjectRef(home_region, m["ns"], m["bucket"], m["name"])
    m = _HTTPS_URI.match(uri)
    if m:
        return ObjectRef(m["region"], m["ns"], m["bucket"], unquote(m["name"]))
    raise InvalidRequest(
        f"not an OCI object URI: {uri!r} (expected oci://BUCKET@NAMESPACE/OBJECT or "
        "https://objectstorage.REGION.oraclecloud.com/n/NS/b/BUCKET/o/OBJECT)",
        "InvalidUri",
        Scope.REQUEST,
    )


class Objects:
    def __init__(
        self,
        session: OciSession,
        *,
        timeout_s: float = 3600.0,  # weights are hundreds of GB
        poll_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._sleep = sleep
        self._clock = clock

    def copy(self, source_uri: str, dest_uri: str) -> None:
        import oci

        src = parse_uri(source_uri, self.session.home_region)
        dst = parse_uri(dest_uri, self.session.home_region)
        client = self.session.object_storage(src.region)
        where = Where(region=src.region)
        resp = self.session.call(
            "copy_object",
            client.copy_object,
            src.namespace,
            src.bucket,
            oci.object_storage.models.CopyObjectDetails(
                source_object_name=src.name,
                destination_region=dst.region,
                destination_namespace=dst.namespace,
                destination_bucket=dst.bucket,
                destination_object_name=dst.name,
            ),
            where=where,
        )
        work_request = resp.headers.get("opc-work-request-id")
        deadline = self._clock() + self.timeout_s
        while True:
            wr = self.session.call(
                "get_work_request", client.get_work_request, work_request, where=where
            ).data
            if wr.status in _DONE:
                return
            if wr.status in _FAILED:
                raise TransientError(
                    f"copy {source_uri} -> {dest_uri}: work request {work_request} {wr.status}",
                    "CopyFailed",
                    Scope.REQUEST,
                    retryable=True,
                    region=src.region,
                )
            if self._clock() >= deadline:
                raise TransientError(
                    f"copy {source_uri} -> {dest_uri}: not done after {self.timeout_s:.0f} s",
                    "CopyTimeout",
                    Scope.REQUEST,
                    retryable=True,
                    region=src.region,
                )
            self._sleep(self.poll_s)


def uri_of(like: str, ref: ObjectRef, name: str) -> str:
    """The URI of object ``name`` in ``ref``'s bucket, in the form ``like`` is written in."""
    if like.startswith("oci://"):
        return f"oci://{ref.bucket}@{ref.namespace}/{name}"
    return (
        f"https://objectstorage.{ref.region}.oraclecloud.com/n/{ref.namespace}/b/{ref.bucket}"
        f"/o/{quote(name, safe='/')}"
    )


class Staging:
    """Staging's verbs (``providers.base.ObjectStore``) for OCI Object Storage.

    A copy is one ``CopyObject`` work request, run inside Object Storage: its id is the
    resume state (a step polls it), so the byte budget of a step cannot bound it; the
    staging job's concurrency limit does. The checksum is Object Storage's MD5 (the
    listing's ``md5``: content-md5, or opc-multipart-md5 for a multipart object)."""

    def __init__(self, session: OciSession) -> None:
        self.session = session

    def list_objects(self, uri: str) -> list[StoredObject]:
        ref = parse_uri(uri, self.session.home_region)
        client = self.session.object_storage(ref.region)
        where = Where(region=ref.region)
        try:
            if not ref.name.endswith("/"):
                resp = self.session.call(
                    "head_object",
                    client.head_object,
                    ref.namespace,
                    ref.bucket,
                    ref.name,
                    where=Where(region=ref.region, target=Target.RESOURCE),  # (404: no body)
                )
                h = resp.headers
                md5 = h.get("opc-multipart-md5") or h.get("content-md5") or ""
                size = int(h.get("content-length") or 0)
                return [StoredObject(uri, size, f"md5:{md5}")]
            out: list[StoredObject] = []
            start: str | None = None
            while True:
                kwargs: dict[str, Any] = {"prefix": ref.name, "fields": "name,size,md5"}
                if start:
                    kwargs["start"] = start
                page = self.session.call(
                    "list_objects",
                    client.list_objects,
                    ref.namespace,
                    ref.bucket,
                    where=where,
                    **kwargs,
                ).data
                for o in page.objects or []:
                    if not o.name.endswith("/"):
                        out.append(
                            StoredObject(uri_of(uri, ref, o.name), int(o.size or 0), f"md5:{o.md5}")
                        )
                start = page.next_start_with
                if not start:
                    return out
        except NotFound:
            return []

    def copy_step(
        self, source: StoredObject, dest_uri: str, resume: Mapping[str, Any], max_bytes: int
    ) -> CopyStep:
        import oci

        src = parse_uri(source.uri, self.session.home_region)
        dst = parse_uri(dest_uri, self.session.home_region)
        client = self.session.object_storage(src.region)
        where = Where(region=src.region)
        work_request = str(resume.get("work_request") or "")
        if not work_request:
            resp = self.session.call(
                "copy_object",
                client.copy_object,
                src.namespace,
                src.bucket,
                oci.object_storage.models.CopyObjectDetails(
                    source_object_name=src.name,
                    destination_region=dst.region,
                    destination_namespace=dst.namespace,
                    destination_bucket=dst.bucket,
                    destination_object_name=dst.name,
                ),
                where=where,
            )
            work_request = str(resp.headers.get("opc-work-request-id") or "")
        wr = self.session.call(
            "get_work_request", client.get_work_request, work_request, where=where
        ).data
        if wr.status in _DONE:
            return CopyStep(True, source.size)
        if wr.status in _FAILED:
            raise InvalidRequest(
                f"copy {source.uri} -> {dest_uri}: work request {work_request} {wr.status}",
                "CopyFailed",
                Scope.REQUEST,
                region=src.region,
            )
        done = int(source.size * float(wr.percent_complete or 0.0) / 100.0)
        return CopyStep(False, done, {"work_request": work_request})

    def delete_objects(self, uri: str) -> None:
        ref = parse_uri(uri, self.session.home_region)
        client = self.session.object_storage(ref.region)
        where = Where(region=ref.region)
        names = [ref.name]
        if ref.name.endswith("/"):
            names = [
                parse_uri(o.uri, self.session.home_region).name for o in self.list_objects(uri)
            ]
        for name in names:
            try:
                self.session.call(
                    "delete_object",
                    client.delete_object,
                    ref.namespace,
                    ref.bucket,
                    name,
                    where=where,
                )
            except NotFound:
                continue
