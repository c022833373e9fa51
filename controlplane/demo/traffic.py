"""Bursty demo traffic for the three demo models."""

from __future__ import annotations

from controlplane.metrics_sources import SyntheticTraffic, TrafficShape


def demo_traffic(seed: int = 7) -> SyntheticTraffic:
    return SyntheticTraffic(
        {
            ("demo", "chat-8b"): TrafficShape(base_rps=12.0, service_s=1.5, burst_factor=4.0),
            ("demo", "llama-70b"): TrafficShape(
                base_rps=15.0, service_s=3.0, burst_factor=5.0, burst_every_s=80.0
            ),
            ("demo", "coder-32b"): TrafficShape(
                base_rps=10.0,
                service_s=4.0,
                burst_factor=4.0,
                burst_every_s=70.0,
                first_burst_s=20.0,
            ),
        },
        seed=seed,
    )
