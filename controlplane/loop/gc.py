"""The gc job: terminate instances that carry our tags but no live intent in the store (the
remains of a crash between a create and its bookkeeping, or of a lost database), and drop
expired entries of the unavailable-offerings cache."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from sqlalchemy import delete, select

from controlplane.loop.context import LoopContext
from controlplane.store.events import record_event
from controlplane.store.models import Account, Node, UnavailableOffering
from providers.base import MANAGED_VALUE, TAG_CUSTOMER, TAG_MANAGED, CloudNode
from providers.errors import ProviderError
from schema.types import NodeState


def orphans(found: Sequence[CloudNode], known: Mapping[str, str]) -> list[CloudNode]:
    """The instances found whose intent has no record, or a terminal one (pure)."""
    return [c for c in found if (st := known.get(c.intent_id)) is None or NodeState(st).is_terminal]


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
