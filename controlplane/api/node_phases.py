"""Boot phases that nodes report (``bootstrap/node.sh``, over gRPC ``ReportNodePhase`` or
``POST /v1/node-phases``): authenticated by the node's own boot token, recorded once per
(node, phase), so a retried report changes nothing. The token is spent when the boot ends
(``ready`` or ``failed``): a later report with it is refused as a replay, except a retry of
one already recorded, which changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from coldstart.images import BuildState
from controlplane.api.errors import (
    InvalidArgumentError,
    PermissionDeniedError,
    UnauthenticatedError,
    require,
)
from controlplane.api.tx import Tx
from controlplane.loop.context import epoch
from controlplane.node_tokens import digest, matches
from controlplane.store.events import record_event
from controlplane.store.models import MachineImage, Node, NodePhaseReport
from schema.types import NodePhase, NodeState

# A node's clock may run ahead of the daemon's; a report further in the future is refused.
MAX_CLOCK_SKEW = timedelta(minutes=5)
MAX_DETAIL = 500


@dataclass(frozen=True)
class PhaseReport:
    node_id: str
    phase: str
    at: float  # unix seconds, the node's clock
    token: str
    detail: str = ""


class NodePhases:
    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def report(self, r: PhaseReport) -> bool:
        """Record ``r``; True if it was new. Raises UnauthenticatedError (no, wrong, expired
        or spent token), PermissionDeniedError (a valid token of another node),
        InvalidArgumentError (an unknown phase, a time out of range)."""
        require("node_id", r.node_id)
        if not r.token:
            raise UnauthenticatedError("missing node token")
        try:
            phase = NodePhase(r.phase)
        except ValueError:
            known = ", ".join(p.value for p in NodePhase)
            reason = f"unknown phase {r.phase!r} (known: {known})"
            raise InvalidArgumentError("phase", reason) from None
        now = self._tx.clock()
        try:
            at = datetime.fromtimestamp(r.at, UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidArgumentError("at", f"not a time: {r.at!r}") from None
        if at > now + MAX_CLOCK_SKEW:
            raise InvalidArgumentError("at", f"{at.isoformat()} is in the future")

        def do(s: Session) -> bool:
            node = s.get(Node, r.node_id)
            if node is None:
                build = s.get(MachineImage, r.node_id)
                if build is not None and matches(r.token, build.token_sha256):
                    return _builder_report(s, build, phase, now, r.detail[:MAX_DETAIL])
            if node is None or not matches(r.token, node.token_sha256):
                owner = s.scalars(
                    select(Node.id).where(Node.token_sha256 == digest(r.token))
                ).first()
                if owner is not None and node is not None:
                    raise PermissionDeniedError(f"this token is not node {r.node_id}'s")
                # (an unknown node id and a wrong token read alike: no existence leak)
                raise UnauthenticatedError("invalid node token")
            seen = s.scalars(
                select(NodePhaseReport).where(
                    NodePhaseReport.node_id == node.id, NodePhaseReport.phase == phase.value
                )
            ).first()
            if seen is not None and not _before_resume(seen, node):
                return False  # a retry (its response lost): nothing changes
            expires = node.token_expires_at
            if expires is None or expires <= now or NodeState(node.state).is_terminal:
                raise UnauthenticatedError(f"the token of node {node.id} is expired or spent")
            if seen is not None:  # the boot after a resume: its phase replaces the first's
                seen.at, seen.reported_at, seen.detail = at, now, r.detail[:MAX_DETAIL]
            else:
                s.add(
                    NodePhaseReport(
                        node_id=node.id,
                        phase=phase.value,
                        at=at,
                        reported_at=now,
                        detail=r.detail[:MAX_DETAIL],
                    )
                )
            if phase.ends_boot:  # spent: kept only to recognise retries of what it sent
                node.token_expires_at = now
            if phase == NodePhase.FAILED:
                record_event(
                    s,
                    now,
                    "node.boot_failed",
                    f"node {node.id} failed to boot: {r.detail[:MAX_DETAIL]}",
                    customer=node.customer,
                    node=node.id,
                    severity="warning",
                )
            return True

        return self._tx.write(do)


def _before_resume(seen: NodePhaseReport, node: Node) -> bool:
    """Whether ``seen`` was reported before the node was last resumed: a stopped node's
    start boots it again (its per-boot bootstrap reports every phase anew)."""
    resumed, reported = epoch(node.resuming_at), epoch(seen.reported_at)
    return resumed is not None and reported is not None and reported < resumed


def _builder_report(
    s: Session, build: MachineImage, phase: NodePhase, now: datetime, detail: str
) -> bool:
    """An image builder's report (``bootstrap/node.sh`` with ``BAKE=1``): ``baked`` (with the
    pulled image's digest) lets the image job make the image; ``failed`` fails the build;
    the phases before them are accepted and not kept. The token is spent by either end."""
    if phase == NodePhase.BAKED and build.baked_at is not None:
        return False  # a retry
    expires = build.token_expires_at
    if expires is None or expires <= now or build.state != BuildState.BUILDING:
        raise UnauthenticatedError(f"the token of image builder {build.id} is expired or spent")
    if phase == NodePhase.BAKED:
        build.baked_at = now
        build.source_digest = detail[:255] or None
        build.token_expires_at = now
    elif phase == NodePhase.FAILED:
        build.state = BuildState.FAILED.value
        build.state_at = now
        build.error = f"the builder failed: {detail}"
        build.token_expires_at = now
        record_event(
            s,
            now,
            "image.build_failed",
            f"image build {build.id} of {build.runtime_image} in {build.region} failed: "
            f"{detail}; nodes boot the base image with the full bootstrap",
            customer=build.customer,
            severity="warning",
        )
    elif phase in (NodePhase.READY, NodePhase.WEIGHTS_FETCHED, NodePhase.ENGINE_STARTED):
        raise InvalidArgumentError("phase", f"an image builder does not report {phase.value}")
    return True
