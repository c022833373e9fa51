"""The clouds file (``schema.clouds_file``) and what the full-loop replay makes of it: every
problem named with its line and field; a pool's quota and stock hold in the replay; a zone
stockout moves launches to the region's other zones; a policy's pools are the clouds'."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from controlplane.loop.context import epoch
from controlplane.simulator.fullloop import FullLoop, fleet_scenario, policy_scenario
from controlplane.simulator.fullloop.run import EPOCH0
from controlplane.simulator.traces import ModelTrace, Trace
from controlplane.store.models import Node
from schema.clouds_file import CloudsError, parse_clouds
from schema.fleet import parse_fleet
from schema.policy_file import parse_policy
from tests.full_loop_texts import chat_fleet, chat_policy

FLEET = parse_fleet(chat_fleet())


def steady(rate: float, span: float = 1800.0) -> Trace:
    arrivals = np.arange(0.0, span, 1.0 / rate)
    return Trace({"chat": ModelTrace("chat", arrivals)}, end_s=span, label="steady")


def stepped(low: float, high: float, at: float = 600.0, span: float = 1800.0) -> Trace:
    """``low`` requests/s, then ``high`` from ``at``: the growth needs new launches."""
    arrivals = np.concatenate([np.arange(0.0, at, 1.0 / low), np.arange(at, span, 1.0 / high)])
    return Trace({"chat": ModelTrace("chat", arrivals)}, end_s=span, label="stepped")


def problems(text: str, with_policy: bool = False) -> list[str]:
    with pytest.raises(CloudsError) as exc:
        parse_clouds(text, "c.yaml", with_policy=with_policy)
    return [str(p) for p in exc.value.problems]


def test_every_problem_is_named_with_its_line_and_field():
    found = problems(
        """pools:
  - cloud: aws
    region: us-east-1
    shape: 8xH100
  - cloud: aws
    region: us-east-1
    instance_type: p5.48xlarge
  - cloud: gcp
    region: us-central1
    instance_type: p5.48xlarge
  - cloud: oci
    region: us-ashburn-1
    shape: 8xH100
    capacity: 2
    committed: 3
    stockouts:
      - {start_s: 0, end_s: 60, zone: us-east-1a}
"""
    )
    assert found == [
        "c.yaml:5:5: pools[1]: aws/us-east-1/p5.48xlarge is listed twice",
        "c.yaml:10:5: pools[2].instance_type: 'p5.48xlarge' is not a gcp GPU node "
        "(known: a3-highgpu-8g, a3-megagpu-8g, a3-ultragpu-8g)",
        "c.yaml:15:5: pools[3].committed: committed (3) is more than the pool's capacity (2)",
        "c.yaml:17:33: pools[3].stockouts[0].zone: zone 'us-east-1a' is not in us-ashburn-1",
    ]


def test_shape_or_instance_type_and_ordered_windows():
    found = problems(
        """pools:
  - cloud: aws
    region: us-east-1
  - cloud: aws
    region: us-east-1
    shape: 8xH100
    stockouts:
      - {start_s: 100, end_s: 100}
"""
    )
    assert len(found) == 2
    assert found[0].startswith("c.yaml:2:5: pools[0]: give shape or instance_type")
    assert found[1].startswith("c.yaml:8:9: pools[1].stockouts[0]: end_s (100) must be after")


def test_with_a_policy_the_policy_owns_prices_commitments_and_overflow():
    found = problems(
        """pools:
  - cloud: aws
    region: us-east-1
    shape: 8xH100
    committed: 1
    price_usd_per_hour: 30
overflow: {max_replicas: 2}
""",
        with_policy=True,
    )
    assert [f.split(": ")[1] for f in found] == [
        "pools[0].price_usd_per_hour",
        "pools[0].committed",
        "overflow",
    ]


def most_at_once(loop: FullLoop) -> dict[str, int]:
    """Per pool, the most instances alive at once (from the create to the termination)."""
    assert loop.store is not None
    events: dict[str, list[tuple[float, int]]] = {}
    with loop.store.session() as s:
        for n in s.scalars(select(Node).where(Node.instance_id.is_not(None))):
            up, down = epoch(n.pending_at) or 0.0, epoch(n.terminated_at or n.failed_at)
            events.setdefault(n.pool_id, []).append((up, 1))
            if down is not None:
                events[n.pool_id].append((down, -1))
    out = {}
    for pool, evs in events.items():
        alive = peak = 0
        for _, d in sorted(evs):  # (a release before a create at one instant)
            alive += d
            peak = max(peak, alive)
        out[pool] = peak
    return out


def test_quota_and_stock_cap_what_a_pool_runs_and_the_rest_fails_over():
    clouds = parse_clouds(
        """pools:
  - cloud: aws
    region: us-east-1
    shape: 8xH100
    quota: 1
  - cloud: oci
    region: us-ashburn-1
    shape: 8xH100
    capacity: 2
  - cloud: gcp
    region: us-central1
    shape: 8xH100
"""
    )
    loop = FullLoop(fleet_scenario(FLEET, steady(12.0), clouds=clouds))  # needs ~5 replicas
    done = loop.run()
    used = most_at_once(loop)
    # Cheapest first (AWS $55, OCI $80, GCP $88 a node-hour), each up to what it allows.
    assert used["sim/aws-us-east-1/us-east-1/p5.48xlarge"] == 1
    assert used["sim/oci-us-ashburn-1/us-ashburn-1/BM.GPU.H100.8"] == 2
    assert used["sim/gcp-us-central1/us-central1/a3-highgpu-8g"] >= 2
    # Pools the file does not name (another 8xH100 type of GCP) have no stock: never used.
    assert set(used) == {
        "sim/aws-us-east-1/us-east-1/p5.48xlarge",
        "sim/gcp-us-central1/us-central1/a3-highgpu-8g",
        "sim/oci-us-ashburn-1/us-ashburn-1/BM.GPU.H100.8",
    }
    assert done.plane.queued("chat", done.scenario.end_s) == 0


def test_a_zone_stockout_sends_launches_to_the_other_zones():
    clouds = parse_clouds(
        """pools:
  - cloud: aws
    region: us-east-1
    shape: 8xH100
    stockouts:
      - {start_s: 0, end_s: 1800, zone: us-east-1a}
"""
    )
    loop = FullLoop(fleet_scenario(FLEET, stepped(2.0, 12.0), clouds=clouds))
    loop.run()
    assert loop.store is not None
    warm = loop.scenario.warmup_s
    with loop.store.session() as s:
        zones = {
            n.zone
            for n in s.scalars(select(Node).where(Node.instance_id.is_not(None)))
            if (epoch(n.pending_at) or 0.0) >= EPOCH0 + warm  # launched in the window
        }
    assert zones and "us-east-1a" not in zones


def test_a_policys_accounts_are_the_pools_and_the_clouds_file_limits_them():
    loaded = parse_policy(chat_policy(committed=1, gcp=True))
    clouds = parse_clouds(
        "pools:\n  - cloud: aws\n    region: us-east-1\n    shape: 8xH100\n    capacity: 2\n",
        with_policy=True,
    )
    loop = FullLoop(policy_scenario(loaded, steady(12.0), FLEET, clouds=clouds))
    loop.run()
    used = most_at_once(loop)
    assert used["acme/acme-aws/us-east-1/p5.48xlarge"] == 2  # the commitment, then its stock
    assert sum(n for p, n in used.items() if "/acme-gcp/" in p) >= 2  # the rest, on GCP
