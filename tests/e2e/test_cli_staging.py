"""``gpucap staging [MODEL]`` (and gRPC ListStaging) against a running API server: every
staged copy with its progress and storage cost, every site with its budget and use, as the
staging job wrote them; a model filter; an unknown model."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from controlplane.store.models import WeightCopy
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import STAGING_POLICY

GB = 10**9
T = datetime(2026, 12, 3, 12, tzinfo=UTC)


def _copy(region: str, state: str, done: int, model: str = "llama", **kw: object) -> WeightCopy:
    objects = [{"dest": "a", "done": done >= 4 * GB}, {"dest": "b", "done": False}]
    return WeightCopy(
        customer="acme",
        model=model,
        account="acme-aws",
        cloud="aws",
        region=region,
        source_uri=f"s3://acme-origin/{model}/",
        dest_uri=f"s3://acme-weights-{region}/gpucap-weights/acme/{model}/",
        state=state,
        reason="replicas run here",
        bytes_total=8 * GB,
        bytes_done=done,
        transfer={"objects": objects},
        created_at=T,
        updated_at=T,
        **kw,
    )


def test_staging_shows_each_copy_with_progress_and_each_sites_budget(
    gpucap: Gpucap, api: Daemon
) -> None:
    api.service.apply_policy(STAGING_POLICY, "acme.yaml", "alice")
    with api.store.session() as s:
        s.add(_copy("us-east-1", "copying", 6 * GB))
        s.add(
            _copy("us-west-2", "failed", 0, error="the bucket's quota refused the copy", retry_at=T)
        )
        s.add(_copy("us-east-1", "evicted", 0, model="old"))

    out = gpucap("staging", "llama", "-o", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    by_region = {c["region"]: c for c in data["copies"]}
    assert sorted(by_region) == ["us-east-1", "us-west-2"]
    east = by_region["us-east-1"]
    assert (east["state"], east["progress"], east["objects"], east["objects_done"]) == (
        "copying",
        0.75,
        2,
        1,
    )
    assert east["usd_per_month"] == 8 * 0.023
    west = by_region["us-west-2"]
    assert west["state"] == "failed" and "quota" in west["error"] and "retry_at" in west
    sites = {s["region"]: s for s in data["sites"]}
    assert sites["us-east-1"]["used_bytes"] == 8 * GB  # (int64: a number, not protobuf's string)
    assert sites["us-west-2"]["used_bytes"] == 0  # a failed copy holds nothing
    assert sites["us-east-1"]["budget_bytes"] == GB
    assert sites["us-east-1"]["prefix_uri"] == "s3://acme-weights-us-east-1/gpucap-weights/"

    table = gpucap("staging")
    assert table.exit_code == 0, table.output
    assert "acme/llama" in table.stdout and "75% (1/2 objects)" in table.stdout
    assert "acme/old" not in table.stdout  # evicted: not anywhere any more

    missing = gpucap("staging", "nope")
    assert missing.exit_code != 0 and "no model named 'nope'" in missing.output
