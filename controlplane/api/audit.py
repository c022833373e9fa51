"""``Audit``: what the store tracks against what each cloud lists with gpucap's ownership
tags (``controlplane.audit`` compares). The one read of the API that calls clouds: one
``list_nodes`` per (account, region), never per node, through the provider resolver the
control loop uses (the daemon hands the service its own). Read-only.

Sites: every account the applied policies hold (a dropped account is kept while nodes may
run there, ``api.sync``), in each region of the account and each region where the store
still has a live node or build of it. A shared account is listed once for all its
customers, by ``gpucap-managed`` alone, so an instance of a customer the store no longer
knows is found too; a customer's own account, and any account under ``--customer``, with
that customer's tag as well (the gc job's rule).

The clouds are listed first and the store read after: every intent is written before its
create, so whatever a listing shows already has its row (see ``controlplane.audit``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from coldstart.images import BuildState
from controlplane.api.errors import FailedPreconditionError, NotFoundError
from controlplane.audit import (
    BUILDER,
    DEFAULT_GRACE_S,
    NODE,
    AuditReport,
    Intent,
    Listing,
    Site,
    audit,
    builder_expect,
    node_expect,
)
from controlplane.loop.context import ProviderResolver
from controlplane.store.db import Store
from controlplane.store.models import Account, Customer, MachineImage, Node
from providers.base import ownership_filter
from providers.errors import ProviderError
from schema.types import TERMINAL_NODE_STATES, Owner

_TERMINAL = [s.value for s in TERMINAL_NODE_STATES]
_IN_FLIGHT = [s.value for s in BuildState if s.in_flight]
_CHUNK = 500  # ids per IN (...) list: well under every backend's bound-parameter limit
MAX_PARALLEL = 8  # list calls at once (each waits on a cloud API)


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _since(row: Node) -> datetime:
    """When the node entered its state (its state's own timestamp, else its intent's)."""
    at: datetime | None = getattr(row, f"{row.state}_at", None)
    return at or row.pending_at


class Audit:
    def __init__(
        self,
        store: Store,
        clock: Callable[[], datetime],
        providers: ProviderResolver | None,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        self._store = store
        self._clock = clock
        self._providers = providers
        self.grace_s = grace_s

    def run(self, account: str | None = None, customer: str | None = None) -> AuditReport:
        if self._providers is None:
            raise FailedPreconditionError(
                "this server has no provider access (the audit lists the clouds through "
                "the daemon's provider resolver)"
            )
        with self._store.session() as s:
            if customer and s.get(Customer, customer) is None:
                raise NotFoundError("customer", customer)
            accounts = list(s.scalars(_accounts(account, customer)))
            if account and not accounts:
                raise NotFoundError("account", f"{customer}/{account}" if customer else account)
            lingering = _live_regions(s)
            for a in accounts:
                s.expunge(a)
        plans = _sites(accounts, lingering, customer)
        listings = self._list(plans)
        now = self._clock()
        listed = {n.intent_id for lst in listings for n in lst.nodes if n.intent_id}
        with self._store.session() as s:
            intents = _intents(s, account, customer, listed)
        return audit(listings, intents, now.timestamp(), self.grace_s)

    def _list(self, plans: Sequence[tuple[Site, Account]]) -> list[Listing]:
        resolver = self._providers
        assert resolver is not None

        def one(plan: tuple[Site, Account]) -> Listing:
            site, acct = plan
            tags = ownership_filter(site.customer)
            try:
                provider = resolver.provider(acct.customer, acct)
                return Listing(site, tuple(provider.list_nodes(site.region, tags)))
            except ProviderError as err:
                return Listing(site, error=f"{err.kind}: {err}")

        if not plans:
            return []
        with ThreadPoolExecutor(min(MAX_PARALLEL, len(plans))) as pool:
            return list(pool.map(one, plans))


def _accounts(account: str | None, customer: str | None) -> Select[Account]:
    q = select(Account).order_by(Account.customer, Account.name)
    if account:
        q = q.where(Account.name == account)
    if customer:
        q = q.where(Account.customer == customer)
    return q


def _live_regions(s: Session) -> dict[tuple[str, str], set[str]]:
    """(customer, account) -> the regions where a live node or in-flight build is, so a
    region the policy dropped is still looked at while something may run there."""
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    nodes = select(Node.customer, Node.account, Node.region).where(Node.state.not_in(_TERMINAL))
    builds = select(MachineImage.customer, MachineImage.account, MachineImage.region).where(
        MachineImage.state.in_(_IN_FLIGHT)
    )
    for q in (nodes, builds):
        for c, a, r in s.execute(q.distinct()):
            out[(c, a)].add(r)
    return out


def _sites(
    accounts: Iterable[Account],
    lingering: dict[tuple[str, str], set[str]],
    customer: str | None,
) -> list[tuple[Site, Account]]:
    """One list call per site, with the account row whose credentials make it."""
    customers: dict[tuple[str, str, str, str], set[str]] = defaultdict(set)
    first: dict[tuple[str, str, str, str], Account] = {}
    for a in accounts:
        regions = set((a.regions or {}).get("regions", [])) | lingering.get(
            (a.customer, a.name), set()
        )
        # A shared account is gpucap's: listed once for every customer using it.
        tag = "" if a.owner == Owner.SHARED and not customer else a.customer
        for region in regions:
            key = (a.cloud, a.name, region, tag)
            customers[key].add(a.customer)
            first.setdefault(key, a)
    return [
        (Site(cloud, name, region, first[k].owner, frozenset(customers[k]), tag), first[k])
        for k in sorted(customers)
        for cloud, name, region, tag in [k]
    ]


def _intents(
    s: Session, account: str | None, customer: str | None, listed: set[str]
) -> list[Intent]:
    """Every live node and in-flight build (of the filters), and every row, ended ones
    included, whose intent a listing carries."""
    live_nodes = select(Node).where(Node.state.not_in(_TERMINAL))
    live_builds = select(MachineImage).where(MachineImage.state.in_(_IN_FLIGHT))
    if account:
        live_nodes = live_nodes.where(Node.account == account)
        live_builds = live_builds.where(MachineImage.account == account)
    if customer:
        live_nodes = live_nodes.where(Node.customer == customer)
        live_builds = live_builds.where(MachineImage.customer == customer)
    nodes = {n.id: n for n in s.scalars(live_nodes)}
    builds = {b.id: b for b in s.scalars(live_builds)}
    ids = sorted(listed)
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        nodes.update((n.id, n) for n in s.scalars(select(Node).where(Node.id.in_(chunk))))
        builds.update(
            (b.id, b) for b in s.scalars(select(MachineImage).where(MachineImage.id.in_(chunk)))
        )
    out = [_node_intent(n) for n in nodes.values()]
    out.extend(_build_intent(b) for b in builds.values() if b.id not in nodes)
    return out


def _node_intent(n: Node) -> Intent:
    return Intent(
        id=n.id,
        kind=NODE,
        customer=n.customer,
        cloud=n.cloud,
        account=n.account,
        region=n.region,
        state=n.state,
        instance_id=n.instance_id,
        expect=node_expect(n.state, n.instance_id),
        recorded_at=n.pending_at.timestamp(),
        since=_since(n).timestamp(),
        accepted_at=_epoch(n.provisioning_at),
    )


def _build_intent(b: MachineImage) -> Intent:
    in_flight = BuildState(b.state).in_flight
    return Intent(
        id=b.id,
        kind=BUILDER,
        customer=b.customer,
        cloud=b.cloud,
        account=b.account,
        region=b.region,
        state=b.state,
        instance_id=b.builder_instance_id,
        expect=builder_expect(in_flight, b.builder_terminated_at is not None),
        recorded_at=b.created_at.timestamp(),
        since=(b.builder_terminated_at or b.state_at).timestamp(),
    )
