"""Staging's Object Storage verbs against the OCI wire fake through the real SDK: listing
with Object Storage's MD5, a CopyObject work request polled to completion (its answer lost
once), a missing origin, a compartment quota on the bucket, deletes."""

from __future__ import annotations

import pytest

from providers.errors import NotFound, QuotaExceeded
from tests.contract.harness_oci import BUCKET, REGION
from tests.providers.oci.conftest import World

OTHER = "us-phoenix-1"
SHARD = b"weights" * 100_000


def native(region: str, ns: str, bucket: str, name: str) -> str:
    return f"https://objectstorage.{region}.oraclecloud.com/n/{ns}/b/{bucket}/o/{name}"


def seeded(world: World) -> str:
    ns = world.fake.namespace(world.a.tenancy)
    world.fake.create_bucket(world.a.tenancy, OTHER, "staging", world.a.compartment)
    world.fake.put_object(REGION, ns, BUCKET, "llama/model.safetensors", SHARD)
    world.fake.put_object(REGION, ns, BUCKET, "llama/config.json", b"{}")
    return ns


def test_a_prefix_is_listed_and_copied_across_regions_keeping_its_md5(world: World) -> None:
    ns = seeded(world)
    provider = world.provider()
    listed = provider.list_objects(REGION, f"oci://{BUCKET}@{ns}/llama/")
    assert sorted(o.uri for o in listed) == [
        f"oci://{BUCKET}@{ns}/llama/config.json",
        f"oci://{BUCKET}@{ns}/llama/model.safetensors",
    ]
    shard = next(o for o in listed if o.uri.endswith("model.safetensors"))
    assert shard.size == len(SHARD) and shard.checksum.startswith("md5:")
    dest = native(OTHER, ns, "staging", "gpucap-weights/acme/llama/model.safetensors")
    world.fake.drop_next_response("CopyObject")  # copied at the cloud, the answer lost
    step = provider.copy_step(OTHER, shard, dest, {}, 1)
    assert step.done and step.bytes_done == len(SHARD)
    [copy] = provider.list_objects(OTHER, dest)
    assert (copy.size, copy.checksum) == (shard.size, shard.checksum)
    prefix = native(OTHER, ns, "staging", "gpucap-weights/acme/llama/")
    assert [o.uri for o in provider.list_objects(OTHER, prefix)] == [dest]


def test_a_missing_origin_is_not_found_and_a_bucket_quota_is_typed(world: World) -> None:
    ns = seeded(world)
    provider = world.provider()
    [shard] = provider.list_objects(REGION, f"oci://{BUCKET}@{ns}/llama/model.safetensors")
    dest = native(OTHER, ns, "staging", "w/model.safetensors")
    world.fake.inject("compartment_quota", operation="CopyObject")
    with pytest.raises(QuotaExceeded):
        provider.copy_step(OTHER, shard, dest, {}, 1)
    assert provider.list_objects(REGION, f"oci://{BUCKET}@{ns}/llama/nope.bin") == []
    gone = shard.__class__(f"oci://{BUCKET}@{ns}/llama/nope.bin", 1, "md5:x")
    with pytest.raises(NotFound):
        provider.copy_step(OTHER, gone, dest, {}, 1)


def test_delete_removes_the_prefix_and_is_idempotent(world: World) -> None:
    ns = seeded(world)
    provider = world.provider()
    provider.delete_objects(REGION, f"oci://{BUCKET}@{ns}/llama/")
    provider.delete_objects(REGION, f"oci://{BUCKET}@{ns}/llama/")
    assert provider.list_objects(REGION, f"oci://{BUCKET}@{ns}/llama/") == []
