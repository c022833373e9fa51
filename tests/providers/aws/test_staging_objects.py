"""Staging's S3 verbs against moto (through the fault proxy): resumable multipart copies
that keep the origin's ETag, single-part copies, listing and deleting (uploads included)."""

from __future__ import annotations

import hashlib
from typing import Any

import boto3
import pytest

from providers.aws import AwsProvider
from providers.base import StoredObject
from providers.errors import InvalidRequest, NotFound, TransientError
from tests.fakes.moto_server import MotoEmulator
from tests.providers.aws.conftest import REGION, ProviderFactory

MiB = 1024 * 1024
PARTS = [bytes([n]) * 5 * MiB for n in range(1, 4)] + [b"tail" * 100]


@pytest.fixture
def s3(moto: MotoEmulator) -> Any:
    moto.reset_state()
    client = boto3.client("s3", region_name=REGION, endpoint_url=moto.direct_url)
    for bucket in ("acme-origin", "acme-weights"):
        client.create_bucket(Bucket=bucket)
    return client


def put_multipart(s3: Any, key: str, parts: list[bytes], bucket: str = "acme-origin") -> str:
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = [
        {
            "PartNumber": n,
            "ETag": s3.upload_part(
                Bucket=bucket, Key=key, UploadId=upload, PartNumber=n, Body=body
            )["ETag"],
        }
        for n, body in enumerate(parts, 1)
    ]
    s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done}
    )
    return str(s3.head_object(Bucket=bucket, Key=key)["ETag"]).strip('"')


def body(s3: Any, bucket: str, key: str) -> bytes:
    return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def copy_all(p: AwsProvider, src: StoredObject, dest: str, max_bytes: int) -> int:
    resume: dict[str, Any] = {}
    for steps in range(1, 100):
        step = p.copy_step(REGION, src, dest, resume, max_bytes)
        if step.done:
            return steps
        resume = step.resume
    raise AssertionError("copy never finished")


def test_listing_gives_each_objects_size_checksum_and_part_layout(
    make_provider: ProviderFactory, s3: Any
) -> None:
    etag = put_multipart(s3, "llama/model-1.safetensors", PARTS)
    s3.put_object(Bucket="acme-origin", Key="llama/config.json", Body=b"{}")
    listed = make_provider().list_objects(REGION, "s3://acme-origin/llama/")
    by_uri = {o.uri: o for o in listed}
    shards = by_uri["s3://acme-origin/llama/model-1.safetensors"]
    assert (shards.checksum, shards.parts) == (etag, tuple(len(b) for b in PARTS))
    config = by_uri["s3://acme-origin/llama/config.json"]
    assert (config.size, config.checksum, config.parts) == (2, hashlib.md5(b"{}").hexdigest(), ())
    assert make_provider().list_objects(REGION, "s3://acme-origin/nothing-here/") == []
    assert make_provider().list_objects(REGION, "s3://acme-origin/llama/missing.bin") == []
    assert make_provider().list_objects(REGION, "s3://no-such-bucket-x/llama/") == []


def test_multipart_copy_in_steps_keeps_the_origins_etag(
    make_provider: ProviderFactory, s3: Any
) -> None:
    put_multipart(s3, "m/a.bin", PARTS)
    p = make_provider()
    [src] = p.list_objects(REGION, "s3://acme-origin/m/a.bin")
    steps = copy_all(p, src, "s3://acme-weights/stage/m/a.bin", max_bytes=5 * MiB)
    assert steps == len(PARTS)  # one part per step under a 5 MiB budget
    [copy] = p.list_objects(REGION, "s3://acme-weights/stage/m/a.bin")
    assert (copy.size, copy.checksum) == (src.size, src.checksum)
    assert body(s3, "acme-weights", "stage/m/a.bin") == b"".join(PARTS)
    tags = s3.get_object_tagging(Bucket="acme-weights", Key="stage/m/a.bin")["TagSet"]
    assert {"Key": "gpucap-managed", "Value": "true"} in tags


def test_a_copy_whose_upload_id_was_never_recorded_resumes_from_the_uploads_own_parts(
    moto: MotoEmulator, make_provider: ProviderFactory, s3: Any
) -> None:
    """Interrupted twice: once by a lost answer to a part copy (the part was copied, the
    caller never heard), once by a crash that lost the recorded resume state. The copy
    still completes with each part copied once and the origin's ETag."""
    put_multipart(s3, "m/b.bin", PARTS)
    p = make_provider()
    [src] = p.list_objects(REGION, "s3://acme-origin/m/b.bin")
    dest = "s3://acme-weights/stage/m/b.bin"
    first = p.copy_step(REGION, src, dest, {}, 5 * MiB)
    assert not first.done and first.resume["parts"] == [[1, first.resume["parts"][0][1]]]
    moto.drop_next_response("UploadPartCopy")
    with pytest.raises(TransientError):
        p.copy_step(REGION, src, dest, first.resume, 5 * MiB)
    seen = moto.faults.seen["UploadPartCopy"]
    step = p.copy_step(REGION, src, dest, {}, 5 * MiB)  # (the resume state was lost)
    assert step.resume["upload_id"] == first.resume["upload_id"]
    assert [n for n, _ in step.resume["parts"]] == [1, 2, 3]
    assert moto.faults.seen["UploadPartCopy"] == seen + 1  # part 2 was not copied again
    while not step.done:
        step = p.copy_step(REGION, src, dest, step.resume, 5 * MiB)
    assert p.list_objects(REGION, dest)[0].checksum == src.checksum
    assert s3.list_multipart_uploads(Bucket="acme-weights").get("Uploads", []) == []


def test_single_part_objects_are_copied_whole_and_keep_their_md5(
    make_provider: ProviderFactory, s3: Any
) -> None:
    s3.put_object(Bucket="acme-origin", Key="m/tokenizer.json", Body=b"tokens" * 1000)
    p = make_provider()
    [src] = p.list_objects(REGION, "s3://acme-origin/m/tokenizer.json")
    step = p.copy_step(REGION, src, "s3://acme-weights/s/tokenizer.json", {}, 1)
    assert step.done and step.bytes_done == src.size
    assert p.list_objects(REGION, "s3://acme-weights/s/tokenizer.json")[0].checksum == (
        hashlib.md5(b"tokens" * 1000).hexdigest()
    )


def test_an_origin_replaced_mid_copy_fails_the_copy_instead_of_mixing_versions(
    make_provider: ProviderFactory, s3: Any
) -> None:
    put_multipart(s3, "m/c.bin", PARTS)
    p = make_provider()
    [src] = p.list_objects(REGION, "s3://acme-origin/m/c.bin")
    step = p.copy_step(REGION, src, "s3://acme-weights/s/c.bin", {}, 5 * MiB)
    put_multipart(s3, "m/c.bin", list(reversed(PARTS[:3])) + [PARTS[3]])
    with pytest.raises(InvalidRequest):
        p.copy_step(REGION, src, "s3://acme-weights/s/c.bin", step.resume, 5 * MiB)


def test_a_missing_origin_is_not_found(make_provider: ProviderFactory, s3: Any) -> None:
    gone = StoredObject("s3://acme-origin/m/gone.bin", 10, hashlib.md5(b"x").hexdigest())
    with pytest.raises(NotFound):
        make_provider().copy_step(REGION, gone, "s3://acme-weights/s/gone.bin", {}, 10)


def test_delete_removes_the_objects_and_unfinished_uploads_and_is_idempotent(
    make_provider: ProviderFactory, s3: Any
) -> None:
    put_multipart(s3, "m/d.bin", PARTS)
    p = make_provider()
    [src] = p.list_objects(REGION, "s3://acme-origin/m/d.bin")
    p.copy_step(REGION, src, "s3://acme-weights/s/m/d.bin", {}, 5 * MiB)  # left unfinished
    s3.put_object(Bucket="acme-weights", Key="s/m/config.json", Body=b"{}")
    s3.put_object(Bucket="acme-weights", Key="s/other/keep.json", Body=b"{}")
    p.delete_objects(REGION, "s3://acme-weights/s/m/")
    p.delete_objects(REGION, "s3://acme-weights/s/m/")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="acme-weights").get("Contents", [])]
    assert keys == ["s/other/keep.json"]
    assert s3.list_multipart_uploads(Bucket="acme-weights").get("Uploads", []) == []
