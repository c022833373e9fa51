"""``gpucap images`` (and gRPC ListImages) against a running API server: every build the
image job recorded but deleted ones, with its key, cloud image, state, version, digest, age,
whether new nodes boot from it or which newer build superseded it (also across a changed
runtime image), its last error; filters by customer, cloud and region."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from controlplane.store.models import MachineImage
from tests.e2e.conftest import Daemon, Gpucap

POLICY = """\
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1, us-west-2]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap
  - name: acme-gcp
    cloud: gcp
    regions: [us-central1]
    credentials: {project: acme-prod, service_account: gpucap@acme-prod.iam.gserviceaccount.com}
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    runtime:
      image: vllm/vllm-openai:v2
    baked_image: {}
"""
H2, M30 = timedelta(hours=2), timedelta(minutes=30)
TIMED_OUT = "no image within 3600 s"


def _build(
    bid: str,
    account: str,
    cloud: str,
    region: str,
    image: str,
    state: str,
    v: int,
    *,
    now: datetime,
    **kw: Any,
) -> MachineImage:
    """A build row, its times relative to ``now`` (the test's own, taken when it starts:
    ages are checked against the listing's clock)."""
    created = kw.pop("created_at", now - timedelta(hours=3))
    return MachineImage(
        id=bid,
        customer="acme",
        account=account,
        cloud=cloud,
        region=region,
        runtime_image=image,
        image_version=v,
        instance_type="p5.48xlarge",
        state=state,
        image_name=f"gpucap-{bid}",
        created_at=created,
        state_at=created,
        **kw,
    )


def test_images_lists_each_build_with_its_use_and_filters(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(POLICY, "acme.yaml", "alice")
    now = datetime.now(UTC)

    def build(*args: Any, **kw: Any) -> MachineImage:
        return _build(*args, now=now, **kw)

    east = ("acme-aws", "aws", "us-east-1")
    v2 = "vllm/vllm-openai:v2"
    baked: dict[str, Any] = {
        "baked_at": now - timedelta(hours=2),
        "source_digest": "vllm@sha256:" + "a" * 64,
    }
    with api.store.session() as s:
        s.add_all(
            [
                # v1 and v2 of one key: v2 is what nodes boot from, v1 is superseded by it.
                build("b1", *east, v2, "ready", 1, image_id="ami-1", ready_at=now - H2, **baked),
                build("b2", *east, v2, "ready", 2, image_id="ami-2", ready_at=now - M30, **baked),
                # The old runtime image's key (nobody wants it now): superseded by the new one.
                build("b0", *east, "vllm/vllm-openai:v1", "ready", 1, ready_at=now - H2 * 12),
                build("b3", "acme-aws", "aws", "us-west-2", v2, "failed", 1, error=TIMED_OUT),
                build("b4", "acme-gcp", "gcp", "us-central1", v2, "building", 1, created_at=now),
                build("bx", *east, "vllm/vllm-openai:v0", "deleted", 1, image_id="ami-x"),
            ]
        )

    out = gpucap("images", "-o", "json")
    assert out.exit_code == 0, out.output
    by_id = {i["id"]: i for i in json.loads(out.stdout)["images"]}
    assert sorted(by_id) == ["b0", "b1", "b2", "b3", "b4"]  # deleted: not listed
    b2 = by_id["b2"]
    assert (b2["image_id"], b2["state"], b2["version"], b2["in_use"]) == ("ami-2", "ready", 2, True)
    assert b2["source_digest"].startswith("vllm@sha256:") and b2["superseded_by"] == ""
    assert 1790 <= b2["age_s"] <= 1900 and "built_at" in b2 and "ready_at" in b2
    assert (by_id["b1"]["superseded_by"], by_id["b1"]["in_use"]) == ("b2", False)
    assert by_id["b0"]["superseded_by"] == "b2"  # a changed runtime image
    assert by_id["b3"]["error"] == "no image within 3600 s" and by_id["b3"]["image_id"] == ""
    assert by_id["b4"]["cloud"] == "gcp" and by_id["b4"]["age_s"] < 60  # since it started

    gcp = json.loads(gpucap("images", "--cloud", "gcp", "-o", "json").stdout)["images"]
    assert [i["id"] for i in gcp] == ["b4"]
    west = json.loads(gpucap("images", "--region", "us-west-2", "-o", "json").stdout)
    assert [i["id"] for i in west["images"]] == ["b3"]
    nobody = gpucap("images", "--customer", "globex", "-o", "json")
    assert nobody.exit_code == 0 and json.loads(nobody.stdout)["images"] == []

    table = gpucap("images", "--customer", "acme")
    assert table.exit_code == 0, table.output
    assert "acme/acme-aws/aws:us-east-1" in table.stdout and "ami-2" in table.stdout
    assert "in use" in table.stdout and "superseded by b2" in table.stdout
    assert "no image within 3600 s" in table.stdout and "ami-x" not in table.stdout
