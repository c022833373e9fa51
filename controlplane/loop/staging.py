"""The staging job: keep copies of models' weights in the object stores near where they run
(``coldstart.staging`` decides; this module reads its input and applies it).

Each tick:

1. plan: every model whose policy enables staging, the sites where its replicas run and the
   ones placement would pick next, the copies the store has, each site's budget;
2. apply the plan: a copy to start gets its row (state ``pending``) before any provider
   call; a copy to evict turns ``evicting``, its objects are deleted, then ``evicted``;
3. advance the copies the bandwidth limit admits (``coldstart.staging.admit``: the oldest
   few per site, a byte budget per site and tick): list the origin once (the manifest:
   every object's size and checksum), then server-side copy steps, the cloud's resume state
   written to the row after each; a finished copy is verified object by object against the
   manifest before it turns ``ready``;
4. look again at ready copies every ``staging_verify_every_s``: a copy whose objects no
   longer match (overwritten, deleted, corrupted) goes back to copying what differs.

Failures never block scaling: a node tries the ready copies of its cloud nearest first,
then the origins (``controlplane.node_boot.weight_sources``), so a missing origin object, a
checksum mismatch, a quota on the bucket or a cloud error only leaves that site on a slower
path, with an event saying so, and the copy is tried again after ``staging_retry_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from coldstart.staging import (
    GB,
    Active,
    Copied,
    CopyKey,
    Held,
    Need,
    Site,
    SiteKey,
    StagingPlan,
    admit,
    mismatches,
    plan,
)
from controlplane.active_policies import ActivePolicies
from controlplane.loop.context import LoopContext, epoch
from controlplane.loop.snapshot import PoolFacts, Snapshot, SnapshotReader
from controlplane.loop.views import pool_view
from controlplane.placement import ModelView, PlacementInput
from controlplane.placement.plan import POLICY_FILTERS, TIER_RANK, option_for
from controlplane.store.events import record_event
from controlplane.store.models import Account as AccountRow
from controlplane.store.models import WeightCopy
from providers.base import ObjectStore, StoredObject
from providers.errors import (
    AuthFailed,
    InvalidRequest,
    NotFound,
    ProviderError,
    QuotaExceeded,
    Throttled,
    TransientError,
)
from schema.policy import Model as ModelSpec
from schema.policy import Policy
from schema.types import Cloud

log = structlog.get_logger("gpucap.loop")

PENDING, COPYING, READY, FAILED = "pending", "copying", "ready", "failed"
EVICTING, EVICTED = "evicting", "evicted"
HELD_STATES = (PENDING, COPYING, READY, FAILED, EVICTING)


class Stager:
    """The job, with the customers' parsed policies kept between ticks (parsed again only
    when a customer's active policy changes)."""

    def __init__(self) -> None:
        self._policies = ActivePolicies()

    def run(self, ctx: LoopContext, reader: SnapshotReader) -> None:
        now = ctx.now()
        with ctx.store.session() as s:
            snap = reader.read(s, now, placement=True)
            policies = self._policies.read(s)
            accounts = {(a.customer, a.name): a for a in s.scalars(select(AccountRow))}
            rows = list(s.scalars(select(WeightCopy).where(WeightCopy.state.in_(HELD_STATES))))
        sites = _sites(policies, lambda c, a: _store_of(ctx, accounts.get((c, a))))
        needs = _needs(snap, policies)
        _touch(ctx, needs)
        held = [_held(r, now) for r in rows]
        result = plan(needs, held, list(sites.values()), now)
        _apply(ctx, result, sites)
        _evict(ctx, accounts)
        _advance(ctx, accounts)
        _reverify(ctx, accounts)


# ---- the plan's input ---------------------------------------------------------------------


def _store_of(ctx: LoopContext, acct: AccountRow | None) -> ObjectStore | None:
    if acct is None:
        return None
    try:
        provider = ctx.providers.provider(acct.customer, acct)
    except ProviderError:
        return None
    return provider if isinstance(provider, ObjectStore) else None


def _sites(policies: dict[str, Policy], store_of: Any) -> dict[SiteKey, Site]:
    """Every region of every account with staging whose cloud adapter can copy objects."""
    out: dict[SiteKey, Site] = {}
    for customer, policy in policies.items():
        for acct in policy.accounts:
            if acct.staging is None or store_of(customer, acct.name) is None:
                continue
            for region in acct.regions:
                uri = acct.staging_uri(region)
                assert uri is not None
                key = SiteKey(customer, acct.name, region)
                budget = int(acct.staging.budget_gb * GB)
                out[key] = Site(key, acct.cloud.value, uri, budget, acct.staging.price(acct.cloud))
    return out


def _needs(snap: Snapshot, policies: dict[str, Policy]) -> list[Need]:
    out = []
    for m in snap.models:
        spec, policy = m.spec, policies.get(m.customer)
        if m.deleted or policy is None or spec.weights is None:
            continue
        if spec.staging is None or not spec.staging.enabled:
            continue
        pools = {p.id: p for p in snap.pools.get(m.customer, [])}
        running = sorted(
            {
                SiteKey(m.customer, p.account, p.region)
                for r in snap.replicas.get(m.id, [])
                if r.live and (p := pools.get(r.pool_id)) is not None
            }
        )
        origins = {c.value: u for c in Cloud if (u := spec.weights.origin_for(c)) is not None}
        out.append(
            Need(
                customer=m.customer,
                model=m.name,
                priority=spec.priority,
                size_bytes=int(spec.weights.size_gb * GB),
                origins=origins,
                running=tuple(running),
                ahead=ahead_sites(m.customer, m.name, spec, policy, list(pools.values())),
                regions_ahead=spec.staging.regions_ahead,
            )
        )
    return out


def ahead_sites(
    customer: str, model: str, spec: ModelSpec, policy: Policy, pools: list[PoolFacts]
) -> tuple[SiteKey, ...]:
    """The sites of the pools placement's policy filters allow the model (its overflow pools
    included), in placement's order: tier, then price per slot, then the pool's id."""
    views = tuple(pool_view(p, 0, 0.0) for p in pools)
    inp = PlacementInput(ModelView(customer, model, spec), 0.0, (), views, policy.overflow)
    allowed = [p for p in views if all(ok(inp, p) for _, ok in POLICY_FILTERS)]

    def order(p: Any) -> tuple[float, float, str]:
        opt = option_for(spec, p.gpu_shape)
        slots = opt.max_concurrency if opt is not None else 1
        return (float(TIER_RANK[p.tier]), p.price_usd_per_hour / slots, p.id)

    seen: dict[SiteKey, None] = {}
    for p in sorted(allowed, key=order):
        seen.setdefault(SiteKey(customer, p.account, p.region), None)
    return tuple(seen)


def _held(r: WeightCopy, now: float) -> Held:
    return Held(
        CopyKey(r.customer, r.model, r.account, r.region),
        r.state,
        int(r.bytes_total or 0),
        epoch(r.last_used_at) or epoch(r.created_at) or 0.0,
        epoch(r.retry_at),
    )


def _touch(ctx: LoopContext, needs: list[Need]) -> None:
    """A copy beside running replicas is in use (what LRU eviction goes by)."""
    running = {(n.customer, n.model, k.account, k.region) for n in needs for k in n.running}
    if not running:
        return
    with ctx.store.session() as s:
        for r in s.scalars(select(WeightCopy).where(WeightCopy.state == READY)):
            if (r.customer, r.model, r.account, r.region) in running:
                r.last_used_at = ctx.now_dt()


# ---- applying the plan --------------------------------------------------------------------


def _apply(ctx: LoopContext, p: StagingPlan, sites: dict[SiteKey, Site]) -> None:
    now = ctx.now_dt()
    with ctx.store.session() as s:
        for start in p.start:
            k = start.key
            row = _row(s, k)
            if row is None:
                row = WeightCopy(
                    customer=k.customer,
                    model=k.model,
                    account=k.account,
                    cloud=sites[k.site].cloud,
                    region=k.region,
                    created_at=now,
                    attempts=0,
                )
                s.add(row)
            same = (row.source_uri, row.dest_uri) == (start.source_uri, start.dest_uri)
            if same and row.state == FAILED and (row.transfer or {}).get("objects"):
                row.state = COPYING  # resumes where the cloud says the copy is
            else:
                row.source_uri, row.dest_uri = start.source_uri, start.dest_uri
                row.state, row.transfer = PENDING, {}
                row.bytes_total, row.bytes_done = start.size_bytes, 0
            row.reason = start.reason[:255]
            row.updated_at, row.retry_at, row.evicted_at = now, None, None
            record_event(
                s,
                now,
                "staging.planned",
                f"stage {k.model} in {k.account}/{k.region} ({start.size_bytes / GB:g} GB, "
                f"{start.reason}): {start.source_uri} -> {start.dest_uri}",
                customer=k.customer,
                model=k.model,
            )
        for ev in p.evict:
            row = _row(s, ev.key)
            if row is None or row.state in (EVICTING, EVICTED):
                continue
            row.state, row.updated_at = EVICTING, now
            row.error = ev.reason[:1000]
            record_event(
                s,
                now,
                "staging.evicting",
                f"evict {ev.key.model} from {ev.key.account}/{ev.key.region}: {ev.reason}",
                customer=ev.key.customer,
                model=ev.key.model,
            )


def _row(s: Session, k: CopyKey) -> WeightCopy | None:
    return s.scalars(
        select(WeightCopy).where(
            WeightCopy.customer == k.customer,
            WeightCopy.model == k.model,
            WeightCopy.account == k.account,
            WeightCopy.region == k.region,
        )
    ).one_or_none()


@dataclass(frozen=True)
class _Job:
    id: int
    customer: str
    model: str
    account: str
    region: str
    source_uri: str
    dest_uri: str
    state: str
    transfer: dict[str, Any]
    attempts: int

    @property
    def where(self) -> str:
        return f"{self.model} in {self.account}/{self.region}"


def _jobs(ctx: LoopContext, states: tuple[str, ...]) -> list[_Job]:
    with ctx.store.session() as s:
        rows = s.scalars(
            select(WeightCopy).where(WeightCopy.state.in_(states)).order_by(WeightCopy.id)
        )
        return [
            _Job(
                r.id,
                r.customer,
                r.model,
                r.account,
                r.region,
                r.source_uri,
                r.dest_uri,
                r.state,
                dict(r.transfer or {}),
                r.attempts,
            )
            for r in rows
        ]


def _store(
    ctx: LoopContext, accounts: dict[tuple[str, str], AccountRow], j: _Job
) -> ObjectStore | None:
    return _store_of(ctx, accounts.get((j.customer, j.account)))


def _evict(ctx: LoopContext, accounts: dict[tuple[str, str], AccountRow]) -> None:
    for j in _jobs(ctx, (EVICTING,)):
        store = _store(ctx, accounts, j)
        if store is None:
            continue
        try:
            store.delete_objects(j.region, j.dest_uri)
        except ProviderError as err:
            _count(ctx, accounts, j, err)
            continue  # asked again next tick
        with ctx.store.session() as s:
            row = s.get(WeightCopy, j.id)
            if row is None or row.state != EVICTING:
                continue
            row.state, row.bytes_done, row.transfer = EVICTED, 0, {}
            row.evicted_at = row.updated_at = ctx.now_dt()
            record_event(
                s,
                ctx.now_dt(),
                "staging.evicted",
                f"{j.where}: {j.dest_uri} deleted",
                customer=j.customer,
                model=j.model,
            )


# ---- copying ------------------------------------------------------------------------------


def _advance(ctx: LoopContext, accounts: dict[tuple[str, str], AccountRow]) -> None:
    t = ctx.tuning
    jobs = _jobs(ctx, (PENDING, COPYING))
    active = [Active(CopyKey(j.customer, j.model, j.account, j.region), j.id) for j in jobs]
    budgets = admit(active, t.staging_max_concurrent, t.staging_bytes_per_tick)
    for j in jobs:
        budget = budgets.get(CopyKey(j.customer, j.model, j.account, j.region))
        store = _store(ctx, accounts, j)
        if budget is None or store is None:
            continue
        try:
            _advance_one(ctx, store, j, budget)
        except ProviderError as err:
            _copy_failed(ctx, accounts, j, err)


def _advance_one(ctx: LoopContext, store: ObjectStore, j: _Job, budget: int) -> None:
    transfer = j.transfer
    if not transfer.get("objects"):
        # Intent first: the attempt is counted before the origin is asked.
        _save(ctx, j, state=COPYING, attempts=j.attempts + 1, started=True)
        found = store.list_objects(j.region, j.source_uri)
        if not found:
            raise NotFound(f"no object at {j.source_uri}", code="NoSuchOrigin")
        transfer = {"objects": [_manifest_entry(o, j) for o in found]}
        _save(ctx, j, transfer=transfer)
    objects = transfer["objects"]
    left = budget
    for entry in objects:
        if entry["done"]:
            continue
        if left <= 0:
            break
        source = StoredObject(entry["src"], entry["size"], entry["checksum"], tuple(entry["parts"]))
        before = entry["bytes_done"]
        step = store.copy_step(j.region, source, entry["dest"], entry["resume"], left)
        entry.update(done=step.done, bytes_done=step.bytes_done, resume=step.resume)
        left -= max(1, step.bytes_done - before)
        _save(ctx, j, transfer=transfer)  # the cloud's resume state, after every step
    if all(e["done"] for e in objects):
        _verify(ctx, store, j, transfer)


def _manifest_entry(o: StoredObject, j: _Job) -> dict[str, Any]:
    dest = j.dest_uri + o.uri[len(j.source_uri) :] if j.source_uri.endswith("/") else j.dest_uri
    return {
        "src": o.uri,
        "dest": dest,
        "size": o.size,
        "checksum": o.checksum,
        "parts": list(o.parts),
        "done": False,
        "bytes_done": 0,
        "resume": {},
    }


def _verify(ctx: LoopContext, store: ObjectStore, j: _Job, transfer: dict[str, Any]) -> None:
    """Every object of the copy against the manifest: ready when all match; else those that
    differ are copied again (up to ``staging_max_attempts`` verifications)."""
    objects = transfer["objects"]
    expected = [Copied(e["dest"], e["size"], e["checksum"]) for e in objects]
    found = [Copied(o.uri, o.size, o.checksum) for o in store.list_objects(j.region, j.dest_uri)]
    bad = set(mismatches(expected, found))
    now = ctx.now_dt()
    with ctx.store.session() as s:
        row = s.get(WeightCopy, j.id)
        if row is None or row.state != COPYING:
            return
        if not bad:
            row.state, row.ready_at, row.verified_at, row.error = READY, now, now, None
            row.bytes_done, row.updated_at = row.bytes_total, now
            row.last_used_at = row.last_used_at or now
            record_event(
                s,
                now,
                "staging.ready",
                f"{j.where}: {len(objects)} object(s) copied and verified at {j.dest_uri}; "
                "new nodes there fetch from it",
                customer=j.customer,
                model=j.model,
            )
            return
        _mark_to_copy_again(transfer, bad)
        row.transfer = transfer
        row.bytes_done = sum(e["bytes_done"] for e in objects)
        row.updated_at = now
        record_event(
            s,
            now,
            "staging.checksum_mismatch",
            f"{j.where}: {len(bad)} object(s) differ from the origin after the copy "
            f"(size or checksum), e.g. {sorted(bad)[0]}; copying them again, nodes fetch "
            "from the origin meanwhile",
            customer=j.customer,
            model=j.model,
            severity="warning",
        )
        if row.attempts >= ctx.tuning.staging_max_attempts:
            _fail(row, now, ctx, "checksum mismatch after every attempt", transfer_kept=False)
        else:
            row.attempts += 1


def _mark_to_copy_again(transfer: dict[str, Any], bad: set[str]) -> None:
    for e in transfer["objects"]:
        if e["dest"] in bad:
            e.update(done=False, bytes_done=0, resume={})


def _reverify(ctx: LoopContext, accounts: dict[tuple[str, str], AccountRow]) -> None:
    """Ready copies not looked at for ``staging_verify_every_s``: still what the manifest
    says? One that is not (an object overwritten or deleted at the store) stops serving
    nodes at once and copies what differs again."""
    due = ctx.now_dt() - timedelta(seconds=ctx.tuning.staging_verify_every_s)
    for j in _jobs(ctx, (READY,)):
        with ctx.store.session() as s:
            row = s.get(WeightCopy, j.id)
            if row is None or (row.verified_at is not None and row.verified_at > due):
                continue
        store = _store(ctx, accounts, j)
        if store is None:
            continue
        objects = j.transfer.get("objects", [])
        expected = [Copied(e["dest"], e["size"], e["checksum"]) for e in objects]
        try:
            listed = store.list_objects(j.region, j.dest_uri)
        except ProviderError as err:
            _count(ctx, accounts, j, err)
            continue
        bad = set(mismatches(expected, [Copied(o.uri, o.size, o.checksum) for o in listed]))
        now = ctx.now_dt()
        with ctx.store.session() as s:
            row = s.get(WeightCopy, j.id)
            if row is None or row.state != READY:
                continue
            row.verified_at = now
            if not bad:
                continue
            transfer = dict(j.transfer)
            _mark_to_copy_again(transfer, bad)
            row.state, row.transfer, row.updated_at = COPYING, transfer, now
            row.bytes_done = sum(e["bytes_done"] for e in transfer["objects"])
            record_event(
                s,
                now,
                "staging.corrupt",
                f"{j.where}: {len(bad)} staged object(s) no longer match the origin, e.g. "
                f"{sorted(bad)[0]}; fetching them again, nodes fetch from the origin meanwhile",
                customer=j.customer,
                model=j.model,
                severity="warning",
            )


def _save(
    ctx: LoopContext,
    j: _Job,
    *,
    state: str | None = None,
    attempts: int | None = None,
    started: bool = False,
    transfer: dict[str, Any] | None = None,
) -> None:
    with ctx.store.session() as s:
        row = s.get(WeightCopy, j.id)
        if row is None:
            return
        now = ctx.now_dt()
        if state is not None:
            row.state = state
        if attempts is not None:
            row.attempts = attempts
        if started:
            row.started_at = now
        if transfer is not None:
            row.transfer = _copy(transfer)
            row.bytes_done = sum(e["bytes_done"] for e in transfer["objects"])
            row.bytes_total = sum(e["size"] for e in transfer["objects"])
        row.updated_at = now


def _copy(transfer: dict[str, Any]) -> dict[str, Any]:
    """A fresh value, so the ORM sees the JSON column change."""
    return {"objects": [dict(e, resume=dict(e["resume"])) for e in transfer["objects"]]}


# What each failure is called in its event, and whether the copy starts over (a fresh
# manifest) when it is tried again.
def _kind(err: ProviderError) -> tuple[str, str, bool]:
    if isinstance(err, NotFound):
        return "staging.origin_missing", "an origin object is missing", True
    if isinstance(err, QuotaExceeded):
        return "staging.quota", "the bucket's quota refused the copy", False
    if isinstance(err, AuthFailed):
        return "staging.denied", "the account may not read the origin or write the bucket", False
    if isinstance(err, InvalidRequest):
        return "staging.failed", "the copy was refused (did the origin change?)", True
    return "staging.failed", "the copy failed", False


def _copy_failed(
    ctx: LoopContext, accounts: dict[tuple[str, str], AccountRow], j: _Job, err: ProviderError
) -> None:
    _count(ctx, accounts, j, err)
    now = ctx.now_dt()
    if isinstance(err, Throttled | TransientError):  # (already retried inside the provider)
        with ctx.store.session() as s:
            row = s.get(WeightCopy, j.id)
            if row is not None:
                row.error, row.updated_at = str(err)[:1000], now
        return
    kind, what, restart = _kind(err)
    with ctx.store.session() as s:
        row = s.get(WeightCopy, j.id)
        if row is None or row.state not in (PENDING, COPYING):
            return
        _fail(row, now, ctx, f"{what}: {err}", transfer_kept=not restart)
        record_event(
            s,
            now,
            kind,
            f"{j.where}: {what} ({err}); nodes there fetch from the origin; tried again "
            f"after {ctx.tuning.staging_retry_s:g} s",
            customer=j.customer,
            model=j.model,
            severity="warning",
        )


def _fail(
    row: WeightCopy, now: datetime, ctx: LoopContext, error: str, *, transfer_kept: bool
) -> None:
    row.state, row.error, row.updated_at = FAILED, error[:1000], now
    row.retry_at = now + timedelta(seconds=ctx.tuning.staging_retry_s)
    if not transfer_kept:
        row.transfer, row.bytes_done = {}, 0


def _count(
    ctx: LoopContext, accounts: dict[tuple[str, str], AccountRow], j: _Job, err: ProviderError
) -> None:
    acct = accounts.get((j.customer, j.account))
    cloud = acct.cloud if acct is not None else "?"
    ctx.telemetry.provider_errors.labels(cloud, j.account, err.kind).inc()
    log.warning("staging.provider_error", copy=j.id, where=j.where, error=str(err))


def staged_copy(
    s: Session, customer: str, model: str, account: str, region: str, now: datetime
) -> str | None:
    """Where a new node of ``model`` in (``account``, ``region``) fetches its weights: the
    ready copy in its own site (its use stamped, for LRU), else None: the origin. A copy in
    another account is not used: the node's identity reads its own account's buckets."""
    row = _row(s, CopyKey(customer, model, account, region))
    if row is None or row.state != READY:
        return None
    row.last_used_at = now
    return row.dest_uri
