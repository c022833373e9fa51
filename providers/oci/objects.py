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
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from providers.errors import InvalidRequest, Scope, TransientError
from providers.oci.errors import Where
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
