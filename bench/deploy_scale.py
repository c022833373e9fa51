"""Onboarding cost per model (issue 26 item 5): ModelSpec validations and CPU-s of the 200th
and 400th DeployModel on SQLite. Run: .venv/bin/python bench/deploy_scale.py"""

from __future__ import annotations

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
marks = {}
t0 = time.process_time()
for i in range(400):
    if i in (199, 399):
        c0, s0 = calls, time.process_time()
    svc.deploy_model("acme", api_model_spec(f"api-{i}", max_replicas=5))
    if i in (199, 399):
        marks[i + 1] = (calls - c0, time.process_time() - s0)
print("validations / CPU-s for the 200th and 400th deploy:", marks)
print("total CPU-s 400 deploys:", time.process_time() - t0)
