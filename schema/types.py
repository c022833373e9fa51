"""Shared value types used across the control plane, providers and autoscaler."""

from __future__ import annotations

from enum import StrEnum


class Cloud(StrEnum):
    AWS = "aws"
    GCP = "gcp"
    OCI = "oci"


class Owner(StrEnum):
    """Who owns (and pays for) an account: the customer itself, or gpucap's shared pool."""

    CUSTOMER = "customer"
    SHARED = "shared"


class CapacityTier(StrEnum):
    """Where a replica's capacity comes from, in the order placement prefers them.

    Commits are already paid for, so they come first; then the customer's own on-demand
    capacity; shared capacity is overflow (BRIEF.md, "Capacity is a market")."""

    COMMITTED = "committed"
    ON_DEMAND = "on_demand"
    SHARED = "shared"


class NodeState(StrEnum):
    """Lifecycle of a node we asked a cloud for.

    ``pending``      intent recorded in the store, no provider call has returned yet
    ``provisioning`` the cloud accepted the create; the instance is booting
    ``running``      the cloud reports the instance running; the model server is loading
    ``ready``        the replica on it passed its health check and serves traffic
    ``draining``     selected for removal; no new traffic, finishing in-flight work
    ``stopping``     a warm pool's node: stop was requested from the cloud (its disk stays)
    ``stopped``      a warm pool's node, stopped at the cloud, waiting to be resumed
    ``resuming``     taken from the warm pool by a launch: start is to be (or was) asked;
                     then provisioning, as a create
    ``terminating``  terminate was requested from the cloud
    ``terminated``   the cloud confirmed it gone (terminal)
    ``failed``       the create failed; nothing exists at the cloud (terminal)
    """

    PENDING = "pending"
    PROVISIONING = "provisioning"
    RUNNING = "running"
    READY = "ready"
    DRAINING = "draining"
    STOPPING = "stopping"
    STOPPED = "stopped"
    RESUMING = "resuming"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in (NodeState.TERMINATED, NodeState.FAILED)

    @property
    def is_live(self) -> bool:
        """Counts as capacity the model has or is getting (for the autoscaler)."""
        return self in (
            NodeState.PENDING,
            NodeState.RESUMING,
            NodeState.PROVISIONING,
            NodeState.RUNNING,
            NodeState.READY,
        )


TERMINAL_NODE_STATES = frozenset(s for s in NodeState if s.is_terminal)


class NodePhase(StrEnum):
    """What a booting node reports (``bootstrap/node.sh``), in its order; ``failed`` ends a
    boot early. A report for a node is one of these, or refused. An image builder
    (``BAKE=1``) reports up to ``image_pulled``, then ``baked`` (its disk is ready to be
    imaged), which ends its boot."""

    BOOTED = "booted"
    DRIVER_OK = "driver_ok"
    IMAGE_PULLED = "image_pulled"
    WEIGHTS_FETCHED = "weights_fetched"
    ENGINE_STARTED = "engine_started"
    READY = "ready"
    FAILED = "failed"
    BAKED = "baked"

    @property
    def ends_boot(self) -> bool:
        return self in (NodePhase.READY, NodePhase.FAILED, NodePhase.BAKED)
