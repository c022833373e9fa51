"""Weight pre-staging: which object stores should hold a copy of which model's weights.
Pure: no clock reads, no I/O; the staging job (``controlplane/loop/staging.py``) gathers the
input and applies the plan.

A *site* is one account's staging bucket in one region (``schema.policy.AccountStaging``):
copies of a customer's weights live in the account its replicas run in (the customer's own
when they run there), and only within one cloud (a server-side copy cannot cross clouds, so
a site is served from its cloud's origin, ``Weights.origin_for``).

What a model wants staged, in order (the earlier wins a site's budget):

1. the sites where its replicas run now;
2. the next ``regions_ahead`` sites placement would pick for it (``ahead``: its allowed
   pools, overflow included, in placement's order), that do not already run it.

Each site holds at most its budget of bytes. Wanted copies are ranked: running before
ahead, then the model's priority, then placement's order, then the name (deterministic).
Copies nobody wants any more but that the policy still allows stay as a cache while there
is room, the most recently used first; the least recently used are evicted to make room.
A copy whose model, staging or site is gone is evicted at once. Every site's storage cost
is counted from the bytes the plan keeps there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

GB = 10**9
SECONDS_PER_MONTH = 30 * 86400


@dataclass(frozen=True, order=True)
class SiteKey:
    customer: str
    account: str
    region: str


@dataclass(frozen=True, order=True)
class CopyKey:
    customer: str
    model: str
    account: str
    region: str

    @property
    def site(self) -> SiteKey:
        return SiteKey(self.customer, self.account, self.region)


@dataclass(frozen=True)
class Site:
    key: SiteKey
    cloud: str
    prefix_uri: str  # where copies go: "<prefix_uri><customer>/<model>/..."
    budget_bytes: int
    usd_per_gb_month: float


@dataclass(frozen=True)
class Need:
    """One model whose policy enables staging."""

    customer: str
    model: str
    priority: int
    size_bytes: int
    origins: Mapping[str, str]  # cloud -> origin URI of the weights in that cloud
    running: tuple[SiteKey, ...]  # sites with live replicas of the model
    ahead: tuple[SiteKey, ...]  # sites placement may use next, best first
    regions_ahead: int


@dataclass(frozen=True)
class Held:
    """A copy the store has (in any state but evicted)."""

    key: CopyKey
    state: str  # pending | copying | ready | failed | evicting
    size_bytes: int
    last_used: float  # when a node last booted from it or a replica ran beside it
    retry_at: float | None = None  # failed: not started again before this


@dataclass(frozen=True)
class Start:
    key: CopyKey
    source_uri: str
    dest_uri: str
    size_bytes: int
    reason: str


@dataclass(frozen=True)
class Evict:
    key: CopyKey
    reason: str


@dataclass(frozen=True)
class StagingPlan:
    start: tuple[Start, ...] = ()
    evict: tuple[Evict, ...] = ()
    keep: tuple[CopyKey, ...] = ()  # held copies that stay (wanted or cached)
    skipped: tuple[tuple[CopyKey, str], ...] = ()  # wanted, not staged, and why
    usd_per_month: Mapping[SiteKey, float] = field(default_factory=dict)  # kept + started
    bytes_used: Mapping[SiteKey, int] = field(default_factory=dict)


def dest_uri(site: Site, customer: str, model: str, source_uri: str) -> str:
    """Where a copy of ``source_uri`` goes at ``site``: a prefix for a prefix origin, one
    object (the origin's last name) for an object origin."""
    base = f"{site.prefix_uri}{customer}/{model}/"
    if source_uri.endswith("/"):
        return base
    return base + source_uri.rstrip("/").rsplit("/", 1)[-1]


def storage_usd_per_month(size_bytes: int, usd_per_gb_month: float) -> float:
    return size_bytes / GB * usd_per_gb_month


@dataclass(frozen=True)
class _Want:
    rank: tuple[int, int, int, str]
    key: CopyKey
    need: Need
    why: str


def plan(
    needs: Sequence[Need], held: Sequence[Held], sites: Sequence[Site], now: float
) -> StagingPlan:
    site_of = {s.key: s for s in sites}
    held_of = {h.key: h for h in held if h.state != "evicting"}
    leaving = {h.key for h in held if h.state == "evicting"}
    wants: dict[SiteKey, list[_Want]] = {}
    skipped: list[tuple[CopyKey, str]] = []
    allowed: set[CopyKey] = set()  # where a copy may stay as a cache
    for need in needs:
        ahead = [k for k in need.ahead if k not in need.running]
        for k in (*need.running, *need.ahead):
            allowed.add(CopyKey(need.customer, need.model, k.account, k.region))
        chosen = [(0, i, k, "replicas run here") for i, k in enumerate(need.running)]
        taken = 0
        for i, k in enumerate(ahead):
            if taken >= need.regions_ahead:
                break
            site = site_of.get(k)
            if site is None or site.cloud not in need.origins:
                continue  # not a site, or no origin in its cloud: look further ahead
            chosen.append((1, i, k, f"placement's choice #{i + 1} ahead"))
            taken += 1
        for cls, i, k, why in chosen:
            key = CopyKey(need.customer, need.model, k.account, k.region)
            site = site_of.get(k)
            if site is None:
                continue  # the account keeps no staged weights: nodes use the origin
            if site.cloud not in need.origins:
                skipped.append((key, f"no {site.cloud} origin (a copy cannot cross clouds)"))
                continue
            if key in leaving:
                skipped.append((key, "its old copy is being evicted"))
                continue
            rank = (cls, -need.priority, i, need.model)
            wants.setdefault(k, []).append(_Want(rank, key, need, why))

    start: list[Start] = []
    evict: list[Evict] = []
    keep: list[CopyKey] = []
    cost: dict[SiteKey, float] = {}
    used_of: dict[SiteKey, int] = {}
    wanted_keys = {w.key for ws in wants.values() for w in ws}
    for h in held:
        if h.state == "evicting":
            continue
        if h.key.site not in site_of or h.key not in allowed:
            evict.append(Evict(h.key, "no longer wanted: model, staging or site gone"))
    for sk in sorted(set(site_of) | {h.key.site for h in held_of.values()}):
        site = site_of.get(sk)
        if site is None:
            continue
        used = 0
        for w in sorted(wants.get(sk, []), key=lambda w: (w.rank, w.key)):
            found = held_of.get(w.key)
            size = found.size_bytes if found is not None and found.size_bytes else w.need.size_bytes
            if used + size > site.budget_bytes:
                reason = (
                    f"over the site's budget ({site.budget_bytes / GB:g} GB; "
                    f"{used / GB:g} GB taken by copies ranked before)"
                )
                if found is not None:
                    evict.append(Evict(w.key, reason))
                else:
                    skipped.append((w.key, reason))
                continue
            used += size
            if found is None:
                source = w.need.origins[site.cloud]
                dest = dest_uri(site, w.key.customer, w.key.model, source)
                start.append(Start(w.key, source, dest, size, w.why))
            elif found.state == "failed" and (found.retry_at is None or found.retry_at <= now):
                source = w.need.origins[site.cloud]
                dest = dest_uri(site, w.key.customer, w.key.model, source)
                start.append(Start(w.key, source, dest, size, f"retry: {w.why}"))
            else:
                keep.append(w.key)
        # The cache: allowed copies nobody wants now, most recently used first.
        cached = [
            h
            for h in held_of.values()
            if h.key.site == sk and h.key in allowed and h.key not in wanted_keys
        ]
        for h in sorted(cached, key=lambda h: (-h.last_used, h.key)):
            if h.state == "failed":
                continue  # a failed copy nobody wants is not retried
            if used + h.size_bytes > site.budget_bytes:
                evict.append(Evict(h.key, "least recently used: room for wanted copies"))
                continue
            used += h.size_bytes
            keep.append(h.key)
        used_of[sk] = used
        cost[sk] = storage_usd_per_month(used, site.usd_per_gb_month)
    return StagingPlan(
        start=tuple(start),
        evict=tuple(evict),
        keep=tuple(keep),
        skipped=tuple(skipped),
        usd_per_month=cost,
        bytes_used=used_of,
    )


@dataclass(frozen=True)
class Active:
    """A copy in progress, as the bandwidth limit sees it."""

    key: CopyKey
    started: float  # when it was started (the oldest goes first)


def admit(active: Sequence[Active], max_concurrent: int, bytes_per_tick: int) -> dict[CopyKey, int]:
    """Which copies in progress advance this tick, and by at most how many bytes: per
    site, the ``max_concurrent`` oldest, sharing the site's ``bytes_per_tick`` (each gets
    at least one byte: a step always moves at least one part or chunk)."""
    by_site: dict[SiteKey, list[Active]] = {}
    for a in active:
        by_site.setdefault(a.key.site, []).append(a)
    out: dict[CopyKey, int] = {}
    for items in by_site.values():
        chosen = sorted(items, key=lambda a: (a.started, a.key))[: max(1, max_concurrent)]
        share = max(1, bytes_per_tick // len(chosen))
        for a in chosen:
            out[a.key] = share
    return out


@dataclass(frozen=True)
class Copied:
    """One object of a copy, as the manifest or the destination store describes it."""

    uri: str  # the destination's URI
    size: int
    checksum: str


def mismatches(expected: Sequence[Copied], found: Sequence[Copied]) -> list[str]:
    """The destination URIs whose object is missing, or differs from its origin in size or
    checksum (the store's own, ``providers.base.StoredObject.checksum``): what a copy must
    fetch again before nodes may use it."""
    there = {f.uri: f for f in found}
    bad = []
    for e in expected:
        f = there.get(e.uri)
        if f is None or f.size != e.size or f.checksum != e.checksum:
            bad.append(e.uri)
    return bad
