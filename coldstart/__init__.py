"""Cold starts: how long a new replica takes to become ready in a pool, given what is staged
there (baked image, pre-staged weights, warm nodes). Pure estimates here; the staging work
itself (weight pre-staging, image snapshotting, warm pools) is done by the control plane."""

from coldstart.learned import Boot, Learned, learn
from coldstart.model import ColdStartModel, Phases, Staging, expected_ready_from

__all__ = [
    "Boot",
    "ColdStartModel",
    "Learned",
    "Phases",
    "Staging",
    "expected_ready_from",
    "learn",
]
