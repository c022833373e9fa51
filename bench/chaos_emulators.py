"""The chaos harness's second cloud (``bench/chaos.py --cloud emulators``): moto in server
mode behind the fault proxy (``tests/fakes/moto_server.py``) for AWS, the GCP wire fake
(``tests/fakes/gcp_server.py``) and the OCI wire fake (``tests/fakes/oci_server.py``, its
tenancy's API key made at start, its profile in an OCI config file beside the run's files),
run as a process of their own so that a SIGKILLed daemon never takes them (or their state)
along. The daemons run in real provider mode, their config's ``endpoints`` pointing the
real SDKs (boto3, google-cloud-compute, oci) at them.

:class:`Emulators` is the harness's side, with the interface of ``chaos.World``; ``python
bench/chaos_emulators.py`` is the emulators' process (started by :class:`Emulators`), which
prints one JSON line of its URLs and then serves a small control API on 127.0.0.1 (what the
harness injects, heals and reads), until its stdin closes.

Faults are the fakes' own injections, at the create of one cloud's account:

- ``capacity``: EC2 500 ``InsufficientInstanceCapacity`` / GCE ``ZONE_RESOURCE_POOL_EXHAUSTED``
  in the finished operation / OCI 500 "Out of host capacity."; ``quota``: EC2
  ``VcpuLimitExceeded`` / GCE 403 quotaExceeded / OCI 400 ``LimitExceeded``; ``throttle``:
  EC2 503 ``RequestLimitExceeded`` / GCE 429 / OCI 429; ``transient``: EC2 500
  ``InternalError`` / GCE 503 backendError / OCI 503;
- ``crash_after_create``: the create is done, then the connection is dropped (a lost answer);
- ``latency``: the create is done and its answer held for seconds (EC2: after moto made the
  instance; GCE: on the operation's wait, the instance already inserted);
- ``gang_partial`` (GCE: the second create of the next two refused; EC2: one capacity error);
- ``zero_quota`` (GCE: the region's H100 GPU quota set to 0 until healed; OCI: the tenancy's
  H100 limit in every AD set to 0; EC2: quota errors);
- ``restart``: the emulator's HTTP listener stops for a few seconds and comes back on the same
  port with the same state; calls in between fail with connection errors.

Readiness: no engine runs on an emulated instance, so nodes stay ``running`` (booting) and
the harness's convergence counts live nodes instead of ready ones. A node could be made
``ready`` by posting its boot phases to the daemon's ``/v1/node-phases`` with its node token
(as ``bootstrap/node.sh`` does), but a ready node is then probed at the address the cloud
gave it (moto's and the fake's private IPs, which nothing serves here) and drained as
unhealthy after its failure threshold: churn of the harness's making, not the daemon's.
A booting node is replaced only after ``lifecycle.provision_timeout_s`` (an hour by
default), far past any run.

moto publishes no AWS Deep Learning Base AMI, which a real-mode AWS provider looks up by name
for a node's base image: the emulators' process loads moto's AMIs plus one of that name
(``MOTO_AMIS_PATH``, read by moto when it is imported, hence a process of its own)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from schema.types import Cloud  # noqa: E402

# The customer's accounts as the emulators know them.
AWS_ROLE = "arn:aws:iam::111122223333:role/gpucap-chaos"
AWS_ACCOUNT_ID = "111122223333"
GCP_PROJECT = "chaos-inference"
GCP_SA = f"gpucap@{GCP_PROJECT}.iam.gserviceaccount.com"
GCP_CONTROL_PLANE = "gpucap-control-plane@gpucap.iam.gserviceaccount.com"
AWS_REGION, GCP_REGION, OCI_REGION = "us-east-1", "us-central1", "us-ashburn-1"
# The customer's OCI tenancy: registered in the OCI fake with an API key made at start, its
# profile in an OCI config file the emulators' process writes beside the run's files.
OCI_NAME = "chaos"  # the tenancy ocid1.tenancy.oc1..aaaachaos, profile CHAOS
OCI_PASS_PHRASE = "chaos-pass-phrase-never-real"
OCI_GPU_LIMIT = "gpu-h100-count"
# The names under which real-mode providers find their base images.
DLAMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250101"
DLAMI_ID = "ami-0c0ffee0c0ffee001"
# (EC2 code, HTTP status) per fault kind, and the GCP fake's kind for it.
EC2_FAULT = {
    "capacity": ("InsufficientInstanceCapacity", 500),
    "quota": ("VcpuLimitExceeded", 400),
    "throttle": ("RequestLimitExceeded", 503),
    "transient": ("InternalError", 500),
}
GCE_FAULT = {
    "capacity": "stockout",
    "quota": "quota",
    "throttle": "too_many_requests",
    "transient": "server_error",
}
# The OCI fake's presets (500 "Out of host capacity", 400 LimitExceeded, 429, 503).
OCI_FAULT = {
    "capacity": "capacity",
    "quota": "quota",
    "throttle": "throttle",
    "transient": "transient",
}
FAULTS = (
    "capacity",
    "quota",
    "throttle",
    "transient",
    "crash_after_create",
    "latency",
    "gang_partial",
    "zero_quota",
    "restart",
)
# Credentials every daemon's environment carries for moto (moto accepts any; the customer's
# account is reached through STS AssumeRole, as against AWS). Never a real key.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIAGPUCAPCHAOS00001",
    "AWS_SECRET_ACCESS_KEY": "gpucapChaosSecretNotReal",
    "AWS_CONFIG_FILE": os.devnull,  # never a developer's real AWS config
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


# ------------------------------------------------------------------------- the harness side
class Emulators:
    """The emulators' process, as the harness touches it (``chaos.World``'s interface)."""

    fault_kinds = FAULTS
    # Nodes never become ready: no engine runs on an emulated instance (``chaos.py``'s
    # convergence then counts live nodes, ``StoreView.converged``).
    nodes_get_ready = False

    def __init__(self, work: Path) -> None:
        self.log = work / "emulators.log"
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            env={
                **os.environ,
                **AWS_ENV,
                "MOTO_AMIS_PATH": str(work / "amis.json"),
                "CHAOS_OCI_DIR": str(work),
            },
            cwd=ROOT,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"emulators did not start:\n{self.log.read_text()[-3000:]}")
        urls = json.loads(line)
        self.endpoints: dict[str, str] = {k: urls[k] for k in ("aws", "gcp", "oci")}
        self.oci_config: str = urls["oci_config"]
        self.control: str = urls["control"]
        self._pending: list[threading.Thread] = []

    def daemon_config(self) -> dict[str, Any]:
        """Real providers, their SDKs pointed at the emulators. No engine runs on an
        emulated instance, so nodes stay ``running`` (booting) and are replaced only after
        the provision timeout (``lifecycle.provision_timeout_s``, 3600 s by default): far
        past any run."""
        return {"provider_mode": "cloud", "endpoints": dict(self.endpoints)}

    def daemon_env(self) -> dict[str, str]:
        return {**AWS_ENV, "OCI_CONFIG_FILE": self.oci_config}

    def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(self.control + path, data=data, method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310 - 127.0.0.1
            return json.loads(r.read())

    def inject(self, kind: str, cloud: Cloud, rng: random.Random) -> str:
        """Inject ``kind`` (one of ``FAULTS``) at ``cloud``'s account; returns what was done."""
        body: dict[str, Any] = {"kind": kind, "cloud": cloud.value, "count": rng.randint(1, 4)}
        if kind == "latency":
            body.update(count=rng.randint(1, 3), seconds=2.0)
        if kind == "restart":
            body["seconds"] = round(rng.uniform(2, 5), 1)
        self._call("/inject", body)
        return f"{kind}@{cloud.value}"

    def window(self, seconds: float) -> None:
        """The next creates of both clouds answer ``seconds`` after the cloud made them."""
        for cloud in (Cloud.AWS, Cloud.GCP, Cloud.OCI):
            self._call(
                "/inject", {"kind": "latency", "cloud": cloud.value, "count": 2, "seconds": seconds}
            )

    def heal(self) -> None:
        """No fault queued, quotas as at the start, every listener up."""
        self._call("/heal")

    def create_calls(self) -> int:
        return int(self._call("/stats")["creates"])

    def instances(self) -> int:
        """Instances the emulators made over the run (terminated ones included)."""
        return int(self._call("/stats")["instances"])

    def created_ago(self, intent_ids: list[str]) -> float | None:
        """Seconds since the newest of these intents' instances was made (None: none has one)."""
        if not intent_ids:
            return None
        made = self._call("/created", {"intents": intent_ids})["at"]
        return time.time() - max(made) if made else None

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # (the process ends when its stdin does)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ------------------------------------------------------------------------- the emulators
def _amis(path: Path) -> None:
    """moto's own AMIs plus a Deep Learning Base AMI (moto reads ``MOTO_AMIS_PATH``)."""
    import moto

    shipped = Path(moto.__file__).parent / "ec2" / "resources" / "amis.json.gz"
    amis = json.loads(gzip.decompress(shipped.read_bytes()))
    base = dict(next(a for a in amis if "Deep Learning" in a["name"]))
    base.update(ami_id=DLAMI_ID, name=DLAMI_NAME, creation_date="2025-01-01T00:00:00.000Z")
    path.write_text(json.dumps([*amis, base]))


class Served:
    """The emulators: moto behind the fault proxy (a proxy with a create's latency and the
    intents' creation times added), the GCP fake, and what a restart needs to rebind."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        from providers.gcp.session import EMULATOR_SOURCE_TOKEN
        from tests.contract import harness_oci
        from tests.fakes import gcp_server, moto_server, oci_server

        self.ms = moto_server
        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.moto.start()
        self.upstream = self.moto.get_host_and_port()
        self.faults = moto_server.FaultInjector()
        self.placement = moto_server.PlacementGroups()
        self.lock = threading.Lock()
        self.aws_latency: list[float] = []  # seconds, one per create still to slow down
        self.aws_made: dict[str, float] = {}  # intent -> when moto made its instance
        self.proxy = self._proxy(0)
        self.gcp = gcp_server.start()
        self.gcp.add_service_account(GCP_SA, token_creators={GCP_CONTROL_PLANE})
        self.gcp.register_token(EMULATOR_SOURCE_TOKEN, GCP_CONTROL_PLANE)
        self.gcp_port = self.gcp.server.server_address[1]  # type: ignore[union-attr]
        self.gcp_handler = self.gcp.server.RequestHandlerClass  # type: ignore[union-attr]
        self.oci_fake = oci_server.FakeOci(regions=(OCI_REGION,))
        self.oci_ident = harness_oci.new_identity(self.oci_fake, OCI_NAME, OCI_PASS_PHRASE)
        self.oci_config = harness_oci.write_config(
            Path(os.environ["CHAOS_OCI_DIR"]), [self.oci_ident], OCI_REGION
        )
        self.oci_latency: list[float] = []  # seconds, one per launch still to slow down
        self.oci_port = 0
        self._oci_serve()
        self.down: set[str] = set()
        self.gcp_made: set[str] = set()  # instance ids (the fake forgets deleted ones)
        threading.Thread(target=self._gce_progress, daemon=True).start()

    def _oci_serve(self) -> None:
        """The OCI fake on its port (a free one at first, the same after a restart), its
        launches' answers held while a latency fault asks (the instance already made)."""
        served, fake = self, self.oci_fake
        from tests.fakes import oci_server

        class Handler(oci_server._Handler):  # type: ignore[misc]
            state = fake

            def _write(self, status: int, payload: Any, headers: Any, method: str) -> None:
                launch = method == "POST" and self.path.rstrip("/").endswith("/instances")
                if launch and status == 200:
                    with served.lock:
                        delay = served.oci_latency.pop(0) if served.oci_latency else 0.0
                    time.sleep(delay)
                super()._write(status, payload, headers, method)

        def bind() -> ThreadingHTTPServer:
            server = ThreadingHTTPServer(("127.0.0.1", self.oci_port), Handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
            return server

        fake._server = self._rebind(bind)
        self.oci_port = fake._server.server_address[1]

    def _gce_progress(self, after_s: float = 1.0) -> None:
        """GCE's operations end on their own; the fake's only when polled. An insert whose
        daemon was killed before it polled (its instance then found by its intent tag)
        would stay PROVISIONING for ever, so every operation older than ``after_s`` ends."""
        seen: dict[tuple[str, str, str], float] = {}
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            with self.gcp.lock:
                self.gcp_made.update(i["id"] for i in self.gcp.instances.values())
                for key, op in self.gcp.operations.items():
                    if op.status != "DONE" and now - seen.setdefault(key, now) > after_s:
                        op.finish()

    def _proxy(self, port: int) -> Any:
        served, ms = self, self.ms

        class Handler(ms._Handler):  # type: ignore[name-defined,misc]
            def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                out = super()._forward(body)
                if b"Action=RunInstances" in body and out[0] == 200:
                    served.made(parse_qs(body.decode("utf-8", "replace")))
                    with served.lock:
                        delay = served.aws_latency.pop(0) if served.aws_latency else 0.0
                    time.sleep(delay)  # (the instance exists; its answer is late)
                return out

        proxy = ms._Proxy(("127.0.0.1", port), Handler)
        proxy.upstream, proxy.faults, proxy.placement = self.upstream, self.faults, self.placement
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        return proxy

    def made(self, form: dict[str, list[str]]) -> None:
        one = {k: v[0] for k, v in form.items()}
        for k, v in one.items():
            if k.endswith(".Key") and v == "gpucap-intent":
                intent = one.get(k[: -len("Key")] + "Value", "")
                with self.lock:
                    self.aws_made[intent] = time.time()

    def urls(self, control: int) -> dict[str, str]:
        return {
            "aws": f"http://127.0.0.1:{self.proxy.server_address[1]}",
            "gcp": self.gcp.endpoint,
            "oci": self.oci_fake.endpoint_template,
            "oci_config": str(self.oci_config),
            "control": f"http://127.0.0.1:{control}",
        }

    def inject(self, kind: str, cloud: str, count: int, seconds: float) -> None:
        if cloud == "oci":
            self._inject_oci(kind, count, seconds)
            return
        aws = cloud == "aws"
        if kind in EC2_FAULT and aws:
            code, status = EC2_FAULT[kind]
            self.faults.add(self.ms.FaultRule("RunInstances", code, status, remaining=count))
        elif kind in GCE_FAULT:
            self.gcp.inject(GCE_FAULT[kind], count=count)
        elif kind == "crash_after_create":
            if aws:
                self.faults.add(self.ms.FaultRule("RunInstances", drop_response=True))
            else:
                self.gcp.inject("drop")
        elif kind == "latency":
            if aws:
                with self.lock:
                    self.aws_latency += [seconds] * count
            else:  # (the insert is done; the provider waits on its operation)
                self.gcp.inject("latency", count=count, method="operations.wait", seconds=seconds)
        elif kind == "gang_partial":
            if aws:
                self.faults.add(self.ms.FaultRule("RunInstances", "InsufficientInstanceCapacity"))
            else:
                self.gcp.inject("stockout", count=1, skip=1)
        elif kind == "zero_quota":
            if aws:
                code, status = EC2_FAULT["quota"]
                self.faults.add(self.ms.FaultRule("RunInstances", code, status, remaining=count))
            else:
                self.gcp.set_quota(GCP_PROJECT, GCP_REGION, "NVIDIA_H100_GPUS", 0)
        elif kind == "restart":
            threading.Thread(target=self.restart, args=(cloud, seconds), daemon=True).start()
        else:
            raise ValueError(f"unknown fault {kind!r}")

    def _inject_oci(self, kind: str, count: int, seconds: float) -> None:
        fake, tenancy = self.oci_fake, self.oci_ident.tenancy
        if kind in OCI_FAULT:
            fake.inject(OCI_FAULT[kind], count=count)
        elif kind == "crash_after_create":
            fake.drop_next_response("LaunchInstance")
        elif kind == "latency":
            with self.lock:
                self.oci_latency += [seconds] * count
        elif kind == "gang_partial":  # (as EC2's: one launch of the gang refused)
            fake.inject("capacity", count=1)
        elif kind == "zero_quota":
            for n in range(1, fake.ads_per_region + 1):
                fake.set_limit(tenancy, OCI_REGION, f"AD-{n}", OCI_GPU_LIMIT, 0)
        elif kind == "restart":
            threading.Thread(target=self.restart, args=("oci", seconds), daemon=True).start()
        else:
            raise ValueError(f"unknown fault {kind!r}")

    def restart(self, cloud: str, seconds: float) -> None:
        """The listener of ``cloud``'s emulator down for ``seconds``, then back on its port
        with its state (moto's backends and the GCP fake live on in this process)."""
        with self.lock:
            if cloud in self.down:
                return
            self.down.add(cloud)
        if cloud == "oci":
            server = self.oci_fake._server
            assert server is not None
            server.shutdown()
            server.server_close()
            time.sleep(seconds)
            self._oci_serve()
        elif cloud == "aws":
            port = self.proxy.server_address[1]
            self.proxy.shutdown()
            self.proxy.server_close()
            time.sleep(seconds)
            self.proxy = self._rebind(lambda: self._proxy(port))
        else:
            assert self.gcp.server is not None
            self.gcp.server.shutdown()
            self.gcp.server.server_close()
            time.sleep(seconds)

            def gcp() -> ThreadingHTTPServer:
                server = ThreadingHTTPServer(("127.0.0.1", self.gcp_port), self.gcp_handler)
                server.daemon_threads = True
                threading.Thread(target=server.serve_forever, daemon=True).start()
                return server

            self.gcp.server = self._rebind(gcp)
        with self.lock:
            self.down.discard(cloud)

    @staticmethod
    def _rebind(bind: Any) -> Any:
        for _ in range(100):  # (a closing socket may hold the port for a moment)
            with contextlib.suppress(OSError):
                return bind()
            time.sleep(0.1)
        return bind()

    def heal(self) -> None:
        while True:  # a restart in progress ends first
            with self.lock:
                if not self.down:
                    break
            time.sleep(0.1)
        with self.faults.lock:
            self.faults.rules.clear()  # (``clear()`` would reset the call counters too)
        with self.lock:
            self.aws_latency.clear()
        self.gcp.reset_faults()
        self.gcp.set_quota(GCP_PROJECT, GCP_REGION, "NVIDIA_H100_GPUS", 1e6)
        from tests.fakes.oci_server import DEFAULT_GPU_LIMIT

        self.oci_fake.clear_faults()
        with self.lock:
            self.oci_latency.clear()
        for n in range(1, self.oci_fake.ads_per_region + 1):
            self.oci_fake.set_limit(
                self.oci_ident.tenancy, OCI_REGION, f"AD-{n}", OCI_GPU_LIMIT, DEFAULT_GPU_LIMIT
            )

    def stats(self) -> dict[str, int]:
        with self.faults.lock:
            aws = self.faults.seen["RunInstances"]
        with self.gcp.lock:
            gcp = sum(
                1
                for r in self.gcp.requests_seen
                if r.method == "POST" and r.path.endswith("/instances")
            )
            self.gcp_made.update(i["id"] for i in self.gcp.instances.values())
            made = len(self.gcp_made)
        with self.lock:
            made += len(self.aws_made)
        oci = sum(1 for e in list(self.oci_fake.log) if e.operation == "LaunchInstance")
        made += len(self.oci_fake.instances())
        return {"creates": aws + gcp + oci, "instances": made}

    def created(self, intents: list[str]) -> list[float]:
        wanted = set(intents)
        with self.lock:
            at = [t for i, t in self.aws_made.items() if i in wanted]
        with self.gcp.lock:
            for inst in self.gcp.instances.values():
                items = (inst.get("metadata") or {}).get("items") or []
                tags = next((x["value"] for x in items if x["key"] == "gpucap-tags"), "{}")
                if json.loads(tags).get("gpucap-intent") in wanted:
                    at.append(datetime.fromisoformat(inst["creationTimestamp"]).timestamp())
        for inst in self.oci_fake.instances():
            if (inst.get("freeformTags") or {}).get("gpucap-intent") in wanted:
                made = inst["timeCreated"].replace("Z", "+00:00")
                at.append(datetime.fromisoformat(made).timestamp())
        return at


def serve() -> None:
    served = Served()

    class Control(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            return

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            out: Any = {}
            try:
                if self.path == "/inject":
                    served.inject(
                        body["kind"],
                        body["cloud"],
                        int(body.get("count", 1)),
                        body.get("seconds", 0),
                    )
                elif self.path == "/heal":
                    served.heal()
                elif self.path == "/stats":
                    out = served.stats()
                elif self.path == "/created":
                    out = {"at": served.created(body["intents"])}
                status = 200
            except Exception as exc:  # the harness reads it
                status, out = 500, {"error": repr(exc)}
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    control = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    control.daemon_threads = True
    threading.Thread(target=control.serve_forever, daemon=True).start()
    print(json.dumps(served.urls(control.server_address[1])), flush=True)
    sys.stdin.read()  # until the harness closes it (or dies)


@contextlib.contextmanager
def running(work: Path) -> Iterator[Emulators]:
    world = Emulators(work)
    try:
        yield world
    finally:
        world.close()


if __name__ == "__main__":
    _amis(Path(os.environ["MOTO_AMIS_PATH"]))
    serve()
