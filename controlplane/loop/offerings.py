"""The offerings job: ask each account's cloud what it offers (``Provider.list_offerings``)
in the regions its policy allows. Each pool learns the zones that offer its instance type,
and the cloud's own "not available" answers enter the unavailable-offerings cache until the
next refresh is due (``controlplane.availability``)."""

from __future__ import annotations

from sqlalchemy import delete, select

from controlplane.availability import FROM_CLOUD, offerings_to_entries
from controlplane.loop.context import LoopContext
from controlplane.store.models import Account, Pool, UnavailableOffering
from controlplane.store.transitions import record_unavailable
from providers.base import Offering
from providers.errors import ProviderError


def refresh_offerings(ctx: LoopContext) -> int:
    """Returns the number of accounts whose offerings were read."""
    with ctx.store.session() as s:
        accounts = [
            (a.customer, a, list((a.regions or {}).get("regions", [])))
            for a in s.scalars(select(Account))
        ]
    read = 0
    for customer, acct, regions in accounts:
        if not regions:
            continue
        try:
            offered = ctx.providers.provider(customer, acct).list_offerings(regions)
        except ProviderError as err:
            ctx.telemetry.provider_errors.labels(acct.cloud, acct.name, err.kind).inc()
            continue  # what was known stays until its entries expire
        ctx.telemetry.provider_calls.labels(acct.cloud, "list_offerings").inc()
        _record(ctx, customer, acct.name, offered)
        read += 1
    return read


def _record(ctx: LoopContext, customer: str, account: str, offered: list[Offering]) -> None:
    now = ctx.now()
    # An answer lasts until the refresh after next is due: one missed refresh (a cloud API
    # briefly down) does not reopen what it said was unavailable.
    ttl = 2 * ctx.tuning.offerings_every_s
    zones: dict[tuple[str, str], set[str]] = {}
    for o in offered:
        zones.setdefault((o.region, o.instance_type), set()).add(o.zone)
    with ctx.store.session() as s:
        for p in s.scalars(select(Pool).where(Pool.customer == customer, Pool.account == account)):
            known = zones.get((p.region, p.instance_type))
            p.zones = {"zones": sorted(known)} if known else p.zones
        # The cloud's answers replace its earlier ones; errors' blocks stand until they expire.
        s.execute(
            delete(UnavailableOffering).where(
                UnavailableOffering.customer == customer,
                UnavailableOffering.account == account,
                UnavailableOffering.source == FROM_CLOUD,
            )
        )
        rows = [(o.region, o.zone, o.instance_type, o.available, o.reason) for o in offered]
        for e in offerings_to_entries(account, rows, now, ttl):
            record_unavailable(s, customer, e)
