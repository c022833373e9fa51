"""On-call overrides: pin or pause a model's autoscaler, cordon pools (one or by selector),
drain a node. Each writes spec or intent only; the daemon's jobs carry it out."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from controlplane.api.errors import InvalidArgumentError, NotFoundError, require
from controlplane.api.rows import live_model, model_view, pool_views
from controlplane.api.tx import Tx
from controlplane.api.views import CordonResult, DrainResult, ModelView, NodeView, PoolView
from controlplane.store.events import record_event
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, Pool
from controlplane.store.transitions import drain_replica, retire_replica
from schema.policy import MAX_REPLICAS
from schema.types import Cloud, NodeState


class OnCall:
    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def pin(self, customer: str, name: str, replicas: int | None, reason: str = "") -> ModelView:
        """Pin a model's replica count (bypasses the autoscaler); ``None`` removes the pin."""
        if replicas is not None and not 0 <= replicas <= MAX_REPLICAS:
            raise InvalidArgumentError(
                "replicas", f"must be between 0 and {MAX_REPLICAS} (got {replicas})"
            )

        def do(s: Session) -> ModelView:
            row = live_model(s, customer, name)
            if replicas is not None and replicas > row.spec.get("max_replicas", 0):
                raise InvalidArgumentError(
                    "replicas",
                    f"{replicas} is above the model's max_replicas "
                    f"({row.spec.get('max_replicas')}); raise max_replicas first",
                )
            if row.pinned_replicas == replicas:
                return model_view(s, row)
            now = self._tx.clock()
            row.pinned_replicas, row.updated_at = replicas, now
            s.flush()
            msg = (
                f"model {name} pinned to {replicas} replicas"
                if replicas is not None
                else f"model {name} unpinned; the autoscaler decides again"
            )
            record_event(
                s,
                now,
                "model.pinned" if replicas is not None else "model.unpinned",
                msg + (f": {reason}" if reason else ""),
                customer=customer,
                model=name,
                severity="warning",
            )
            return model_view(s, row)

        return self._tx.write(do)

    def pause(self, customer: str, name: str, paused: bool, reason: str = "") -> ModelView:
        """Pause (hold the current replica count) or resume the autoscaler for one model."""

        def do(s: Session) -> ModelView:
            row = live_model(s, customer, name)
            if row.paused != paused:
                now = self._tx.clock()
                row.paused, row.updated_at = paused, now
                s.flush()
                verb = "paused" if paused else "resumed"
                record_event(
                    s,
                    now,
                    f"model.{verb}",
                    f"autoscaler {verb} for model {name}" + (f": {reason}" if reason else ""),
                    customer=customer,
                    model=name,
                    severity="warning" if paused else "info",
                )
            return model_view(s, row)

        return self._tx.write(do)

    def _unchanged(self, node: Node, model_name: str, what: str) -> DrainResult:
        message = f"node {node.id} is {what}; nothing to do"
        return DrainResult(NodeView(node, model_name), False, message, [])

    def cordon_pool(self, pool_id: str, cordoned: bool, reason: str = "") -> PoolView:
        """Cordon (no new replicas are placed there) or uncordon one pool."""
        require("pool_id", pool_id)

        def do(s: Session) -> PoolView:
            pool = s.get(Pool, pool_id)
            if pool is None:
                raise NotFoundError("pool", pool_id)
            if pool.cordoned != cordoned:
                now = self._tx.clock()
                pool.cordoned = cordoned
                s.flush()
                verb = "cordoned" if cordoned else "uncordoned"
                record_event(
                    s,
                    now,
                    f"pool.{verb}",
                    f"pool {pool_id} {verb}" + (f": {reason}" if reason else ""),
                    customer=pool.customer,
                    severity="warning" if cordoned else "info",
                )
            [view] = pool_views(s, [pool])
            return view

        return self._tx.write(do)

    def cordon_pools(
        self,
        *,
        customer: str = "",
        cloud: str = "",
        region: str = "",
        account: str = "",
        cordoned: bool,
        reason: str = "",
    ) -> CordonResult:
        """Cordon or uncordon every pool matching the selector (all set fields must match).

        Refuses an empty selector, so a slip never cordons every pool of every customer, and
        a selector that matches nothing (a typo must not look like success). Only placement
        reads ``cordoned``: replicas already in these pools keep running until drained.
        Pools a later policy adds are not covered: the cordon is a state of today's pools.
        """
        selector = {"customer": customer, "cloud": cloud, "region": region, "account": account}
        given = {k: v for k, v in selector.items() if v}
        if not given:
            raise InvalidArgumentError(
                "selector",
                "set at least one of customer, cloud, region or account "
                "(an empty selector would cordon every pool)",
            )
        if cloud and cloud not in {c.value for c in Cloud}:
            raise InvalidArgumentError(
                "selector.cloud",
                f"unknown cloud {cloud!r} (one of: {', '.join(c.value for c in Cloud)})",
            )
        described = " ".join(f"{k}={v}" for k, v in given.items())

        def do(s: Session) -> CordonResult:
            q = select(Pool).order_by(Pool.customer, Pool.id)
            for name, value in given.items():
                q = q.where(getattr(Pool, name) == value)
            pools = list(s.scalars(q))
            if not pools:
                raise NotFoundError("pool matching", described)
            now = self._tx.clock()
            verb = "cordoned" if cordoned else "uncordoned"
            changed = [p for p in pools if p.cordoned != cordoned]
            for pool in changed:
                pool.cordoned = cordoned
                record_event(
                    s,
                    now,
                    f"pool.{verb}",
                    f"pool {pool.id} {verb} (selector {described})"
                    + (f": {reason}" if reason else ""),
                    customer=pool.customer,
                    severity="warning" if cordoned else "info",
                )
            s.flush()
            return CordonResult(pool_views(s, changed), matched=len(pools))

        return self._tx.write(do)

    def drain_node(self, node_id: str, reason: str = "", immediate: bool = False) -> DrainResult:
        """Take a node's replica out, surge-first (``lifecycle.surge``): a ready replica
        retires, serving on while placement launches its replacement (the model's desired
        count is unchanged, and a retiring replica no longer counts as live), and drains
        once the replacement is ready; one not serving yet, or any with ``immediate``,
        drains now. A drain stops new traffic (the replica leaves the endpoints), waits for
        its engine's in-flight requests up to the model's drain timeout, then the
        reconciler terminates it. A multi-node replica cannot serve with a member missing,
        so its whole gang leaves. Idempotent: a node already leaving or terminal is left
        alone and the result says so."""
        require("node_id", node_id)

        def do(s: Session) -> DrainResult:
            node = s.get(Node, node_id)
            if node is None:
                raise NotFoundError("node", node_id)
            replica = node.replica
            model = s.get(ModelRow, replica.model_id)
            model_name = model.name if model is not None else ""
            state = NodeState(node.state)
            retiring = replica.retiring_at is not None and not immediate
            if state in (NodeState.DRAINING, NodeState.TERMINATING) or state.is_terminal:
                return self._unchanged(node, model_name, f"already {state.value}")
            if retiring:
                return self._unchanged(node, model_name, "already retiring")
            now = self._tx.clock()
            where = f"replica {replica.id} of {model_name} in {replica.pool_id}"
            how = None if immediate else retire_replica(replica, now, reason or "on-call drain")
            drained: list[str] = []
            if how == "retiring":
                message = (
                    f"node {node_id} retiring ({where}): it serves until its replacement is "
                    "ready, then drains"
                )
            else:
                if how is None:
                    drained = drain_replica(replica, now)  # the one drain transition
                else:
                    drained = sorted(n.id for n in replica.nodes if n.state == "draining")
                gang = f" with {len(drained) - 1} other node(s) of its replica"
                message = (
                    f"node {node_id}{gang if len(drained) > 1 else ''} draining ({where}); "
                    "placement replaces the replica"
                )
            s.flush()
            record_event(
                s,
                now,
                "node.retiring" if how == "retiring" else "node.draining",
                message + (f": {reason}" if reason else ""),
                customer=node.customer,
                model=model_name or None,
                node=node_id,
                severity="warning",
            )
            return DrainResult(NodeView(node, model_name), True, message, drained)

        return self._tx.write(do)
