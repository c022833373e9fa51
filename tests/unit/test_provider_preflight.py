"""providers.preflight: the generic account checks over the Provider interface (sim cloud)."""

from __future__ import annotations

from providers.base import NodeRequest
from providers.preflight import generic_preflight, image_findings
from providers.sim import SimCloud, SimProvider, SimTimings
from schema.catalog import INSTANCE_TYPES
from schema.types import Cloud


def _provider() -> tuple[SimCloud, SimProvider]:
    world = SimCloud(timings=SimTimings(0.0, 0.0, 0.0))
    return world, SimProvider(Cloud.OCI, "shared-oci", world)


def test_every_region_answers_and_offers_the_gpu_nodes() -> None:
    _, provider = _provider()
    found = generic_preflight(provider, ["us-ashburn-1", "uk-london-1"])
    assert all(f.ok for f in found)
    assert [(f.check, f.target) for f in found] == [
        ("region", "us-ashburn-1"),
        ("offerings", "us-ashburn-1"),
        ("quota", "us-ashburn-1"),
        ("region", "uk-london-1"),
        ("offerings", "uk-london-1"),
        ("quota", "uk-london-1"),
    ]
    offers = found[1].detail
    for t in INSTANCE_TYPES:
        if t.cloud == Cloud.OCI:
            assert f"{t.name} ({t.gpu}) in " in offers
    assert "not checked" in found[2].detail


def test_a_region_without_capacity_fails_offerings() -> None:
    world, provider = _provider()
    for t in INSTANCE_TYPES:
        if t.cloud == Cloud.OCI:
            world.set_capacity(Cloud.OCI, "uk-london-1", t.name, 0)
    found = {(f.check, f.target): f for f in generic_preflight(provider, ["uk-london-1"])}
    assert found[("region", "uk-london-1")].ok
    assert not found[("offerings", "uk-london-1")].ok
    assert "is available in uk-london-1" in found[("offerings", "uk-london-1")].detail


def test_an_unknown_region_fails_with_the_reason() -> None:
    _, provider = _provider()
    [f] = [f for f in generic_preflight(provider, ["mars-1"]) if f.target == "mars-1"]
    assert f.check == "region" and not f.ok and "InvalidRequest" in f.detail


def test_images_present_and_missing() -> None:
    _, provider = _provider()
    node = provider.create_node(
        NodeRequest(intent_id="n1", instance_type="BM.GPU.H100.8", region="us-ashburn-1")
    ).node
    image = provider.create_image("us-ashburn-1", node.instance_id, "baked-1")
    found = image_findings(
        provider, {"us-ashburn-1": image.image_id, "uk-london-1": "sim-img-missing"}
    )
    by_region = {f.target.split()[0]: f for f in found}
    assert (
        by_region["us-ashburn-1"].ok and "baked-1 (available)" in by_region["us-ashburn-1"].detail
    )
    assert not by_region["uk-london-1"].ok
    assert "does not exist" in by_region["uk-london-1"].detail
