"""Images and server-side object copy beyond the shared contract: retried image creates,
cross-region copies through the native URL form, and bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from providers.errors import InvalidRequest, NotFound
from tests.contract.harness_oci import BUCKET, REGION
from tests.providers.oci.conftest import World

OTHER = "us-phoenix-1"


def test_image_create_retried_after_a_lost_response_makes_one_image(
    world: World, node_request: Callable[..., Any]
) -> None:
    provider = world.provider()
    node = provider.create_node(node_request(None)).node
    world.fake.drop_next_response("CreateImage")
    image = provider.create_image(REGION, node.instance_id, "baked-1")  # retried, same token
    customs = [i for i in world.fake.images() if i["compartmentId"] == world.a.compartment]
    assert [i["id"] for i in customs] == [image.image_id]
    assert provider.describe_image(REGION, image.image_id) is not None
    assert provider.describe_image(REGION, "ocid1.image.oc1.iad.neverissued") is None


def test_copy_across_regions_with_native_urls(world: World) -> None:
    provider = world.provider()
    ns = world.fake.namespace(world.a.tenancy)
    world.fake.create_bucket(world.a.tenancy, OTHER, "staging", world.a.compartment)
    world.fake.put_object(REGION, ns, BUCKET, "m/w.bin", b"weights")
    src = f"https://objectstorage.{REGION}.oraclecloud.com/n/{ns}/b/{BUCKET}/o/m/w.bin"
    dst = f"https://objectstorage.{OTHER}.oraclecloud.com/n/{ns}/b/staging/o/m/w.bin"
    provider.copy_object(src, dst)
    assert world.fake.get_object(OTHER, ns, "staging", "m/w.bin") == b"weights"
    assert world.fake.get_object(REGION, ns, "staging", "m/w.bin") is None


def test_copy_of_a_missing_object_is_not_found(world: World) -> None:
    provider = world.provider()
    ns = world.fake.namespace(world.a.tenancy)
    with pytest.raises(NotFound):
        provider.copy_object(f"oci://{BUCKET}@{ns}/nope", f"oci://{BUCKET}@{ns}/dst")
    assert world.fake.get_object(REGION, ns, BUCKET, "dst") is None


@pytest.mark.parametrize("uri", ["s3://bucket/key", "oci://bucket-without-namespace/key", ""])
def test_copy_with_a_bad_uri_names_the_problem(world: World, uri: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        world.provider().copy_object(uri, "oci://b@ns/k")
    assert "not an OCI object URI" in info.value.message
    assert world.fake.requests("CopyObject") == []
