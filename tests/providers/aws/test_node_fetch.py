"""The node's weight fetch (bootstrap/fetch.py) against moto's S3 through the fault proxy:
parallel ranged reads verified against the ETag, a download interrupted and resumed
without reading a finished range again, bytes corrupted on the way detected and fetched
again; and the bootstrap (node.sh) falling back from source to source until one serves
the weights whole and verified."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import boto3
import pytest

from bootstrap.fetch import S3, FetchError, Http, fetch, main
from tests.fakes.moto_server import BASE_ACCESS_KEY, BASE_SECRET_KEY, FaultRule, MotoEmulator
from tests.providers.aws.test_staging_objects import PARTS, put_multipart
from tests.unit.test_bootstrap import ScriptNode, reports_endpoint

REGION = "us-east-1"
SMALL = b"config" * 50_000  # one part, 300 kB: read in 64 kB chunks below


@pytest.fixture
def s3(moto: MotoEmulator) -> Any:
    moto.reset_state()
    client = boto3.client("s3", region_name=REGION, endpoint_url=moto.direct_url)
    client.create_bucket(Bucket="acme-weights")
    put_multipart(client, "llama/model.safetensors", PARTS, bucket="acme-weights")
    client.put_object(Bucket="acme-weights", Key="llama/sub/config.json", Body=SMALL)
    return client


def source(moto: MotoEmulator) -> tuple[S3, Http]:
    http = Http()
    creds = {"key": BASE_ACCESS_KEY, "secret": BASE_SECRET_KEY, "token": ""}
    return S3(http, REGION, moto.endpoint_url, creds), http


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_a_prefix_is_fetched_in_parallel_ranges_and_verified(
    moto: MotoEmulator, s3: Any, tmp_path: Path
) -> None:
    src, http = source(moto)
    objects = src.objects("s3://acme-weights/llama/")
    assert sorted(o.name for o in objects) == ["model.safetensors", "sub/config.json"]
    got = fetch(objects, str(tmp_path), src.headers, http, connections=4, chunk=64 * 1024)
    assert got == sum(map(len, PARTS)) + len(SMALL)
    assert (tmp_path / "model.safetensors").read_bytes() == b"".join(PARTS)
    assert (tmp_path / "sub" / "config.json").read_bytes() == SMALL
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "config.json",
        "model.safetensors",
    ]
    # (parts of the multipart object, 64 kB chunks of the other)
    assert moto.faults.seen["GetObject"] == len(PARTS) + -(-len(SMALL) // (64 * 1024))


def test_an_interrupted_fetch_resumes_without_reading_a_finished_range_again(
    moto: MotoEmulator, s3: Any, tmp_path: Path
) -> None:
    src, http = source(moto)
    [model] = src.objects("s3://acme-weights/llama/model.safetensors")
    moto.drop_next_response("GetObject")
    with pytest.raises(OSError):  # the connection dropped, no attempt left
        fetch([model], str(tmp_path), src.headers, http, connections=2, attempts=1)
    assert not (tmp_path / "model.safetensors").exists()
    assert (tmp_path / "model.safetensors.gpucap-ranges").exists()
    got = fetch([model], str(tmp_path), src.headers, http, connections=2)
    assert got == len(PARTS[0])  # only the part that was lost (all parts 5 MiB but the tail)
    assert (tmp_path / "model.safetensors").read_bytes() == b"".join(PARTS)
    assert moto.faults.seen["GetObject"] == len(PARTS) + 1


def test_bytes_corrupted_on_the_way_are_detected_and_fetched_again(
    moto: MotoEmulator, s3: Any, tmp_path: Path
) -> None:
    src, http = source(moto)
    objects = src.objects("s3://acme-weights/llama/")
    logs: list[str] = []
    moto.corrupt_next_response("GetObject")
    fetch(objects, str(tmp_path), src.headers, http, connections=1, log=logs.append)
    assert len(logs) == 1 and "checksum mismatch, fetching it again" in logs[0]
    assert md5((tmp_path / "model.safetensors").read_bytes()) == md5(b"".join(PARTS))
    assert (tmp_path / "sub" / "config.json").read_bytes() == SMALL


def test_a_file_that_never_matches_fails_the_fetch(
    moto: MotoEmulator, s3: Any, tmp_path: Path
) -> None:
    src, http = source(moto)
    objects = src.objects("s3://acme-weights/llama/sub/config.json")
    for _ in range(2):
        moto.corrupt_next_response("GetObject")
    with pytest.raises(FetchError, match="checksum mismatch after fetching it again"):
        fetch(objects, str(tmp_path), src.headers, http, connections=1)


def test_the_command_reads_the_nodes_own_credentials_from_the_environment(
    moto: MotoEmulator, s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", REGION)
    assert main(["s3://acme-weights/llama/", str(tmp_path), "--connections", "3"]) == 0
    assert (tmp_path / "model.safetensors").read_bytes() == b"".join(PARTS)
    assert main(["s3://acme-weights/nothing/", str(tmp_path / "x")]) == 1


def test_a_node_takes_its_weights_from_the_first_source_that_serves_them_whole(
    moto: MotoEmulator, s3: Any, tmp_path: Path
) -> None:
    """node.sh with the fetch tool its user data carries, against moto: the first source
    refuses the node (AccessDenied), the second is missing, the third serves bytes that do
    not match their ETag (twice: fetched again once, then given up), the fourth is good. The
    good bytes land, the weights_fetched report names the fourth, the node's log each
    failure; booted again, the node keeps the weights it verified and fetches nothing."""
    for bucket in ("acme-weights-us-west-2", "acme-weights-eu-west-1"):
        s3.create_bucket(Bucket=bucket)
    # (one range: each read of the file is one GET, so both corruptions hit this source)
    s3.put_object(
        Bucket="acme-weights-eu-west-1", Key="llama/model.safetensors", Body=b"".join(PARTS)
    )
    s3.put_object(Bucket="acme-weights-eu-west-1", Key="llama/sub/config.json", Body=SMALL)
    sources = [
        "s3://acme-weights-us-west-2/llama/",  # (refused below)
        "s3://acme-weights-us-east-2/llama/",  # no such bucket
        "s3://acme-weights-eu-west-1/llama/",  # corrupted on every read below
        "s3://acme-weights/llama/",
    ]
    moto.inject("AccessDenied", 403, action="ListObjectsV2")  # (the first list: source 1's)
    moto.faults.add(FaultRule("GetObject", corrupt=True, remaining=2))
    env = {
        "AWS_ENDPOINT_URL_S3": moto.endpoint_url,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": BASE_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": BASE_SECRET_KEY,
    }
    with reports_endpoint() as (url, got):
        node = ScriptNode(tmp_path, 8, url, "t", sources=sources, env=env)
        code, err = node.run()
        assert code == 0, err
        fetched = [r["detail"] for r in got if r["phase"] == "weights_fetched"]
        assert fetched == ["s3://acme-weights/llama/"]
        assert (node.weights / "model.safetensors").read_bytes() == b"".join(PARTS)
        assert (node.weights / "sub" / "config.json").read_bytes() == SMALL
        for uri, why in (
            (sources[0], "HTTP 403"),
            (sources[1], "HTTP 404"),
            (sources[2], "checksum mismatch after fetching it again"),
        ):
            assert f"gpucap-fetch: {uri}: " in err and why in err.split(uri)[1], uri
            assert f"weights not fetched from {uri}; trying the next source" in err
        assert moto.faults.pending() == 0  # (every fault was met)
        assert not [p for p in node.weights.rglob("*") if p.name.endswith((".part", "-ranges"))]

        reads = moto.faults.seen["GetObject"]
        got.clear()
        code, err = node.run()
        assert code == 0, err
        fetched = [r["detail"] for r in got if r["phase"] == "weights_fetched"]
        assert fetched == ["on disk already, from s3://acme-weights/llama/"]
        assert moto.faults.seen["GetObject"] == reads


def test_a_fetch_from_another_source_starts_over_and_one_from_the_same_resumes(
    moto: MotoEmulator, s3: Any, tmp_path: Path
) -> None:
    """A run interrupted on one source leaves its partial file and ranges; a run from
    another source removes them first (its ranges may be cut elsewhere), and a run from
    the same source keeps the files it verified already."""
    s3.create_bucket(Bucket="acme-copy")
    s3.put_object(Bucket="acme-copy", Key="llama/model.safetensors", Body=b"".join(PARTS))
    s3.put_object(Bucket="acme-copy", Key="llama/sub/config.json", Body=SMALL)
    src, http = source(moto)
    [model] = src.objects("s3://acme-weights/llama/model.safetensors")
    moto.drop_next_response("GetObject")
    with pytest.raises(OSError):
        fetch([model], str(tmp_path), src.headers, http, attempts=1, source="s3://acme-weights/")
    assert (tmp_path / "model.safetensors.gpucap-ranges").exists()

    copy = src.objects("s3://acme-copy/llama/")  # (one part each: other ranges)
    got = fetch(copy, str(tmp_path), src.headers, http, chunk=1 << 20, source="s3://acme-copy/")
    assert got == sum(map(len, PARTS)) + len(SMALL)  # (nothing of the other source's)
    assert (tmp_path / "model.safetensors").read_bytes() == b"".join(PARTS)
    assert not list(tmp_path.glob("*.gpucap-ranges"))

    (tmp_path / "sub" / "config.json").unlink()  # (lost: the rest stays verified)
    reads = moto.faults.seen["GetObject"]
    got = fetch(copy, str(tmp_path), src.headers, http, source="s3://acme-copy/")
    assert got == len(SMALL) and moto.faults.seen["GetObject"] == reads + 1
    assert (tmp_path / "sub" / "config.json").read_bytes() == SMALL
