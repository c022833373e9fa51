"""Server-side object copy in Cloud Storage, for staging model weights near the nodes.

Uses the JSON API's ``objects.rewrite``
(``POST /storage/v1/b/{bucket}/o/{object}/rewriteTo/b/{bucket}/o/{object}``) through the
same authorized session as the compute clients, so it needs no extra SDK and no bytes pass
through gpucap. A large or cross-location rewrite answers ``done: false`` with a
``rewriteToken``; the call is repeated with the token until done.

URIs are ``gs://bucket/key``. A source ending in ``/`` is a prefix: every object under it is
copied to the same relative key under the destination prefix (weights are directories).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from providers.base import CopyStep, StoredObject
from providers.errors import InvalidRequest, NotFound, ProviderError, TransientError
from providers.gcp import errors as gerr
from providers.gcp.session import GcpSession

CALL_TIMEOUT_S = 60.0
MAX_REWRITE_CALLS = 10_000  # bounds a rewrite loop that never reports done
MiB = 1024 * 1024  # maxBytesRewrittenPerCall must be a multiple of it (objects.rewrite)


def parse_gs_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("gs://"):
        raise InvalidRequest(f"not a Cloud Storage URI: {uri!r} (expected gs://BUCKET/KEY)")
    bucket, _, key = uri[len("gs://") :].partition("/")
    if not bucket:
        raise InvalidRequest(f"no bucket in {uri!r}")
    return bucket, key


class GcsCopier:
    def __init__(self, session: GcpSession) -> None:
        self.session = session

    def copy(self, source_uri: str, dest_uri: str) -> None:
        sb, sk = parse_gs_uri(source_uri)
        db, dk = parse_gs_uri(dest_uri)
        if not sk:
            raise InvalidRequest(f"no object key in {source_uri!r}")
        if sk.endswith("/"):
            if dk and not dk.endswith("/"):
                raise InvalidRequest(f"copying prefix {source_uri!r} needs a prefix destination")
            for name in self._list(sb, sk):
                self._rewrite(sb, name, db, dk + name[len(sk) :])
            return
        self._rewrite(sb, sk, db, dk or sk)

    def _list(self, bucket: str, prefix: str) -> list[str]:
        return [str(i["name"]) for i in self._items(bucket, prefix)]

    def _items(self, bucket: str, prefix: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            params = {"prefix": prefix, **({"pageToken": token} if token else {})}
            body = self._call("GET", f"/storage/v1/b/{quote(bucket, safe='')}/o", params)
            items.extend(body.get("items", []))
            token = str(body.get("nextPageToken") or "")
            if not token:
                return items

    # -- staging's verbs (providers.base.ObjectStore) --------------------------------------

    def list_objects(self, uri: str) -> list[StoredObject]:
        """The objects under a prefix (or the one object), with the checksum GCS keeps: its
        md5Hash, which a rewrite keeps; crc32c for a composite object (it has no MD5)."""
        bucket, key = parse_gs_uri(uri)
        try:
            if key and not key.endswith("/"):
                path = f"/storage/v1/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}"
                items = [self._call("GET", path, {})]
            else:
                items = self._items(bucket, key)
        except NotFound:
            return []
        return [_stored(bucket, i) for i in items if not str(i["name"]).endswith("/")]

    def copy_step(
        self, source: StoredObject, dest_uri: str, resume: Mapping[str, Any], max_bytes: int
    ) -> CopyStep:
        """One ``objects.rewrite`` call of at most ``max_bytes`` (rounded up to a MiB),
        continued from the recorded ``rewriteToken`` (a crash between two calls resumes
        where GCS says the rewrite is)."""
        sb, sk = parse_gs_uri(source.uri)
        db, dk = parse_gs_uri(dest_uri)
        path = (
            f"/storage/v1/b/{quote(sb, safe='')}/o/{quote(sk, safe='')}"
            f"/rewriteTo/b/{quote(db, safe='')}/o/{quote(dk, safe='')}"
        )
        params = {"maxBytesRewrittenPerCall": str(max(1, -(-max_bytes // MiB)) * MiB)}
        token = str(resume.get("rewrite_token") or "")
        if token:
            params["rewriteToken"] = token
        body = self._call("POST", path, params)
        done = int(body.get("totalBytesRewritten") or 0)
        if body.get("done"):
            return CopyStep(True, int(body.get("objectSize") or done))
        token = str(body.get("rewriteToken") or "")
        if not token:
            raise TransientError(f"rewrite of {source.uri} not done and no token")
        return CopyStep(False, done, {"rewrite_token": token})

    def delete_objects(self, uri: str) -> None:
        bucket, key = parse_gs_uri(uri)
        names = [key] if key and not key.endswith("/") else self._list(bucket, key)
        for name in names:
            try:
                self._call(
                    "DELETE", f"/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}", {}
                )
            except NotFound:
                continue

    def _rewrite(self, sb: str, sk: str, db: str, dk: str) -> None:
        path = (
            f"/storage/v1/b/{quote(sb, safe='')}/o/{quote(sk, safe='')}"
            f"/rewriteTo/b/{quote(db, safe='')}/o/{quote(dk, safe='')}"
        )
        token = ""
        for _ in range(MAX_REWRITE_CALLS):
            body = self._call("POST", path, {"rewriteToken": token} if token else {})
            if body.get("done"):
                return
            token = str(body.get("rewriteToken") or "")
            if not token:
                raise TransientError(f"rewrite of gs://{sb}/{sk} not done and no token")
        raise TransientError(f"rewrite of gs://{sb}/{sk} did not finish")

    def _call(self, method: str, path: str, params: dict[str, str]) -> dict[str, Any]:
        url = self.session.storage_endpoint + path
        where = gerr.Where()

        try:
            resp = self.session.http().request(method, url, params=params, timeout=CALL_TIMEOUT_S)
        except ProviderError:
            raise
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc
        if resp.status_code >= 400:
            message, reasons = _error_of(resp)
            raise gerr.from_http(resp.status_code, message, reasons, where, response=resp)
        if resp.status_code == 204 or not resp.content:  # (a delete answers with no body)
            return {}
        body: dict[str, Any] = resp.json()
        return body


def _stored(bucket: str, item: dict[str, Any]) -> StoredObject:
    md5 = item.get("md5Hash")
    checksum = f"md5:{md5}" if md5 else f"crc32c:{item.get('crc32c', '')}"
    return StoredObject(f"gs://{bucket}/{item['name']}", int(item.get("size") or 0), checksum)


def _error_of(resp: Any) -> tuple[str, list[str]]:
    try:
        err = resp.json().get("error", {})
    except ValueError:
        return f"HTTP {resp.status_code}", []
    reasons = [str(e.get("reason")) for e in err.get("errors", []) if e.get("reason")]
    return str(err.get("message") or f"HTTP {resp.status_code}"), reasons
