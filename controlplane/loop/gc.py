"""The gc job: terminate instances that carry our tags but no live intent in the store (the
remains of a crash between a create and its bookkeeping, or of a lost database), release
the placement objects of gangs that are gone, and drop expired entries of the
unavailable-offerings cache."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from sqlalchemy import delete, func, select

from controlplane.loop.context import LoopContext
from controlplane.loop.images import builder_ids
from controlplane.store.events import record_event
from controlplane.store.models import Account, Node, Pool, Replica, UnavailableOffering
from providers.base import MANAGED_VALUE, TAG_CUSTOMER, TAG_MANAGED, CloudNode
from providers.errors import InUse, ProviderError
from schema.types import NodeState


def orphans(found: Sequence[CloudNode], known: Mapping[str, str]) -> list[CloudNode]:
    """The instances found whose intent has no record, or a terminal one (pure)."""
    return [c for c in found if (st := known.get(c.intent_id)) is None or NodeState(st).is_terminal]


# Gangs (replicas of more than one node) that ended and still hold a placement object.
_GANGS = select(Node.replica_id).group_by(Node.replica_id).having(func.count(Node.id) > 1)
_ENDED_GANGS = (
    select(Replica.id, Pool.customer, Pool.account, Pool.region)
    .join(Pool, Replica.pool_id == Pool.id)
    .where(
        Replica.state.in_([NodeState.TERMINATED.value, NodeState.FAILED.value]),
        Replica.placement_released_at.is_(None),
        Replica.id.in_(_GANGS),
    )
)


def release_placement_groups(ctx: LoopContext) -> int:
    """Release the placement object of every gang whose nodes are all gone; one still
    holding an instance (shutting down) is asked again on the next sweep. Returns how many
    were released."""
    with ctx.store.session() as s:
        ended = s.execute(_ENDED_GANGS).all()
        accounts = {(a.customer, a.name): a for a in s.scalars(select(Account))}
    released = []
    for rid, customer, account, region in ended:
        acct = accounts.get((customer, account))
        if acct is None:
            continue
        try:
            ctx.providers.provider(customer, acct).delete_placement_group(region, rid)
        except InUse:
            continue
        except ProviderError as err:
            ctx.telemetry.provider_errors.labels(acct.cloud, acct.name, err.kind).inc()
            continue
        released.append(rid)
    if released:
        with ctx.store.session() as s:
            for rid in released:
                row = s.get(Replica, rid)
                if row is not None:
                    row.placement_released_at = ctx.now_dt()
    return len(released)


def collect_garbage(ctx: LoopContext) -> int:
    """Returns the number of instances terminated."""
    with ctx.store.session() as s:
        accounts = s.scalars(select(Account)).all()
        targets = [(a.customer, a, list((a.regions or {}).get("regions", []))) for a in accounts]
        s.execute(
            delete(UnavailableOffering).where(
                UnavailableOffering.until <= datetime.fromtimestamp(ctx.now(), UTC)
            )
        )
    errors = ctx.telemetry.provider_errors
    reaped = 0
    for customer, acct, regions in targets:
        try:
            provider = ctx.providers.provider(customer, acct)
        except ProviderError as err:
            errors.labels(acct.cloud, acct.name, err.kind).inc()
            continue
        for region in regions:
            try:
                found = provider.list_nodes(
                    region, {TAG_MANAGED: MANAGED_VALUE, TAG_CUSTOMER: customer}
                )
            except ProviderError as err:
                errors.labels(acct.cloud, acct.name, err.kind).inc()
                continue
            if not found:
                continue
            with ctx.store.session() as s:
                ids = [c.intent_id for c in found]
                known = {n.id: n.state for n in s.scalars(select(Node).where(Node.id.in_(ids)))}
                for bid, needed in builder_ids(s, ids).items():  # image builders
                    known[bid] = (NodeState.RUNNING if needed else NodeState.TERMINATED).value
            for c in orphans(found, known):
                try:
                    provider.terminate_node(region, c.instance_id)
                except ProviderError as err:
                    errors.labels(acct.cloud, acct.name, err.kind).inc()
                    continue  # found again on the next sweep
                reaped += 1
                with ctx.store.session() as s:
                    record_event(
                        s,
                        ctx.now_dt(),
                        "node.orphan_terminated",
                        f"{c.instance_id} ({c.instance_type}, {region}) carried intent "
                        f"{c.intent_id} with no live record",
                        customer=customer,
                        severity="warning",
                    )
    return reaped
