"""Server-side object copy for model weights (S3). The bytes never pass through gpucap:
boto3's managed ``copy`` issues CopyObject, or UploadPartCopy in parts for objects above
the multipart threshold (a single CopyObject stops at 5 GB; weights are often larger)."""

from __future__ import annotations

from urllib.parse import urlparse

from providers.aws.errors import from_botocore
from providers.aws.session import AwsSession
from providers.errors import InvalidRequest


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
