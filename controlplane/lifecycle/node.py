"""One node's step: (what the store knows of the node, what the cloud reports, now) -> the
action to take. The reconciler gathers the report (describe, a probe of the node's engine,
or the instances found by the intent tag) and applies the action; nothing here does I/O.

=================  ==========================================  ===========================
state              the cloud reports                           action
=================  ==========================================  ===========================
pending            (nothing asked)                             Create once the backoff has
                                                               passed; NotAttempted while
                                                               its pool is blocked
provisioning,      gone, terminated or stopping                Move(failed)
provisioning,      running, and serving (the engine answers    Move(ready)
running            its probe, or the node reported ``ready``)
                   running, not serving, was provisioning      Move(running)
                   not ready within the provision timeout      Move(draining, failed)
ready              the engine fails ``failure_threshold``      Move(draining, failed)
                   probes in a row (``lifecycle.health``)
                   a failed probe, or one that answers after   Count the failures
                   failures
draining           instances alive, the engine still holding   Wait (the drain's grace)
                   requests, within the drain timeout
                   instances still alive                       Terminate them, Move(
                                                               terminating)
                   none alive and none known                   Move(terminated)
terminating        any still alive                             Terminate those not already
                                                               stopping (and stay)
                   none alive                                  Move(terminated)
ready, of a warm   running                                     Move(stopping), then Stop it
replica (stopped
mode)
stopping           running or pending (the stop was lost)      Stop it (and stay)
                   stopped                                     Move(stopped)
stopped            (anything but gone)                         Wait: the warm pool holds it
resuming           stopped                                     Start it, Move(provisioning)
                   pending or running (the start went through) Move(provisioning)
stopping, stopped, gone or terminated                          Move(failed)
resuming
=================  ==========================================  ===========================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controlplane.lifecycle.health import Probe, drain_done, failures_after, unhealthy
from providers.base import InstanceStatus
from schema.policy import Health
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
    probe_failures: int = 0  # consecutive failed probes of its engine, so far
    reported_ready: bool = False  # the node reported its ``ready`` phase
    served: bool = False  # it was ready once (a drain then waits for its requests)
    failed: bool = False  # it failed (a drain then does not wait)
    park: bool = False  # of a warm replica kept stopped: stop it once it is ready


@dataclass(frozen=True)
class Observed:
    """One instance as the cloud reports it: ``status`` None when it no longer exists."""

    instance_id: str
    status: InstanceStatus | None
    zone: str | None = None
    probe: Probe | None = None  # its engine, probed this pass (None: not probed)


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
class CountFailures:
    """Record the engine's consecutive failed probes; the node stays where it is."""

    failures: int


@dataclass(frozen=True)
class Terminate:
    """Ask the cloud to terminate these instances; the node stays where it is."""

    instances: tuple[str, ...]


@dataclass(frozen=True)
class Stop:
    """Ask the cloud to stop these instances (the node is ``stopping`` already)."""

    instances: tuple[str, ...]


@dataclass(frozen=True)
class Start:
    """Ask the cloud to start these stopped instances, then move to ``provisioning``."""

    instances: tuple[str, ...]


@dataclass(frozen=True)
class Move:
    to: NodeState
    error: str | None = None
    zone: str | None = None
    failed: bool = False  # a failure though not left ``failed`` (drained to terminate it)
    terminate: tuple[str, ...] = ()  # instances to terminate before moving
    probe_failures: int | None = None  # what to record (None: leave it)
    stop: tuple[str, ...] = ()  # instances to stop once the move is recorded


Action = Wait | Create | NotAttempted | CountFailures | Terminate | Move | Stop | Start


def backoff_s(attempts: int, t: Timing) -> float:
    return min(t.backoff_max_s, t.backoff_base_s * 2 ** max(0, attempts - 1))


def step_pending(n: NodeFacts, now: float, t: Timing) -> Action:
    if n.last_attempt_at is not None and now < n.last_attempt_at + backoff_s(n.attempts, t):
        return Wait()
    if n.pool_blocked_until is not None and n.pool_blocked_until > now:
        return NotAttempted("pool blocked")
    return Create()


def step_live(
    n: NodeFacts, seen: Observed, now: float, t: Timing, health: Health | None = None
) -> Action:
    """A node the cloud accepted (provisioning, running or ready), as described now, with
    its model's health rules (None: the defaults)."""
    health = health or Health()
    if seen.status in (None, InstanceStatus.TERMINATED, InstanceStatus.STOPPING):
        return Move(NodeState.FAILED, error=DISAPPEARED)
    running = seen.status == InstanceStatus.RUNNING
    if n.state == NodeState.READY and n.park and running:
        return Move(NodeState.STOPPING, stop=(seen.instance_id,))
    if n.state == NodeState.READY:
        failures = failures_after(n.probe_failures, seen.probe if running else Probe(False))
        why = unhealthy(failures, health)
        if why is not None:
            return Move(NodeState.DRAINING, error=why, failed=True, probe_failures=failures)
        return CountFailures(failures) if failures != n.probe_failures else Wait()
    if running:
        if n.reported_ready or (seen.probe is not None and seen.probe.serving):
            return Move(NodeState.READY, probe_failures=0 if n.probe_failures else None)
        if n.state == NodeState.PROVISIONING:
            return Move(NodeState.RUNNING, zone=seen.zone)
    if now - n.state_since > t.provision_timeout_s:
        return Move(NodeState.DRAINING, error=PROVISION_TIMEOUT, failed=True)
    return Wait()


def step_leaving(
    n: NodeFacts,
    found: Sequence[Observed],
    now: float = 0.0,
    health: Health | None = None,
) -> Action:
    """A draining or terminating node, given the instances recorded or found for its intent
    (none: the create never reached the cloud, or it is gone), each with its engine's probe
    where one was taken. A draining node that served keeps its instances until its engine
    holds no request, up to the drain timeout (``lifecycle.health.drain_done``)."""
    alive = [o for o in found if o.status not in (None, InstanceStatus.TERMINATED)]
    if n.state == NodeState.DRAINING:
        running = [o for o in alive if o.status == InstanceStatus.RUNNING]
        probe = next((o.probe for o in running if o.probe is not None), None)
        waited = now - n.state_since
        if running and not drain_done(probe, waited, health or Health(), n.served, n.failed):
            return Wait()
        kill = tuple(o.instance_id for o in alive)
        return Move(NodeState.TERMINATED if not found else NodeState.TERMINATING, terminate=kill)
    kill = tuple(o.instance_id for o in alive if o.status != InstanceStatus.STOPPING)
    if alive:
        return Terminate(kill) if kill else Wait()
    return Move(NodeState.TERMINATED)


def step_warm(n: NodeFacts, seen: Observed) -> Action:
    """A warm pool's node (stopping, stopped, or resuming), as described now."""
    if seen.status in (None, InstanceStatus.TERMINATED):
        return Move(NodeState.FAILED, error=DISAPPEARED)
    up = seen.status in (InstanceStatus.PENDING, InstanceStatus.RUNNING)
    if n.state == NodeState.STOPPING:
        if seen.status == InstanceStatus.STOPPED:
            return Move(NodeState.STOPPED)
        return Stop((seen.instance_id,)) if up else Wait()
    if n.state == NodeState.RESUMING:
        if seen.status == InstanceStatus.STOPPED:
            return Start((seen.instance_id,))
        return Move(NodeState.PROVISIONING) if up else Wait()
    return Wait()
