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
