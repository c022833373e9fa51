"""The control loop: one module per job, each around pure transitions.

    collect ──> decide ─────────> place ───────────> reconcile ─────────> providers
    metrics     controlplane.     placement.plan      lifecycle.node        (create, describe,
    source      scaling + the     (a whole customer   + lifecycle.blocking   terminate)
                autoscaler        at once)            + lifecycle.gang
                      └── snapshot.SnapshotReader ──┘
    offerings (list_offerings -> availability cache)   gc (tagged orphans, expired blocks)

Each job loads a snapshot from the store, calls pure decision code, and writes its result
back; none calls another. Level-triggered: a missed or coalesced tick needs no special
handling, the next one sees the whole state again."""

from controlplane.lifecycle.node import PROVISION_TIMEOUT
from controlplane.loop.context import LoopContext, ProviderResolver, Tuning
from controlplane.loop.loop import ControlLoop

__all__ = ["PROVISION_TIMEOUT", "ControlLoop", "LoopContext", "ProviderResolver", "Tuning"]
