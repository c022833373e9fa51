"""Server-side object copies for model weights (S3). The bytes never pass through gpucap.

``copy_object`` is the one-shot copy (boto3's managed ``copy``). Staging uses the resumable
verbs (``providers.base.ObjectStore``):

- an object uploaded in one part (its ETag is its MD5; S3 caps such an object at 5 GB) is
  copied with one CopyObject, which keeps the ETag;
- a multipart object is copied with UploadPartCopy using *its own part sizes* (read with
  HeadObject ``PartNumber``), so the copy's ETag, the MD5 of the parts' MD5s, equals the
  origin's: that is the checksum staging verifies. Each step copies parts up to a byte
  budget; the upload is found again by its key (ListMultipartUploads) and asked which
  parts it has (ListParts), so a copy interrupted anywhere, even before its upload id was
  recorded, resumes without copying a part twice or leaving a second upload.

Every step checks the origin's ETag first, and every part copy is conditional on it
(``CopySourceIfMatch``): an origin replaced mid-copy fails the copy (OriginChanged,
PreconditionFailed) instead of mixing two versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from providers.aws.errors import from_botocore
from providers.aws.session import AwsSession
from providers.base import MANAGED_VALUE, TAG_MANAGED, CopyStep, StoredObject
from providers.errors import InvalidRequest, NotFound

# S3's part-count limit (10,000) and its 5 GiB ceiling of one CopyObject.
MAX_SINGLE_COPY = 5 * 1024**3
_TAGGING = f"{TAG_MANAGED}={MANAGED_VALUE}"


def parse_s3_uri(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    key = parsed.path.lstrip("/")
    if parsed.scheme != "s3" or not parsed.netloc or not key:
        raise InvalidRequest(f"not an s3://bucket/key URI: {uri!r}", code="InvalidURI")
    return parsed.netloc, key


def copy_object(sess: AwsSession, region: str, source_uri: str, dest_uri: str) -> None:
    src_bucket, src_key = parse_s3_uri(source_uri)
    dst_bucket, dst_key = parse_s3_uri(dest_uri)
    s3 = sess.client("s3", region)
    try:
        s3.copy({"Bucket": src_bucket, "Key": src_key}, dst_bucket, dst_key)
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc


def list_objects(sess: AwsSession, region: str, uri: str) -> list[StoredObject]:
    bucket, key = parse_s3_uri(uri)
    s3 = sess.client("s3", region)
    try:
        if not key.endswith("/"):
            try:
                head = s3.head_object(Bucket=bucket, Key=key)
            except Exception as exc:
                err = from_botocore(exc, region=region)
                if isinstance(err, NotFound):
                    return []
                raise err from exc
            return [_stored(s3, bucket, key, head["ETag"], head["ContentLength"])]
        out = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
            for o in page.get("Contents", []):
                out.append(_stored(s3, bucket, o["Key"], o["ETag"], o["Size"]))
        return out
    except Exception as exc:
        err = from_botocore(exc, region=region)
        if isinstance(err, NotFound) and err.code == "NoSuchBucket":
            return []
        raise err from exc


def _stored(s3: Any, bucket: str, key: str, etag: str, size: int) -> StoredObject:
    etag = etag.strip('"')
    parts: tuple[int, ...] = ()
    if "-" in etag:
        count = int(etag.rsplit("-", 1)[1])
        parts = tuple(
            int(s3.head_object(Bucket=bucket, Key=key, PartNumber=n)["ContentLength"])
            for n in range(1, count + 1)
        )
    return StoredObject(f"s3://{bucket}/{key}", int(size), etag, parts)


def copy_step(
    sess: AwsSession,
    region: str,
    source: StoredObject,
    dest_uri: str,
    resume: Mapping[str, Any],
    max_bytes: int,
) -> CopyStep:
    s3 = sess.client("s3", region)
    try:
        return _copy_step(s3, source, dest_uri, resume, max_bytes)
    except Exception as exc:
        raise from_botocore(exc, region=region) from exc


def _copy_step(
    s3: Any, source: StoredObject, dest_uri: str, resume: Mapping[str, Any], max_bytes: int
) -> CopyStep:
    sb, sk = parse_s3_uri(source.uri)
    db, dk = parse_s3_uri(dest_uri)
    copy_source = {"Bucket": sb, "Key": sk}
    # (S3 also refuses a part copy of a changed origin through CopySourceIfMatch; moto
    # ignores that header, and one HEAD a step costs little next to a part.)
    now = str(s3.head_object(Bucket=sb, Key=sk)["ETag"]).strip('"')
    if now != source.checksum:
        raise InvalidRequest(
            f"{source.uri} changed during the copy (ETag {now}, was {source.checksum})",
            code="OriginChanged",
        )
    if not source.parts:
        if source.size > MAX_SINGLE_COPY:
            raise InvalidRequest(f"{source.uri}: a single-part object over 5 GiB", "TooLarge")
        s3.copy_object(
            Bucket=db,
            Key=dk,
            CopySource=copy_source,
            CopySourceIfMatch=f'"{source.checksum}"',
            TaggingDirective="REPLACE",
            Tagging=_TAGGING,
        )
        return CopyStep(True, source.size)
    upload_id = str(resume.get("upload_id") or "") or _find_upload(s3, db, dk)
    done: dict[int, str] = {}
    if upload_id:
        try:
            done = _parts(s3, db, dk, upload_id, source.parts)
        except Exception as exc:
            if not isinstance(from_botocore(exc), NotFound):  # NoSuchUpload: begin again
                raise
            upload_id = ""
    if not upload_id:
        upload_id = s3.create_multipart_upload(Bucket=db, Key=dk, Tagging=_TAGGING)["UploadId"]
    moved, offset = 0, 0
    for n, size in enumerate(source.parts, 1):
        start, offset = offset, offset + size
        if n in done:
            continue
        if moved >= max_bytes:
            break
        r = s3.upload_part_copy(
            Bucket=db,
            Key=dk,
            UploadId=upload_id,
            PartNumber=n,
            CopySource=copy_source,
            CopySourceRange=f"bytes={start}-{offset - 1}",
            CopySourceIfMatch=f'"{source.checksum}"',
        )
        done[n] = r["CopyPartResult"]["ETag"]
        moved += size
    copied = sum(size for n, size in enumerate(source.parts, 1) if n in done)
    if len(done) < len(source.parts):
        parts = [[n, done[n]] for n in sorted(done)]
        return CopyStep(False, copied, {"upload_id": upload_id, "parts": parts})
    s3.complete_multipart_upload(
        Bucket=db,
        Key=dk,
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": done[n]} for n in sorted(done)]},
    )
    return CopyStep(True, copied)


def _find_upload(s3: Any, bucket: str, key: str) -> str:
    """The newest unfinished upload of ``key`` (one a crash left unrecorded), or ""."""
    found = s3.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])
    mine = sorted((u for u in found if u["Key"] == key), key=lambda u: u["Initiated"])
    return str(mine[-1]["UploadId"]) if mine else ""


def _parts(
    s3: Any, bucket: str, key: str, upload_id: str, sizes: tuple[int, ...]
) -> dict[int, str]:
    """The parts the upload holds with the size the layout gives them (ListParts)."""
    out: dict[int, str] = {}
    pages = s3.get_paginator("list_parts").paginate(Bucket=bucket, Key=key, UploadId=upload_id)
    for page in pages:
        for p in page.get("Parts", []):
            n = int(p["PartNumber"])
            if 1 <= n <= len(sizes) and int(p["Size"]) == sizes[n - 1]:
                out[n] = str(p["ETag"])
    return out


def delete_objects(sess: AwsSession, region: str, uri: str) -> None:
    bucket, key = parse_s3_uri(uri)
    s3 = sess.client("s3", region)
    try:
        keys = [key]
        if key.endswith("/"):
            keys = [parse_s3_uri(o.uri)[1] for o in list_objects(sess, region, uri)]
        for i in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        found = s3.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])
        for u in found:
            if key.endswith("/") or u["Key"] == key:
                s3.abort_multipart_upload(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"])
    except Exception as exc:
        err = from_botocore(exc, region=region)
        if isinstance(err, NotFound):
            return
        raise err from exc
