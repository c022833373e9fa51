"""``gpucap explain MODEL`` knows what is baked: once a pool's key (customer, account,
region, the model's runtime image) has a ready baked image, that pool's bootstrap and image
phases are the baked figures (and what was learned there of them, from base-image boots,
no longer counts), its total is shorter, and the other pools are unchanged. The API's
snapshot reader sees the new image without a restart."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from coldstart.model import Phases
from controlplane.loop.images import runtime_image
from controlplane.store.models import MachineImage
from schema.policy_file import parse_policy
from tests.e2e.conftest import Daemon, Gpucap
from tests.e2e.test_cli_explain import EAST, _booted_in_east
from tests.policy_texts import example_policy

WEST = EAST.replace("us-east-1", "us-west-2")


def _pools(gpucap: Gpucap) -> dict[str, dict[str, Any]]:
    out = gpucap("explain", "llama-70b", "-o", "json")
    assert out.exit_code == 0, out.output
    return {p["pool_id"]: p for p in json.loads(out.stdout)["pools"]}


def _phases(pool: dict[str, Any]) -> dict[str, tuple[float, str]]:
    return {ph["name"]: (ph["seconds"], ph["source"]) for ph in pool["phases"]}


def _bake(api: Daemon, bid: str, region: str, image: str, state: str = "ready") -> None:
    now = datetime.now(UTC)
    with api.store.session() as s:
        s.add(
            MachineImage(
                id=bid,
                customer="acme",
                account="acme-aws",
                cloud="aws",
                region=region,
                runtime_image=image,
                instance_type="p5.48xlarge",
                state=state,
                image_name=f"gpucap-{bid}",
                image_id=f"ami-{bid}",
                created_at=now,
                state_at=now,
                ready_at=now if state == "ready" else None,
            )
        )


def test_a_pool_with_a_ready_baked_image_explains_the_baked_phases(
    gpucap: Gpucap, api: Daemon
) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    _booted_in_east(api)
    policy = parse_policy(example_policy(), "p.yaml").policy
    [model] = [m for m in policy.models if m.name == "llama-70b"]
    image = runtime_image(model)
    before = _pools(gpucap)
    assert _phases(before[EAST])["bootstrap"] == (60, "learned")

    _bake(api, "b1", "us-west-2", "some/other-engine:v1")  # another runtime image: not this model's
    _bake(api, "b2", "us-east-1", image, state="building")  # not ready yet
    assert _pools(gpucap) == before

    _bake(api, "b3", "us-west-2", image)
    _bake(api, "b4", "us-east-1", image)
    after = _pools(gpucap)
    p = Phases()
    # The key is (customer, account, region, runtime image): every instance type of
    # acme-aws in those two regions boots the image; the GCP and OCI pools do not.
    baked = {
        k for k in before if k.startswith(("acme/acme-aws/us-east-1/", "acme/acme-aws/us-west-2/"))
    }
    assert {EAST, WEST} <= baked
    for pool in baked:
        old, new = _phases(before[pool]), _phases(after[pool])
        assert new["bootstrap"] == (p.bootstrap_baked_s, "default")
        assert new["image"] == (p.image_prepulled_s, "default")
        assert new["bootstrap"][0] <= old["bootstrap"][0] and new["image"][0] < old["image"][0]
        assert after[pool]["expected_ready_s"] < before[pool]["expected_ready_s"]
        assert {k: v for k, v in new.items() if k not in ("bootstrap", "image")} == {
            k: v for k, v in old.items() if k not in ("bootstrap", "image")
        }
    # (EAST learned 60 s of bootstrap from a base-image boot; WEST had the base default)
    assert _phases(before[WEST])["bootstrap"] == (p.bootstrap_base_s, "default")
    others = set(before) - baked
    assert others and all(after[k] == before[k] for k in others)

    table = gpucap("explain", "acme/llama-70b")
    assert table.exit_code == 0, table.output
    west = next(line for line in table.stdout.splitlines() if WEST in line)
    assert "15s" in west  # the image phase: pre-pulled in the baked image
