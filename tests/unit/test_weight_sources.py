"""Where a node fetches its weights from, in order (controlplane.node_boot.weight_sources):
staged copies of its own cloud, its own account's first, nearest first by the regions'
names; then its cloud's origin, then the other clouds'; at most six, the origins kept."""

from __future__ import annotations

import pytest

from bootstrap.render import MAX_WEIGHT_SOURCES
from controlplane.node_boot import StagedCopy, region_distance, weight_sources
from schema.policy import Weights
from schema.types import Cloud

WEIGHTS = Weights(
    uri="s3://acme-origin/llama/",
    size_gb=140,
    mirrors=["gs://acme-origin-gcs/llama/", "oci://acme@ns/llama/"],
)


def copy(region: str, account: str = "acme-aws", cloud: str = "aws") -> StagedCopy:
    return StagedCopy(cloud, account, region, f"s3://{account}-{region}/w/")


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("us-east-1", "us-east-1", 0),
        ("us-east-1", "us-east-2", 1),  # (same direction)
        ("us-east-1", "us-west-2", 2),
        ("us-east-1", "ca-central-1", 2),  # (North America both)
        ("us-central1", "northamerica-northeast1", 2),  # (GCP's names)
        ("us-central1", "us-central2", 1),
        ("eu-frankfurt-1", "uk-london-1", 2),  # (OCI's)
        ("europe-west4", "europe-west1", 1),
        ("us-east-1", "eu-west-1", 3),
        ("ap-northeast-1", "asia-east1", 2),
        ("xx-east-1", "us-east-1", 3),  # (a name it does not know: far)
    ],
)
def test_region_distance(a: str, b: str, distance: int) -> None:
    assert region_distance(a, b) == distance == region_distance(b, a)


def test_own_account_nearest_first_then_the_origins_own_cloud_first() -> None:
    copies = [
        copy("eu-west-1"),
        copy("us-west-2"),
        copy("us-east-1", account="acme-shared"),
        copy("us-east-2"),
        copy("us-east1", account="acme-gcp", cloud="gcp"),
    ]
    assert weight_sources(WEIGHTS, Cloud.AWS, "acme-aws", "us-east-1", copies) == (
        "s3://acme-aws-us-east-2/w/",
        "s3://acme-aws-us-west-2/w/",
        "s3://acme-aws-eu-west-1/w/",
        "s3://acme-origin/llama/",
        "gs://acme-origin-gcs/llama/",
        "oci://acme@ns/llama/",
    )  # (the other account's copy: past the six; the GCP copy: another cloud's)
    on_gcp = weight_sources(WEIGHTS, Cloud.GCP, "acme-gcp", "us-east1", copies)
    assert on_gcp == (
        "s3://acme-gcp-us-east1/w/",
        "gs://acme-origin-gcs/llama/",
        "s3://acme-origin/llama/",
        "oci://acme@ns/llama/",
    )


def test_at_most_six_with_every_origin_and_none_repeated() -> None:
    copies = [copy(f"us-east-{i}") for i in range(1, 9)] + [copy("us-east-1")]
    got = weight_sources(WEIGHTS, Cloud.AWS, "acme-aws", "us-east-1", copies)
    assert len(got) == MAX_WEIGHT_SOURCES == len(set(got))
    assert got[:3] == (
        "s3://acme-aws-us-east-1/w/",
        "s3://acme-aws-us-east-2/w/",
        "s3://acme-aws-us-east-3/w/",
    )
    assert got[3:] == (
        "s3://acme-origin/llama/",
        "gs://acme-origin-gcs/llama/",
        "oci://acme@ns/llama/",
    )
    alone = Weights(uri="s3://acme-origin/llama/", size_gb=1)
    assert weight_sources(alone, Cloud.OCI, "a", "us-ashburn-1", []) == ("s3://acme-origin/llama/",)
