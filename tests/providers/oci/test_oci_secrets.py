"""Secret hygiene (clouds.md §C "Never store"): the API private key and its pass phrase are
read by the SDK from the operator's config file and appear nowhere else: not in gpucap's
logs (structlog and stdlib, the SDK's included), not in error messages or reprs, not in the
database. The test runs every adapter verb, failures included, then greps everything."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from sqlalchemy import select

from controlplane.api import ControlPlaneService
from controlplane.store.db import Store
from controlplane.store.models import Base
from providers.errors import ProviderError
from schema.policy_file import PolicyError
from tests.contract.harness_oci import BUCKET, REGION
from tests.providers.oci.conftest import PASS_PHRASE, World


def _secrets(world: World) -> list[str]:
    body = [
        line for line in world.a.private_pem.splitlines() if line and not line.startswith("-----")
    ]
    # The pass phrase, and pieces of the key body long enough to be unmistakable.
    return [PASS_PHRASE, world.b.pass_phrase, body[1], body[len(body) // 2], body[-1]]


def _exercise(world: World, node_request: Callable[..., Any]) -> list[str]:
    """Run every verb, including failures; return the text of every error and repr."""
    texts: list[str] = []
    provider = world.provider()
    texts.append(repr(provider))
    texts.append(repr(provider.session))
    ns = world.fake.namespace(world.a.tenancy)
    world.fake.put_object(REGION, ns, BUCKET, "w/a.bin", b"abc")
    node = provider.create_node(node_request(None)).node
    provider.describe_node(REGION, node.instance_id)
    provider.list_nodes(REGION, {"gpucap-pool": "pool-1"})
    provider.list_offerings([REGION])
    image = provider.create_image(REGION, node.instance_id, "img-1")
    provider.describe_image(REGION, image.image_id)
    provider.delete_image(REGION, image.image_id)
    provider.copy_object(f"oci://{BUCKET}@{ns}/w/a.bin", f"oci://{BUCKET}@{ns}/w/b.bin")
    provider.terminate_node(REGION, node.instance_id)
    for fault in ("capacity", "quota", "auth", "throttle"):
        world.fake.inject(fault, count=5)
        with pytest.raises(ProviderError) as info:
            provider.create_node(node_request(world.fake.ad_name(world.a.tenancy, REGION, 1)))
        texts += [str(info.value), repr(info.value)]
        world.fake.clear_faults()
    # A wrong pass phrase in the config file: the error must not quote it back.
    bad = world.config_file.read_text().replace(PASS_PHRASE, PASS_PHRASE + "-wrong")
    bad_file = world.tmp / "bad-config"
    bad_file.write_text(bad)
    wrong = world.provider()
    wrong.session.config_file = str(bad_file)
    with pytest.raises(ProviderError) as info:
        wrong.list_offerings([REGION])
    texts += [str(info.value), repr(info.value), repr(info.value.details)]
    return texts


def test_keys_and_pass_phrases_never_reach_logs_errors_or_reprs(
    world: World, node_request: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every stdlib logger, the oci SDK's included
    with structlog.testing.capture_logs() as events:
        texts = _exercise(world, node_request)
    assert events, "the adapter logged nothing: the check below would be vacuous"
    haystack = "\n".join([*map(repr, events), caplog.text, *texts])
    for secret in _secrets(world):
        assert secret not in haystack
    assert "BEGIN" not in haystack and "PRIVATE KEY" not in haystack


def test_the_database_holds_references_only(
    world: World, node_request: Callable[..., Any], store: Store
) -> None:
    service = ControlPlaneService(store)
    policy = textwrap.dedent(
        f"""
        customer: acme
        accounts:
          - name: acme-oci
            cloud: oci
            owner: customer
            regions: [{REGION}]
            credentials:
              tenancy: {world.a.tenancy}
              compartment_id: {world.a.compartment}
              profile: {world.a.profile}
        """
    )
    service.apply_policy(policy, "test", "tester")
    # A policy that tries to carry key material is refused, and nothing of it is stored.
    leaky = policy + f"      pass_phrase: {PASS_PHRASE}\n"
    with pytest.raises(PolicyError):
        service.apply_policy(leaky, "test", "tester")
    _exercise(world, node_request)

    with store.session() as s:
        dump = "\n".join(
            repr(row) for table in Base.metadata.sorted_tables for row in s.execute(select(table))
        )
    assert world.a.profile in dump  # the reference is there...
    for secret in _secrets(world):
        assert secret not in dump  # ...the secrets are not
