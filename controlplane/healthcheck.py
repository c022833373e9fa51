"""The container's liveness check: GET ``/healthz`` on the daemon's metrics port, as the
daemon serves it (over TLS when the daemon config gives the gRPC API a certificate, which
the metrics port then shares). Run by the image's HEALTHCHECK:

    python -m controlplane.healthcheck --config /etc/gpucap/daemon.yaml

Exit 0 when the daemon answers 200, 1 otherwise (a missing or bad config too: the daemon
could not have started from it). It asks 127.0.0.1 when the daemon listens on every
address; the certificate is not verified (it names the service, not the loopback address,
and this only asks whether the process inside the same container lives)."""

from __future__ import annotations

import argparse
import ssl
import sys
import urllib.request
from pathlib import Path

from controlplane.http_endpoint import HEALTHZ_PATH
from schema.daemon_config import DaemonConfig
from schema.policy_file import PolicyError, parse_yaml_model


def healthz_url(config: DaemonConfig) -> str | None:
    """Where the daemon of ``config`` serves /healthz; None when it serves no HTTP port."""
    if not config.metrics_addr:
        return None
    host, _, port = config.metrics_addr.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    scheme = "https" if config.grpc.tls_cert else "http"
    return f"{scheme}://{host}:{port}{HEALTHZ_PATH}"


def check(url: str, timeout_s: float) -> bool:
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controlplane.healthcheck")
    ap.add_argument("--config", type=Path, help="the daemon config file (defaults without)")
    ap.add_argument("--timeout", type=float, default=4.0)
    args = ap.parse_args(argv)
    config = DaemonConfig()
    if args.config is not None:
        try:
            text = args.config.read_text()
            config, _ = parse_yaml_model(text, DaemonConfig, str(args.config), kind="DaemonConfig")
        except (OSError, PolicyError) as exc:
            print(f"healthcheck: {args.config}: {exc}", file=sys.stderr)
            return 1
    url = healthz_url(config)
    if url is None:
        print("healthcheck: the config serves no metrics port (metrics_addr is empty)")
        return 1
    return 0 if check(url, args.timeout) else 1


if __name__ == "__main__":
    sys.exit(main())
