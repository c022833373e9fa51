"""A clouds file (``schema.clouds_file``) as a replay's accounts and simulated clouds.

With a fleet, the clouds file is the customer's estate: one account per (owner, cloud,
region) holding its pools at their prices and commitments, shared pools as overflow. Every
other pool those accounts would have (another instance type of a shape in that region) has
no stock: the cloud's offerings say so at the first tick and placement leaves it alone.
With a policy, the policy's accounts stand; the clouds file sets only what the clouds have
(stock, quotas, stockouts, cold starts) for the pools it names, the others unlimited."""

from __future__ import annotations

from typing import Any

from controlplane.simulator.fullloop.scenario import (
    UNLIMITED,
    CloudSetup,
    Stockout,
    sim_account,
)
from schema.clouds_file import Clouds
from schema.fleet import ColdStartOverride
from schema.policy import Policy
from schema.types import Owner


def clouds_accounts(clouds: Clouds) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The policy's accounts and overflow section for a fleet's replay."""
    accounts: dict[tuple[str, str, str], dict[str, Any]] = {}
    for p in clouds.pools:
        it = p.node_type()
        assert it is not None  # (checked as the file was parsed)
        prefix = "shared-" if p.owner == Owner.SHARED else ""
        name = f"{prefix}{p.cloud.value}-{p.region}"
        acct = accounts.setdefault(
            (p.owner.value, p.cloud.value, p.region), sim_account(p.cloud, [p.region], name)
        )
        acct["owner"] = p.owner.value
        if p.price_usd_per_hour is not None:
            acct["prices"][it.name] = p.price_usd_per_hour
        if p.committed:
            acct.setdefault("committed", []).append(
                {"instance_type": it.name, "region": p.region, "count": p.committed}
            )
    shared = any(p.owner == Owner.SHARED for p in clouds.pools)
    overflow: dict[str, Any] = {"enabled": shared}
    if shared:
        overflow["max_replicas"] = clouds.overflow.max_replicas
        if clouds.overflow.max_usd_per_hour is not None:
            overflow["max_usd_per_hour"] = clouds.overflow.max_usd_per_hour
    return list(accounts.values()), overflow


def clouds_setup(clouds: Clouds, policy: Policy, *, own_accounts: bool) -> CloudSetup:
    """The simulated clouds. ``own_accounts``: the accounts are the clouds file's own
    (:func:`clouds_accounts`), so a pool it does not name has no stock."""
    capacity: dict[tuple[str, str, str], int] = {}
    quota: dict[tuple[str, str, str], int] = {}
    coldstart: dict[tuple[str, str, str], ColdStartOverride] = {}
    stockouts: list[Stockout] = []
    for p in clouds.pools:
        it = p.node_type()
        assert it is not None
        key = (p.cloud.value, p.region, it.name)
        capacity[key] = UNLIMITED if p.capacity is None else p.capacity
        if p.coldstart is not None:
            coldstart[key] = p.coldstart
        if p.quota is not None:
            for acct in _accounts_of(policy, p.cloud.value, p.region, p.owner):
                quota[(acct, p.region, it.name)] = p.quota
        stockouts.extend(
            Stockout(p.cloud, p.region, it.name, w.start_s, w.end_s, w.capacity, w.zone)
            for w in p.stockouts
        )
    return CloudSetup(
        default_capacity=0 if own_accounts else UNLIMITED,
        capacity=capacity,
        quota=quota,
        pool_coldstart=coldstart,
        stockouts=tuple(sorted(stockouts, key=lambda w: w.start_s)),
    )


def _accounts_of(policy: Policy, cloud: str, region: str, owner: Owner) -> list[str]:
    """The simulated cloud's keys of the policy's accounts on ``cloud`` in ``region``
    (``controlplane.resolvers.SimResolver``: a customer's own are keyed by customer)."""
    return [
        a.name if a.owner == Owner.SHARED else f"{policy.customer}/{a.name}"
        for a in policy.accounts
        if a.cloud.value == cloud and region in a.regions and a.owner == owner
    ]
