"""gpucap-fetch: a node's model weights from an object store to its local disk, by parallel
ranged reads. The bootstrap (``node.sh``) runs it for ``s3://`` and ``gs://`` weights;
stdlib only, so it runs on any GPU image with python3 (no boto3, no cloud CLI).

Why not ``aws s3 cp``: one S3 connection tops out near 5 Gbps (coldstart.md §1.4; the
Run:ai streamer needed 16-32 concurrent reads to fill a 40 Gbps NIC), and the SDKs' own
download paths move every byte through several Python buffers and one writer thread. Here
each of ``--connections`` threads keeps one HTTP connection open, reads large ranges from
the socket into one buffer of its own (``readinto``), hashes them there (hashlib releases
the GIL on large buffers) and writes them with ``pwrite`` at their offset. (Reading
straight into the mapped file was not faster: a page fault per 4 KiB.)

- Ranges follow a multipart S3 object's own parts (``HEAD ?partNumber=N``), so the MD5s of
  the ranges make its ETag again: the download is verified without a second read. A
  single-part object (ETag = MD5) and a GCS object (``md5Hash``) are hashed once written.
- Resumable: every range written is appended to ``<file>.gpucap-ranges``; a run after an
  interruption (a crash, a reboot, an expired credential) fetches only what is missing.
- A file whose checksum does not match is fetched again whole, once; then the run fails
  (and the bootstrap tries its next source: a corrupted copy is never served).
- ``<dest>/.gpucap-fetch`` names the source being fetched and each file verified from it:
  a run from the same source skips those files, a run from another source first removes
  the partial files of the previous one (its ranges may be cut elsewhere).
- Credentials are the node's own: S3 from the environment or the instance profile (IMDSv2),
  signed with SigV4; GCS a token from the metadata server. Nothing is logged but URIs.

The weights land on local NVMe where the instance has it: stopping an instance wipes its
instance-store NVMe (coldstart.md §4), so a stopped node fetches them again when started.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import hmac
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

MiB = 1024 * 1024
CHUNK = 64 * MiB  # a range of an object without parts of its own
BUFFER = 8 * MiB  # one readinto at most this much
# Connections: 16 fill a node's NIC (S3: ~5 Gbps each, coldstart.md §1.4), but each costs
# CPU for its copies and hashing, so a small machine runs fewer.
CONNECTIONS = max(4, min(16, 2 * (os.cpu_count() or 2)))
ATTEMPTS = 4  # per range
STATE = ".gpucap-fetch"  # in dest: the source, then a "checksum size name" line a verified file


@dataclass(frozen=True)
class Obj:
    name: str  # relative path under the destination directory
    url: str  # what a ranged GET reads
    size: int
    kind: str  # "etag" (S3) | "md5_b64" (GCS) | ""
    checksum: str
    parts: tuple[int, ...] = ()  # S3 multipart: the parts' sizes


class FetchError(Exception):
    pass


# ---- HTTP ---------------------------------------------------------------------------------


class Http:
    """One kept-alive connection per thread and host."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._local = threading.local()

    def conn(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        u = urllib.parse.urlsplit(url)
        key = (u.scheme, u.netloc)
        pool: dict[tuple[str, str], http.client.HTTPConnection] = getattr(self._local, "pool", {})
        self._local.pool = pool
        c = pool.get(key)
        if c is None:
            cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
            c = pool[key] = cls(u.netloc, timeout=self.timeout)
        return c, u.path + (f"?{u.query}" if u.query else "")

    def drop(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        c = getattr(self._local, "pool", {}).pop((u.scheme, u.netloc), None)
        if c is not None:
            c.close()

    def request(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        c, path = self.conn(url)
        try:
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            self.drop(url)
            raise
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data


# ---- S3 -----------------------------------------------------------------------------------


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()  # the payload of a GET or HEAD


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sigv4_headers(
    method: str,
    url: str,
    region: str,
    creds: dict[str, str],
    now: dt.datetime,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """AWS Signature Version 4 for an S3 request with no body, as botocore's S3SigV4Auth
    signs it (tests/unit/test_fetch.py compares the two)."""
    u = urllib.parse.urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    headers = {
        "host": u.netloc,
        "x-amz-content-sha256": EMPTY_SHA256,
        "x-amz-date": amz_date,
        **{k.lower(): v for k, v in (extra or {}).items()},
    }
    if creds.get("token"):
        headers["x-amz-security-token"] = creds["token"]
    query = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(query)
    )
    names = sorted(headers)
    canonical = "\n".join(
        [
            method,
            urllib.parse.quote(urllib.parse.unquote(u.path) or "/", safe="/-_.~"),
            canonical_query,
            "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names),
            ";".join(names),
            EMPTY_SHA256,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{_sha(canonical.encode())}"
    key = f"AWS4{creds['secret']}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={creds['key']}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    del headers["host"]
    return headers


IMDS = "http://169.254.169.254"


def aws_credentials(http_: Http) -> dict[str, str]:
    """From the environment, else the instance profile (IMDSv2)."""
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return {
            "key": env["AWS_ACCESS_KEY_ID"],
            "secret": env["AWS_SECRET_ACCESS_KEY"],
            "token": env.get("AWS_SESSION_TOKEN", ""),
        }
    ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "300"}
    status, _, token = http_.request("PUT", f"{IMDS}/latest/api/token", ttl)
    if status != 200:
        raise FetchError("no AWS credentials: none in the environment, IMDSv2 refused a token")
    auth = {"X-aws-ec2-metadata-token": token.decode()}
    base = f"{IMDS}/latest/meta-data/iam/security-credentials/"
    _, _, role = http_.request("GET", base, auth)
    _, _, body = http_.request("GET", base + role.decode().strip(), auth)
    c = json.loads(body)
    return {"key": c["AccessKeyId"], "secret": c["SecretAccessKey"], "token": c["Token"]}


@dataclass
class S3:
    http: Http
    region: str
    endpoint: str  # "" = AWS's own (virtual-hosted style)
    creds: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, http_: Http) -> S3:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL", "")
        if not region:
            ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "300"}
            _, _, token = http_.request("PUT", f"{IMDS}/latest/api/token", ttl)
            auth = {"X-aws-ec2-metadata-token": token.decode()}
            _, _, doc = http_.request("GET", f"{IMDS}/latest/meta-data/placement/region", auth)
            region = doc.decode().strip()
        return cls(http_, region, endpoint.rstrip("/"), aws_credentials(http_))

    def url(self, bucket: str, key: str = "", query: str = "") -> str:
        path = urllib.parse.quote(key, safe="/-_.~")
        q = f"?{query}" if query else ""
        if self.endpoint:
            return f"{self.endpoint}/{bucket}/{path}{q}"
        return f"https://{bucket}.s3.{self.region}.amazonaws.com/{path}{q}"

    def headers(self, method: str, url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        now = dt.datetime.now(dt.UTC)
        return sigv4_headers(method, url, self.region, self.creds, now, extra)

    def call(self, method: str, url: str) -> tuple[dict[str, str], bytes]:
        status, headers, body = self.http.request(method, url, self.headers(method, url))
        if status >= 300:
            raise FetchError(f"{method} {url}: HTTP {status} {body[:200]!r}")
        return headers, body

    def objects(self, uri: str) -> list[Obj]:
        bucket, _, key = uri[len("s3://") :].partition("/")
        if key and not key.endswith("/"):
            return [self._obj(bucket, key, key.rsplit("/", 1)[-1])]
        out, token = [], ""
        while True:
            q = "list-type=2&prefix=" + urllib.parse.quote(key, safe="")
            if token:
                q += "&continuation-token=" + urllib.parse.quote(token, safe="")
            _, body = self.call("GET", self.url(bucket, "", q))
            root = ET.fromstring(body)
            ns = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
            for c in root.iter(f"{ns}Contents"):
                name = c.findtext(f"{ns}Key") or ""
                if not name.endswith("/"):
                    out.append(self._obj(bucket, name, name[len(key) :]))
            token = root.findtext(f"{ns}NextContinuationToken") or ""
            if not token:
                return out

    def _obj(self, bucket: str, key: str, name: str) -> Obj:
        url = self.url(bucket, key)
        head, _ = self.call("HEAD", url)
        etag = head.get("etag", "").strip('"')
        parts: tuple[int, ...] = ()
        if "-" in etag:
            n = int(etag.rsplit("-", 1)[1])
            parts = tuple(
                int(
                    self.call("HEAD", self.url(bucket, key, f"partNumber={i}"))[0]["content-length"]
                )
                for i in range(1, n + 1)
            )
        return Obj(name, url, int(head["content-length"]), "etag", etag, parts)


# ---- GCS ----------------------------------------------------------------------------------


@dataclass
class Gcs:
    http: Http
    endpoint: str
    token: str

    @classmethod
    def from_env(cls, http_: Http) -> Gcs:
        host = os.environ.get("STORAGE_EMULATOR_HOST", "")
        token = os.environ.get("GPUCAP_GCS_TOKEN", "")
        if not token:
            url = (
                "http://metadata.google.internal/computeMetadata/v1/instance/"
                "service-accounts/default/token"
            )
            status, _, body = http_.request("GET", url, {"Metadata-Flavor": "Google"})
            if status != 200:
                raise FetchError("no GCS token from the metadata server")
            token = json.loads(body)["access_token"]
        return cls(http_, (host or "https://storage.googleapis.com").rstrip("/"), token)

    def headers(self, method: str, url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    def objects(self, uri: str) -> list[Obj]:
        bucket, _, key = uri[len("gs://") :].partition("/")
        b = urllib.parse.quote(bucket, safe="")
        base = f"{self.endpoint}/storage/v1/b/{b}/o"
        if key and not key.endswith("/"):
            items = [self._get(f"{base}/{urllib.parse.quote(key, safe='')}")]
            prefix = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
        else:
            items, token, prefix = [], "", key
            while True:
                q = "prefix=" + urllib.parse.quote(key, safe="")
                page = self._get(f"{base}?{q}" + (f"&pageToken={token}" if token else ""))
                items += page.get("items", [])
                token = page.get("nextPageToken", "")
                if not token:
                    break
        return [
            Obj(
                i["name"][len(prefix) :],
                f"{base}/{urllib.parse.quote(i['name'], safe='')}?alt=media",
                int(i["size"]),
                "md5_b64" if i.get("md5Hash") else "",
                i.get("md5Hash", ""),
            )
            for i in items
            if not i["name"].endswith("/")
        ]

    def _get(self, url: str) -> dict:  # type: ignore[type-arg]
        status, _, body = self.http.request("GET", url, self.headers("GET", url))
        if status >= 300:
            raise FetchError(f"GET {url}: HTTP {status} {body[:200]!r}")
        result: dict = json.loads(body)  # type: ignore[type-arg]
        return result


# ---- the download -------------------------------------------------------------------------

Signer = Callable[[str, str, "dict[str, str] | None"], "dict[str, str]"]


def ranges(o: Obj, chunk: int) -> list[tuple[int, int]]:
    """(offset, length) of each range: the object's own parts, else chunks."""
    sizes = o.parts or tuple(min(chunk, o.size - off) for off in range(0, o.size, chunk))
    out, off = [], 0
    for s in sizes:
        out.append((off, s))
        off += s
    return out


_local = threading.local()


def _buffer() -> memoryview:
    """This thread's buffer: the socket reads into it, MD5 and pwrite read from it."""
    buf: memoryview | None = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(bytearray(BUFFER))
    return buf


def _read_range(
    http_: Http, sign: Signer, o: Obj, fd: int, off: int, length: int, verify: bool
) -> str:
    """GET one range into ``fd`` at ``off``. Returns the range's MD5 (hex; "" without
    ``verify``)."""
    rng = {"Range": f"bytes={off}-{off + length - 1}"}
    c, path = http_.conn(o.url)
    md5 = hashlib.md5(usedforsecurity=False)
    buf = _buffer()
    try:
        c.request("GET", path, headers=sign("GET", o.url, rng))
        r = c.getresponse()
        if r.status not in (200, 206):
            body = r.read()
            raise FetchError(f"GET {o.url} {rng['Range']}: HTTP {r.status} {body[:200]!r}")
        if r.status == 200 and length != o.size:
            r.read()
            raise FetchError(f"GET {o.url}: the server ignored the Range header")
        pos = 0
        while pos < length:
            n = r.readinto(buf[: min(BUFFER, length - pos)])
            if not n:
                raise FetchError(f"GET {o.url}: connection closed at {off + pos}")
            if verify:
                md5.update(buf[:n])
            os.pwrite(fd, buf[:n], off + pos)
            pos += n
        if r.read(1):
            raise FetchError(f"GET {o.url}: more bytes than the range")
    except (OSError, http.client.HTTPException):
        http_.drop(o.url)
        raise
    return md5.hexdigest() if verify else ""


def _file_md5(path: str) -> bytes:
    md5 = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(BUFFER):
            md5.update(block)
    return md5.digest()


def _verified(o: Obj, path: str, part_md5s: dict[int, str], verify: bool = True) -> bool:
    if not verify:
        return os.path.getsize(path) == o.size
    if o.kind == "etag" and o.parts:
        digests = b"".join(bytes.fromhex(part_md5s[i]) for i in range(len(o.parts)))
        return f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(o.parts)}" == (
            o.checksum
        )
    if o.kind == "etag":
        return _file_md5(path).hex() == o.checksum
    if o.kind == "md5_b64":
        return base64.b64encode(_file_md5(path)).decode() == o.checksum
    return os.path.getsize(path) == o.size


def fetch(
    objects: list[Obj],
    dest: str,
    sign: Signer,
    http_: Http,
    *,
    connections: int = CONNECTIONS,
    chunk: int = CHUNK,
    attempts: int = ATTEMPTS,
    verify: bool = True,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    source: str = "",
) -> int:
    """Download every object under ``dest``; returns the bytes fetched over the network
    this run. With ``source`` (the URI the objects were listed from), files verified from
    it by an earlier run are kept (:func:`begin`). Raises FetchError when a range fails
    ``attempts`` times or a file still does not match its checksum after being fetched
    again."""
    fetched = 0
    done = begin(dest, source) if source else set()
    with ThreadPoolExecutor(max_workers=max(1, connections)) as pool:
        for o in objects:
            path = os.path.join(dest, o.name)
            line = f"{o.checksum} {o.size} {o.name}"
            if line in done and os.path.isfile(path) and os.path.getsize(path) == o.size:
                continue
            for again in (False, True):
                fetched += _fetch_one(o, path, sign, http_, pool, chunk, attempts, verify)
                if _verified(o, path + ".part", _done(path), verify):
                    os.replace(path + ".part", path)
                    os.remove(path + ".gpucap-ranges")
                    if source and verify and o.checksum:
                        with open(os.path.join(dest, STATE), "a") as f:
                            f.write(line + "\n")
                    break
                log(f"gpucap-fetch: {o.name}: checksum mismatch, fetching it again")
                for leftover in (path + ".part", path + ".gpucap-ranges"):
                    os.remove(leftover)
                if again:
                    raise FetchError(f"{o.name}: checksum mismatch after fetching it again")
    return fetched


def begin(dest: str, source: str) -> set[str]:
    """The files verified from ``source`` by earlier runs (their lines of the state file).
    When the state names another source, its partial files and ranges go first: ranges of
    one source never complete another's file, whose parts may be cut elsewhere."""
    path = os.path.join(dest, STATE)
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    if lines[:1] == [source]:
        return set(lines[1:])
    for root, _, names in os.walk(dest):
        for n in names:
            if n.endswith((".part", ".gpucap-ranges")):
                os.remove(os.path.join(root, n))
    os.makedirs(dest, exist_ok=True)
    with open(path, "w") as f:
        f.write(source + "\n")
    return set()


def _done(path: str) -> dict[int, str]:
    """The ranges a previous run wrote (index -> MD5), from the ranges file."""
    out: dict[int, str] = {}
    try:
        with open(path + ".gpucap-ranges") as f:
            for line in f:
                index, md5 = line.split()
                out[int(index)] = md5
    except (FileNotFoundError, ValueError):
        pass
    return out


def _fetch_one(
    o: Obj,
    path: str,
    sign: Signer,
    http_: Http,
    pool: ThreadPoolExecutor,
    chunk: int,
    attempts: int,
    verify: bool,
) -> int:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    todo = ranges(o, chunk)
    done = _done(path) if os.path.exists(path + ".part") else {}
    fd = os.open(path + ".part", os.O_RDWR | os.O_CREAT, 0o644)
    lock = threading.Lock()
    try:
        os.ftruncate(fd, o.size)
        record = open(path + ".gpucap-ranges", "a" if done else "w")  # noqa: SIM115

        def one(index: int) -> int:
            off, length = todo[index]
            for attempt in range(1, attempts + 1):
                try:
                    md5 = _read_range(http_, sign, o, fd, off, length, verify)
                    break
                except (OSError, http.client.HTTPException, FetchError):
                    if attempt == attempts:
                        raise
                    time.sleep(min(2.0, 0.1 * 2**attempt))
            with lock:
                record.write(f"{index} {md5 or '-'}\n")
                record.flush()
            return length

        with record:
            futures = [pool.submit(one, i) for i in range(len(todo)) if i not in done]
            wait(futures)  # every range ends (and is recorded) before the file closes
            return sum(f.result() for f in futures)
    finally:
        os.close(fd)


def source_for(uri: str, http_: Http) -> tuple[list[Obj], Signer]:
    if uri.startswith("s3://"):
        s3 = S3.from_env(http_)
        return s3.objects(uri), s3.headers
    if uri.startswith("gs://"):
        gcs = Gcs.from_env(http_)
        return gcs.objects(uri), gcs.headers
    raise FetchError(f"gpucap-fetch reads s3:// and gs:// URIs, not {uri!r}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpucap-fetch", description="weights to local disk")
    p.add_argument("uri", help="s3://BUCKET/KEY or a prefix ending in /; gs:// likewise")
    p.add_argument("dest", help="the directory to write under (local NVMe)")
    p.add_argument("--connections", type=int, default=CONNECTIONS)
    p.add_argument("--chunk-mib", type=int, default=CHUNK // MiB)
    p.add_argument("--attempts", type=int, default=ATTEMPTS)
    p.add_argument("--no-verify", action="store_true", help="check sizes only, not checksums")
    args = p.parse_args(argv)
    http_ = Http()
    t0 = time.monotonic()
    try:
        objects, sign = source_for(args.uri, http_)
        if not objects:
            raise FetchError(f"nothing at {args.uri}")
        got = fetch(
            objects,
            args.dest,
            sign,
            http_,
            connections=args.connections,
            chunk=args.chunk_mib * MiB,
            attempts=args.attempts,
            verify=not args.no_verify,
            source=args.uri,
        )
    except (FetchError, OSError, http.client.HTTPException) as exc:
        print(f"gpucap-fetch: {args.uri}: {exc}", file=sys.stderr)
        return 1
    took = time.monotonic() - t0
    total = sum(o.size for o in objects)
    print(
        f"gpucap-fetch: {args.uri}: {len(objects)} object(s), {total} bytes ({got} fetched now) in "
        f"{took:.1f} s: {got / max(took, 1e-9) / 1e6:.0f} MB/s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
