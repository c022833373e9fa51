"""The audit's comparison: what the store tracks against what the clouds list with gpucap's
ownership tags, per (account, region). Pure: ``controlplane/api/audit.py`` loads the rows
and makes one ``list_nodes`` call per site, then calls :func:`audit`.

Each instance listed falls in one category, by the intent it carries (``gpucap-intent``,
the idempotency anchor):

- tracked: a row wants it (a live node, an in-flight image build) and names this instance
  or none yet (the create returned, the bookkeeping has not). A stopped warm-pool node is
  tracked: the cloud lists it ``stopped``.
- leaked: no row has its intent (``untracked``); its row has ended (terminated, failed, a
  build that is over: ``released``) or asked for its termination (``terminating``) more
  than the grace ago; its row lives in another site or names another instance (``stray``).
- duplicated: two or more instances carry one intent (one finding lists them all).
- settling: an ended row's instance still there within the grace (clouds take minutes to
  let go, and their listings lag).

Each row the store tracks as live whose instance no listing shows is ``lost``, unless the
cloud accepted it less than the grace ago (a listing may not show it yet) or it is mid-
create (no provider call returned: it may have no instance yet); those are settling too.

Races with the loop: the caller lists the clouds *before* reading the store, and every
intent is written before its create, so an instance listed always has its row when the
store is read; a row created after the listing is within the grace. A site whose list call
failed is reported with its error and compares nothing (its rows are not lost)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from providers.base import TAG_CUSTOMER, CloudNode, InstanceStatus
from schema.types import NodeState

DEFAULT_GRACE_S = 600.0  # EC2's listings lag minutes behind a launch; GPU shutdowns take minutes


class Category(StrEnum):
    LEAKED = "leaked"
    LOST = "lost"
    DUPLICATED = "duplicated"


class Reason(StrEnum):
    UNTRACKED = "untracked"
    RELEASED = "released"
    TERMINATING = "terminating"
    STRAY = "stray"
    GONE = "gone"
    DUPLICATED = "duplicated"


class Expect(StrEnum):
    """What a row says the cloud should have for its intent."""

    LIVE = "live"  # an instance, named by the row
    MAYBE = "maybe"  # mid-create (or an in-flight build's builder): one or none
    ENDING = "ending"  # terminate asked: none, once the cloud has let it go
    ENDED = "ended"  # none


NODE = "node"
BUILDER = "builder"


def node_expect(state: str, instance_id: str | None) -> Expect:
    st = NodeState(state)
    if st.is_terminal:
        return Expect.ENDED
    if st == NodeState.TERMINATING:
        return Expect.ENDING
    if st == NodeState.PENDING or instance_id is None:  # no create has returned yet
        return Expect.MAYBE
    return Expect.LIVE


def builder_expect(in_flight: bool, builder_terminated: bool) -> Expect:
    # A build's builder comes and goes with the build's own timing (the image job times a
    # build out when its builder vanishes), so an in-flight build never calls one lost.
    return Expect.MAYBE if in_flight and not builder_terminated else Expect.ENDED


@dataclass(frozen=True)
class Intent:
    """One row that may have an instance: a node, or an image build's builder."""

    id: str
    kind: str  # NODE | BUILDER
    customer: str
    cloud: str
    account: str
    region: str
    state: str  # the row's own state (NodeState, or the build's)
    instance_id: str | None
    expect: Expect
    recorded_at: float  # the intent written (epoch s)
    since: float  # it entered ``state``
    accepted_at: float | None = None  # the cloud accepted the create (None: not yet)


@dataclass(frozen=True)
class Site:
    """Where one list call looks: one account in one region. ``customers``: whose rows
    belong here (a shared account's: every customer using it; a customer's own: that one)."""

    cloud: str
    account: str
    region: str
    owner: str
    customers: frozenset[str]
    customer: str = ""  # the customer tag the listing filtered on ("": every customer's)


@dataclass(frozen=True)
class Listing:
    site: Site
    nodes: tuple[CloudNode, ...] = ()
    error: str | None = None  # the list call failed: nothing of this site is compared


@dataclass(frozen=True)
class Finding:
    category: Category
    reason: Reason
    customer: str
    site: Site
    intent: Intent | None  # the row (None: no row has the intent)
    intent_id: str  # "" when the instance carries none
    instances: tuple[CloudNode, ...]  # what the cloud has for it (none when lost)
    detail: str
    age_s: float | None  # since the intent was recorded (None: no row)
    state_age_s: float | None  # in the row's state


@dataclass(frozen=True)
class SiteReport:
    site: Site
    error: str | None
    tracked: int = 0
    in_cloud: int = 0
    stopped: int = 0
    settling: int = 0
    findings: tuple[Finding, ...] = ()

    def count(self, category: Category) -> int:
        return sum(1 for f in self.findings if f.category == category)


@dataclass(frozen=True)
class AuditReport:
    sites: tuple[SiteReport, ...]
    grace_s: float
    at: float
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not any(s.findings or s.error is not None for s in self.sites)


_STOPPED = (InstanceStatus.STOPPED, InstanceStatus.STOPPING)


def audit(
    listings: Sequence[Listing], intents: Iterable[Intent], now: float, grace_s: float
) -> AuditReport:
    """Compare each listing with the rows of its site (``intents``: every row that is not
    terminal, and the terminal ones whose intent some listing carries)."""
    by_id = {i.id: i for i in intents}
    by_site: dict[tuple[str, str, str], list[Intent]] = defaultdict(list)
    for i in by_id.values():
        by_site[(i.cloud, i.account, i.region)].append(i)
    reports = []
    for listing in sorted(listings, key=_site_key):
        if listing.error is not None:
            reports.append(SiteReport(listing.site, listing.error))
            continue
        mine = [
            i for i in by_site.get(_where(listing.site), []) if i.customer in listing.site.customers
        ]
        reports.append(_compare(listing, mine, by_id, now, grace_s))
    totals: Counter[str] = Counter()
    for r in reports:
        totals.update(
            tracked=r.tracked, in_cloud=r.in_cloud, stopped=r.stopped, settling=r.settling
        )
        totals.update(str(f.category) for f in r.findings)
        totals["unreachable"] += r.error is not None
    keys = ("tracked", "in_cloud", "stopped", "settling", *Category, "unreachable")
    return AuditReport(tuple(reports), grace_s, now, {str(k): totals[str(k)] for k in keys})


def _where(site: Site) -> tuple[str, str, str]:
    return (site.cloud, site.account, site.region)


def _site_key(listing: Listing) -> tuple[str, ...]:
    s = listing.site
    return (s.cloud, s.account, s.region, s.customer)


def _compare(
    listing: Listing, mine: list[Intent], by_id: dict[str, Intent], now: float, grace_s: float
) -> SiteReport:
    site = listing.site
    live = [n for n in listing.nodes if n.status != InstanceStatus.TERMINATED]
    carrying: dict[str, list[CloudNode]] = defaultdict(list)
    for n in live:
        carrying[n.intent_id].append(n)
    findings: list[Finding] = []
    tracked = stopped = settling = 0

    def find(
        cat: Category,
        why: Reason,
        row: Intent | None,
        nodes: Sequence[CloudNode],
        detail: str,
        intent_id: str,
    ) -> None:
        customer = row.customer if row else (nodes[0].tags.get(TAG_CUSTOMER, "") if nodes else "")
        findings.append(
            Finding(
                cat,
                why,
                customer,
                site,
                row,
                intent_id,
                tuple(nodes),
                detail,
                None if row is None else now - row.recorded_at,
                None if row is None else now - row.since,
            )
        )

    for intent_id, nodes in sorted(carrying.items()):
        row = by_id.get(intent_id) if intent_id else None
        if not intent_id:
            for n in nodes:  # our tags but no intent: nothing can ever track it
                find(Category.LEAKED, Reason.UNTRACKED, None, [n], "carries no intent tag", "")
            continue
        if len(nodes) > 1:
            ids = ", ".join(n.instance_id for n in nodes)
            find(
                Category.DUPLICATED,
                Reason.DUPLICATED,
                row,
                nodes,
                f"{len(nodes)} instances carry intent {intent_id}: {ids}",
                intent_id,
            )
            continue
        [n] = nodes
        if row is None:
            find(Category.LEAKED, Reason.UNTRACKED, None, nodes, "no row has its intent", intent_id)
        elif _where(site) != (row.cloud, row.account, row.region) or (
            row.customer not in site.customers
        ):
            find(
                Category.LEAKED,
                Reason.STRAY,
                row,
                nodes,
                f"its {row.kind} row is in {row.cloud}/{row.account}/{row.region} ({row.customer})",
                intent_id,
            )
        elif row.expect in (Expect.LIVE, Expect.MAYBE):
            if row.instance_id and row.instance_id != n.instance_id:
                find(
                    Category.LEAKED,
                    Reason.STRAY,
                    row,
                    nodes,
                    f"its {row.kind} row names instance {row.instance_id}",
                    intent_id,
                )
            else:
                tracked += 1
                stopped += n.status in _STOPPED
        elif now - row.since < grace_s:
            settling += 1  # the cloud is letting it go, or its listing has not caught up
        else:
            ending = row.expect == Expect.ENDING
            find(
                Category.LEAKED,
                Reason.TERMINATING if ending else Reason.RELEASED,
                row,
                nodes,
                f"its {row.kind} row is {row.state} since {now - row.since:.0f} s "
                f"(grace {grace_s:.0f} s) and the instance is {n.status.value}",
                intent_id,
            )

    for row in sorted(mine, key=lambda i: i.id):
        if row.id in carrying:
            continue
        if row.expect == Expect.MAYBE:
            settling += 1
        elif row.expect == Expect.LIVE:
            seen_from = row.accepted_at if row.accepted_at is not None else row.recorded_at
            if now - seen_from < grace_s:
                settling += 1
            else:
                find(
                    Category.LOST,
                    Reason.GONE,
                    row,
                    (),
                    f"{row.kind} {row.state}, instance {row.instance_id} is not in the "
                    "cloud's listing",
                    row.id,
                )
    order = {c: k for k, c in enumerate(Category)}
    findings.sort(
        key=lambda f: (order[f.category], f.intent_id, [n.instance_id for n in f.instances])
    )
    return SiteReport(site, None, tracked, len(live), stopped, settling, tuple(findings))
