"""The control loop: four jobs the daemon runs on their own intervals.

    collect metrics ──> decide (autoscaler) ──> place (placement) ──> reconcile (providers)
       MetricsSource      models.desired          replicas/nodes        nodes.state, pools
                                                  rows = intent          blocked on errors

Each job reads a fresh snapshot from the store, calls pure decision code, and writes its
result back; none calls another. Level-triggered: a missed or coalesced tick needs no
special handling, the next one sees the whole state again."""

from controlplane.loop.context import LoopContext, ProviderResolver, Tuning
from controlplane.loop.jobs import ControlLoop

__all__ = ["ControlLoop", "LoopContext", "ProviderResolver", "Tuning"]
