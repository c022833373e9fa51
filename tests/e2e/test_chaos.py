"""A short seeded chaos run (``bench/chaos.py``) in the suite: real daemon processes on a
PostgreSQL database of their own and one simulated cloud state file, pinned up and down,
SIGKILLed 20 times in all (alone, and as the leader of three), faults injected at the cloud;
``gpucap audit --output json`` finds nothing leaked, duplicated or lost, every checkpoint
converges within its bound, the standbys take over within 2 x the lease TTL, the leader
paused past its lease has its late writes fenced, and the cloud sees no hot retry loop."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import PG_URL

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("chaos")]

ROOT = Path(__file__).resolve().parents[2]
TTL_S = 2.0
CONVERGE_S = 90.0  # the bound a checkpoint must converge within (the sim boots in 10 s)
# Create calls per instance created: a retry of a throttled, refused or lost create is one
# more call, a hot loop is hundreds. The run injects at most 4 refusals per fault.
MAX_CREATES_PER_INSTANCE = 4.0


def _chaos() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_chaos", ROOT / "bench" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


# On the emulators a create is real SDK work against a process of its own, and the clouds'
# refusals block a pool for minutes, so a run converges through the other cloud.
EMULATOR_CONVERGE_S = 90.0


@pytest.mark.parametrize(
    ("cloud", "daemons", "kills", "seed"),
    [("sim", 1, 10, 7), ("sim", 3, 10, 8), ("emulators", 1, 8, 3), ("emulators", 2, 6, 4)],
)
def test_sigkills_and_faults_leave_nothing_leaked_duplicated_or_lost(
    tmp_path: Path, pg_available: bool, cloud: str, daemons: int, kills: int, seed: int
) -> None:
    """``emulators``: the same against moto (server mode, behind its fault proxy), the GCP
    and the OCI fakes, the daemons in real provider mode (``bench/chaos_emulators.py``), a listener
    restart among the faults; nodes there never become ready (no engine runs), so
    convergence is every model's live replicas at its pin and every instance tracked."""
    chaos = _chaos()
    on_sim = cloud == "sim"
    bound = CONVERGE_S if on_sim else EMULATOR_CONVERGE_S
    r = chaos.run(
        seed=seed,
        daemons=daemons,
        kills=kills,
        work=tmp_path,
        pg_url=PG_URL,
        ttl_s=TTL_S,
        audit_every=6 if on_sim else kills // 2,
        converge_s=bound,
        fault_p=0.6 if on_sim else 0.7,
        cloud=cloud,
    )
    print(r)
    assert r.kills == kills and r.cloud == cloud
    assert r.audits >= 2 and not r.audit_errors, r.audit_errors
    assert (r.leaked, r.duplicated, r.lost) == (0, 0, 0)
    assert r.not_converged == 0 and max(r.convergence_s) < bound
    assert r.instances >= 1
    assert r.creates / r.instances <= MAX_CREATES_PER_INSTANCE, (r.creates, r.instances)
    if daemons > 1:
        assert r.pauses >= 1 and r.fenced_writes >= 1
        assert len(r.takeovers_s) >= kills and max(r.takeovers_s) < 2 * TTL_S, r.takeovers_s
    # The page's section (docs/benchmarks.md) renders this run's row and totals.
    saved = {
        "command": "chaos.py",
        "machine": chaos.machine(),
        "summary": chaos.summary([r]),
        "runs": [asdict(r)],
    }
    page = "\n".join(chaos.render(saved, section=on_sim))
    assert f"| {daemons} | {seed} | {kills} | {r.window_kills} |" in page
    assert f"In all: {kills} SIGKILLs" in page and "0 leaked, 0 duplicated, 0 lost" in page
    assert ("## Chaos" in page) == on_sim and ("### Against emulators" in page) != on_sim
