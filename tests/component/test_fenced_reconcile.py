"""A deposed leader's reconcile pass stops at the fence: once its lease has lapsed, it calls
the cloud for no further node. Found by bench/chaos.py: a leader paused past its lease and
resumed had its first write refused (``Fenced``), which the pass took for one node's adapter
bug and went on, terminating instances for every other node from its stale snapshot."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controlplane.api import ControlPlaneService
from controlplane.leadership import Leadership
from controlplane.loop import ControlLoop
from controlplane.store.leases import Fenced
from providers.base import InstanceStatus
from schema.types import NodeState
from tests.component.test_control_loop import (  # noqa: F401  (fixtures)
    Clock,
    live_nodes,
    loop,
    run,
    world,
)


def test_a_lapsed_leaders_reconcile_calls_the_cloud_for_no_node(loop, world, store, db_url):  # noqa: F811
    ctl, load = loop
    sim, clock = world
    load.load[("demo", "llama-70b")] = 200.0  # 5 replicas
    run(ctl, clock, 20)
    ready = [n for n in live_nodes(store, "llama-70b") if n.state == NodeState.READY]
    assert len(ready) >= 3
    # On-call drains three of them: each one's next reconcile step terminates its instance.
    service = ControlPlaneService(store)
    for n in ready[:3]:
        service.drain_node(n.id, reason="test", immediate=True)
    draining = {n.id: n.instance_id for n in live_nodes(store) if n.state == NodeState.DRAINING}
    assert len(draining) == 3, draining

    lease_clock = Clock(t=0.0)
    lead = Leadership.from_url(db_url, holder="deposed", ttl_s=5.0, clock=lease_clock)
    try:
        lead.step()
        assert lead.acting()
        lease_clock.t += 6.0  # paused past its lease (on its own clock)
        deposed = ControlLoop(replace(ctl.ctx, store=store.fenced(lead)))
        with pytest.raises(Fenced):
            deposed.reconcile()
    finally:
        lead.close()
    alive = {
        iid: sim.status(inst)
        for iid, inst in sim.instances.items()
        if iid in set(draining.values())
    }
    assert all(s == InstanceStatus.RUNNING for s in alive.values()), alive
