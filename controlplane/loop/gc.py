"""The gc job: terminate instances that carry our tags but no live intent in the store (the
remains of a crash between a create and its bookkeeping, or of a lost database), delete
baked images that carry our tags but no build row (a build whose row was lost, a customer
the store no longer has), release the placement objects of gangs that are gone, and drop
expired entries of the unavailable-offerings cache.

Safety: only accounts the store holds (gpucap manages) are swept, only what carries
``gpucap-managed`` is touched, and in a customer's own account only what carries that
customer's tag (gpucap's shared accounts are gpucap's alone: a forgotten customer's images
there go too). An image goes only once it is older than ``ImageTimings.orphan_grace_s``,
and never when the cloud does not say when it was made."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial

from sqlalchemy import delete, func, select

from controlplane.loop.context import LoopContext
from controlplane.loop.images import builder_ids
from controlplane.store.events import record_event
from controlplane.store.models import (
    Account,
    MachineImage,
    Node,
    Pool,
    Replica,
    UnavailableOffering,
)
from providers.base import TAG_CUSTOMER, TAG_INTENT, CloudNode, Image, ownership_filter
from providers.errors import InUse, ProviderError
from schema.types import NodeState


def orphans(found: Sequence[CloudNode], known: Mapping[str, str]) -> list[CloudNode]:
    """The instances found whose intent has no record, or a terminal one (pure)."""
    return [c for c in found if (st := known.get(c.intent_id)) is None or NodeState(st).is_terminal]


def orphan_images(
    found: Sequence[Image], builds: Mapping[str, str], now: float, grace_s: float
) -> list[Image]:
    """The images found that no live build row knows (by the intent they carry, or by
    image id; ``builds`` maps both to the row's state), older than the grace (pure)."""
    out = []
    for img in found:
        if img.created_at is None or now - img.created_at < grace_s:
            continue
        states = [builds.get(k) for k in (img.tags.get(TAG_INTENT, ""), img.image_id)]
        if all(st is None or st == "deleted" for st in states):
            out.append(img)
    return out


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
    # Orphans found per account: set once every region of it was listed, else the last
    # sweep's count stays (labels() keeps it); accounts the store no longer has leave.
    found_gauge = ctx.telemetry.gc_orphans
    found_gauge.begin()
    reaped = 0
    for customer, acct, regions in targets:
        account_orphans = found_gauge.labels(customer, acct.cloud, acct.name)
        try:
            provider = ctx.providers.provider(customer, acct)
        except ProviderError as err:
            errors.labels(acct.cloud, acct.name, err.kind).inc()
            continue
        n_orphans, listed = 0, 0
        for region in regions:
            try:
                found = provider.list_nodes(region, ownership_filter(customer))
            except ProviderError as err:
                errors.labels(acct.cloud, acct.name, err.kind).inc()
                continue
            listed += 1
            if not found:
                continue
            with ctx.store.session() as s:
                ids = [c.intent_id for c in found]
                known = dict(s.execute(select(Node.id, Node.state).where(Node.id.in_(ids))).all())
                for bid, needed in builder_ids(s, ids).items():  # image builders
                    known[bid] = (NodeState.RUNNING if needed else NodeState.TERMINATED).value
            lost = orphans(found, known)
            n_orphans += len(lost)
            for c in lost:
                reaped += _reap(
                    ctx,
                    acct,
                    partial(provider.terminate_node, region, c.instance_id),
                    "node.orphan_terminated",
                    f"{c.instance_id} ({c.instance_type}, {region}) carried intent "
                    f"{c.intent_id} with no live record",
                    customer,
                )
        if listed == len(regions):
            account_orphans.set(n_orphans)
    found_gauge.sweep()
    return reaped


def collect_orphan_images(ctx: LoopContext) -> int:
    """Deletes the baked images no build row knows (see the module's safety rules), one
    ``image.orphan_deleted`` event each; returns how many were deleted."""
    with ctx.store.session() as s:
        sweeps: dict[tuple[str, str, str], tuple[Account, dict[str, str]]] = {}
        for a in s.scalars(select(Account).order_by(Account.id)):
            # (a customer's own account: only its images)
            tags = ownership_filter(a.customer if a.owner != "shared" else None)
            where = a.owner if a.owner == "shared" else a.customer
            for region in (a.regions or {}).get("regions", []):
                sweeps.setdefault((a.cloud, f"{where}/{a.name}", region), (a, tags))
            s.expunge(a)
    errors = ctx.telemetry.provider_errors
    grace_s, deleted = ctx.tuning.images.orphan_grace_s, 0
    for (_, _, region), (acct, tags) in sorted(sweeps.items()):
        try:
            provider = ctx.providers.provider(acct.customer, acct)
            found = provider.list_images(region, tags)
        except ProviderError as err:
            errors.labels(acct.cloud, acct.name, err.kind).inc()
            continue
        if not found:
            continue
        with ctx.store.session() as s:
            ids = [i.image_id for i in found]
            intents = [i.tags.get(TAG_INTENT, "") for i in found]
            rows = s.execute(
                select(MachineImage.id, MachineImage.image_id, MachineImage.state).where(
                    MachineImage.id.in_(intents) | MachineImage.image_id.in_(ids)
                )
            ).all()
        builds = {k: st for bid, iid, st in rows for k in (bid, iid) if k}
        for img in orphan_images(found, builds, ctx.now(), grace_s):
            deleted += _reap(
                ctx,
                acct,
                partial(provider.delete_image, region, img.image_id),
                "image.orphan_deleted",
                f"image {img.image_id} ({img.name}, {region}, account {acct.name}) carried "
                f"gpucap's tags (customer {img.tags.get(TAG_CUSTOMER, '?')}, build "
                f"{img.tags.get(TAG_INTENT, '?')}) with no build record",
                img.tags.get(TAG_CUSTOMER),
            )
    return deleted


def _reap(
    ctx: LoopContext,
    acct: Account,
    remove: Callable[[], None],
    kind: str,
    message: str,
    customer: str | None,
) -> bool:
    """One orphan removed, with its event; a provider error is counted and the orphan is
    found again on the next sweep."""
    try:
        remove()
    except ProviderError as err:
        ctx.telemetry.provider_errors.labels(acct.cloud, acct.name, err.kind).inc()
        return False
    with ctx.store.session() as s:
        record_event(s, ctx.now_dt(), kind, message, customer=customer, severity="warning")
    return True
