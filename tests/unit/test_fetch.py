"""bootstrap/fetch.py's pure parts: its SigV4 signature equals botocore's for the same
request, and the ranges it reads follow an object's own parts."""

from __future__ import annotations

import datetime as dt

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from bootstrap.fetch import MiB, Obj, ranges, sigv4_headers

URL = (
    "https://acme-w.s3.us-east-1.amazonaws.com/gpucap-weights/acme/llama/"
    "model-00001-of-00002.safetensors?partNumber=2"
)


@pytest.mark.parametrize("token", ["", "FwoGZXIvYXdzE+/token=="])
@pytest.mark.parametrize("url", [URL, "http://127.0.0.1:9000/acme-w/a%20b/c.bin"])
def test_signature_equals_botocores(token: str, url: str) -> None:
    req = AWSRequest(method="GET", url=url, headers={"Range": "bytes=0-99"})
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", token or None)
    S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    when = dt.datetime.strptime(req.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    mine = sigv4_headers(
        "GET",
        url,
        "us-east-1",
        {"key": "AKIDEXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG", "token": token},
        when,
        {"Range": "bytes=0-99"},
    )
    assert mine["authorization"] == req.headers["Authorization"]


def test_ranges_follow_the_objects_parts_else_chunks() -> None:
    parts = Obj("a", "u", 13 * MiB, "etag", "x-3", (5 * MiB, 5 * MiB, 3 * MiB))
    assert ranges(parts, 64 * MiB) == [(0, 5 * MiB), (5 * MiB, 5 * MiB), (10 * MiB, 3 * MiB)]
    whole = Obj("b", "u", 10, "etag", "md5")
    assert ranges(whole, 4) == [(0, 4), (4, 4), (8, 2)]
    assert ranges(Obj("c", "u", 0, "", ""), 4) == []


def test_the_tool_a_node_boots_with_is_the_module_without_its_docstrings() -> None:
    import base64
    import gzip

    from bootstrap.render import fetch_tool

    source = gzip.decompress(base64.b64decode(fetch_tool())).decode()
    compile(source, "fetch.py", "exec")
    assert "def fetch(" in source and "gpucap-fetch: a node's model weights" not in source
    assert len(fetch_tool()) < 8 * 1024
