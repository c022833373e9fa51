"""One node's step: (what the store knows of the node, what the cloud reports, now) -> the
action to take. The reconciler gathers the report (describe, health probe, or the instances
found by the intent tag) and applies the action; nothing here does I/O.

=================  ==========================================  ===========================
state              the cloud reports                           action
=================  ==========================================  ===========================
pending            (nothing asked)                             Create once the backoff has
                                                               passed; NotAttempted while
                                                               its pool is blocked
provisioning,      gone, terminated or stopping                Move(failed)
running, ready     running and serving                         Move(ready)
                   running, not serving, was provisioning      Move(running)
                   not ready within the provision timeout      Move(draining, failed)
draining           instances still alive                       Terminate them, Move(
                                                               terminating)
                   none alive and none known                   Move(terminated)
terminating        any still alive                             Terminate those not already
                                                               stopping (and stay)
                   none alive                                  Move(terminated)
=================  ==========================================  ===========================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from providers.base import InstanceStatus
from schema.types import NodeState

# A node not ready within the provision timeout is drained with this error (and its
# ``failed_at`` stamped). Migration 0002 matches it to stamp rows drained before that.
PROVISION_TIMEOUT = "not ready within provision timeout"
DISAPPEARED = "instance disappeared at the cloud"


@dataclass(frozen=True)
class NodeFacts:
    """What the store knows of a node, as the step needs it."""

    state: NodeState
    attempts: int  # create calls made for this intent
    last_attempt_at: float | None
    state_since: float  # when the node entered ``state``
    pool_blocked_until: float | None = None  # the node's offering is blocked until


@dataclass(frozen=True)
class Observed:
    """One instance as the cloud reports it: ``status`` None when it no longer exists."""

    instance_id: str
    status: InstanceStatus | None
    zone: str | None = None
    serving: bool = False  # the model server answers its health check


@dataclass(frozen=True)
class Timing:
    backoff_base_s: float
    backoff_max_s: float
    provision_timeout_s: float


@dataclass(frozen=True)
class Wait:
    """Nothing to do now."""


@dataclass(frozen=True)
class Create:
    """Count the attempt, then call the cloud's create with the intent's token."""


@dataclass(frozen=True)
class NotAttempted:
    """The pool was blocked after this intent was placed: fail it without calling a cloud
    known to refuse, so placement re-places it (an earlier attempt that did reach the cloud
    is found by its intent tag and collected as an orphan)."""

    reason: str


@dataclass(frozen=True)
class Terminate:
    """Ask the cloud to terminate these instances; the node stays where it is."""

    instances: tuple[str, ...]


@dataclass(frozen=True)
class Move:
    to: NodeState
    error: str | None = None
    zone: str | None = None
    failed: bool = False  # a failure though not left ``failed`` (drained to terminate it)
    terminate: tuple[str, ...] = ()  # instances to terminate before moving


Action = Wait | Create | NotAttempted | Terminate | Move


def backoff_s(attempts: int, t: Timing) -> float:
    return min(t.backoff_max_s, t.backoff_base_s * 2 ** max(0, attempts - 1))


def step_pending(n: NodeFacts, now: float, t: Timing) -> Action:
    if n.last_attempt_at is not None and now < n.last_attempt_at + backoff_s(n.attempts, t):
        return Wait()
    if n.pool_blocked_until is not None and n.pool_blocked_until > now:
        return NotAttempted("pool blocked")
    return Create()


def step_live(n: NodeFacts, seen: Observed, now: float, t: Timing) -> Action:
    """A node the cloud accepted (provisioning, running or ready), as described now."""
    if seen.status in (None, InstanceStatus.TERMINATED, InstanceStatus.STOPPING):
        return Move(NodeState.FAILED, error=DISAPPEARED)
    if seen.status == InstanceStatus.RUNNING:
        if seen.serving:
            return Move(NodeState.READY) if n.state != NodeState.READY else Wait()
        if n.state == NodeState.PROVISIONING:
            return Move(NodeState.RUNNING, zone=seen.zone)
    if n.state != NodeState.READY and now - n.state_since > t.provision_timeout_s:
        return Move(NodeState.DRAINING, error=PROVISION_TIMEOUT, failed=True)
    return Wait()


def step_leaving(n: NodeFacts, found: Sequence[Observed]) -> Action:
    """A draining or terminating node, given the instances recorded or found for its intent
    (none: the create never reached the cloud, or it is gone)."""
    alive = [o for o in found if o.status not in (None, InstanceStatus.TERMINATED)]
    if n.state == NodeState.DRAINING:
        kill = tuple(o.instance_id for o in alive)
        return Move(NodeState.TERMINATED if not found else NodeState.TERMINATING, terminate=kill)
    kill = tuple(o.instance_id for o in alive if o.status != InstanceStatus.STOPPING)
    if alive:
        return Terminate(kill) if kill else Wait()
    return Move(NodeState.TERMINATED)
