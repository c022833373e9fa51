"""Staging's Cloud Storage verbs against the wire fake through the adapter's authorized
session: rewrites in bounded steps resumed from the recorded rewriteToken, the checksum GCS
keeps (md5Hash, which a copy keeps), a missing origin, a quota refusal, deletes."""

from __future__ import annotations

import pytest

from providers.errors import NotFound, QuotaExceeded
from providers.gcp.provider import GcpProvider
from tests.contract.harness_gcp import make_provider
from tests.fakes.gcp_server import FakeGcp

MiB = 1024 * 1024
SHARD = bytes(range(256)) * (3 * MiB // 256 + 10)  # a bit over 3 MiB
REGION = "us-central1"


@pytest.fixture
def origin(fake: FakeGcp) -> FakeGcp:
    fake.put_object("acme-origin", "llama/model.safetensors", SHARD)
    fake.put_object("acme-origin", "llama/config.json", b'{"layers": 80}')
    return fake


def test_listing_gives_sizes_and_the_md5_gcs_keeps(origin: FakeGcp, provider: GcpProvider) -> None:
    listed = {o.uri: o for o in provider.list_objects(REGION, "gs://acme-origin/llama/")}
    shard = listed["gs://acme-origin/llama/model.safetensors"]
    assert shard.size == len(SHARD) and shard.checksum.startswith("md5:")
    assert provider.list_objects(REGION, "gs://acme-origin/llama/config.json")[0].size == 14
    assert provider.list_objects(REGION, "gs://acme-origin/nothing/") == []
    assert provider.list_objects(REGION, "gs://acme-origin/llama/missing.bin") == []


def test_a_rewrite_in_steps_resumes_from_its_token_after_a_crash(
    origin: FakeGcp, provider: GcpProvider, project: str
) -> None:
    [src] = provider.list_objects(REGION, "gs://acme-origin/llama/model.safetensors")
    dest = "gs://acme-weights/gpucap-weights/acme/llama/model.safetensors"
    step = provider.copy_step(REGION, src, dest, {}, MiB)
    assert not step.done and step.bytes_done == MiB and step.resume["rewrite_token"]
    # The daemon restarts: a new provider, the recorded token.
    again = make_provider(origin, project)
    steps = 1
    while not step.done:
        step = again.copy_step(REGION, src, dest, step.resume, MiB)
        steps += 1
    assert steps == 4 and step.bytes_done == len(SHARD)
    assert origin.get_object("acme-weights", "gpucap-weights/acme/llama/model.safetensors") == SHARD
    [copy] = provider.list_objects(REGION, dest)
    assert copy.checksum == src.checksum


def test_a_missing_origin_is_not_found_and_a_quota_refusal_is_typed(
    origin: FakeGcp, provider: GcpProvider
) -> None:
    [src] = provider.list_objects(REGION, "gs://acme-origin/llama/config.json")
    origin.inject("quota", method="storage.rewrite", count=5)
    with pytest.raises(QuotaExceeded):
        provider.copy_step(REGION, src, "gs://acme-weights/c.json", {}, MiB)
    origin.reset_faults()
    origin.objects.pop(("acme-origin", "llama/config.json"))
    with pytest.raises(NotFound):
        provider.copy_step(REGION, src, "gs://acme-weights/c.json", {}, MiB)


def test_delete_removes_every_object_under_the_prefix_and_is_idempotent(
    origin: FakeGcp, provider: GcpProvider
) -> None:
    origin.put_object("acme-weights", "w/acme/llama/a", b"a")
    origin.put_object("acme-weights", "w/acme/llama/b", b"b")
    origin.put_object("acme-weights", "w/acme/qwen/a", b"a")
    provider.delete_objects(REGION, "gs://acme-weights/w/acme/llama/")
    provider.delete_objects(REGION, "gs://acme-weights/w/acme/llama/")
    left = sorted(n for (b, n) in origin.objects if b == "acme-weights")
    assert left == ["w/acme/qwen/a"]
