"""The fleet the full-loop tests share: one model, ``chat``, 8 slots of 2 s requests per
replica, a 1 s SLO, nodes up 60 s after their request and serving 30 s later."""

from __future__ import annotations


def chat_fleet(shape: str = "8xH100", min_replicas: int = 0) -> str:
    return f"""
coldstart:
  {{capacity_vm_s: 60, bootstrap_s: 10, image_pull_s: 5, weight_fetch_s: 5, load_init_s: 10}}
models:
  - name: chat
    shape: {shape}
    slots: 8
    slo_s: 1
    min_replicas: {min_replicas}
    max_replicas: 20
    service: {{per_request_s: 2.0}}
"""


def chat_policy(committed: int = 0, gcp: bool = False) -> str:
    """Customer acme's policy with the same model, on its AWS account (with ``committed``
    p5.48xlarge nodes) and, with ``gcp``, a GCP project."""
    commits = (
        f"    committed: [{{instance_type: p5.48xlarge, region: us-east-1, count: {committed}}}]\n"
        if committed
        else ""
    )
    google = (
        "  - name: acme-gcp\n    cloud: gcp\n    regions: [us-central1]\n"
        '    credentials: {project: acme, service_account: "gpucap@acme.iam"}\n'
        if gcp
        else ""
    )
    return f"""
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1]
    credentials: {{role_arn: "arn:aws:iam::111122223333:role/gpucap"}}
{commits}{google}models:
  - name: chat
    shapes: [{{shape: 8xH100, max_concurrency: 8}}]
    max_replicas: 20
    latency_slo_ms: 1000
"""
