"""Onboarding cost per model: ModelSpec validations and CPU-s of the Nth DeployModel on
SQLite, for N doubling (flat when onboarding N models is O(N), growing with N when it is
O(N^2)). Run: .venv/bin/python bench/deploy_scale.py [LAST_N]"""

from __future__ import annotations

import statistics
import sys
import time

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
import tempfile

from controlplane.api import ControlPlaneService
from controlplane.store.db import Store
from controlplane.store.migrate import upgrade
from schema.policy import Model as ModelSpec
from tests.policy_texts import api_model_spec, example_policy

d = tempfile.mkdtemp()
url = f"sqlite:///{d}/g.db"
upgrade(url)
store = Store.from_url(url)
svc = ControlPlaneService(store)
svc.apply_policy(example_policy(), source="x", applied_by="t")
calls = 0
orig = ModelSpec.model_validate.__func__  # type: ignore[attr-defined]


def counted(cls, *a, **k):
    global calls
    calls += 1
    return orig(cls, *a, **k)


setattr(ModelSpec, "model_validate", classmethod(counted))  # noqa: B010  (counts them)
last = int(sys.argv[1]) if len(sys.argv) > 1 else 1600
checkpoints = [n for n in (200, 400, 800, 1600, 3200, 6400) if n <= last]
marks: dict[int, tuple[int, float]] = {}
recent: list[tuple[int, float]] = []
t0 = time.process_time()
for i in range(1, last + 1):
    c0, s0 = calls, time.process_time()
    svc.deploy_model("acme", api_model_spec(f"api-{i}", max_replicas=5))
    recent = [*recent[-8:], (calls - c0, time.process_time() - s0)]
    if i in checkpoints:  # the median of the last 9 deploys: one is a few ms, noisy alone
        marks[i] = (
            int(statistics.median(v for v, _ in recent)),
            statistics.median(c for _, c in recent),
        )
print("validations / CPU-ms of the Nth deploy (median of deploys N-8..N):")
for n, (validations, cpu) in marks.items():
    print(f"  N={n:5d}: {validations} validations, {cpu * 1000:.1f} CPU-ms")
print(f"total CPU-s for {last} deploys: {time.process_time() - t0:.2f}")
