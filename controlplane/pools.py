"""Derive a customer's capacity pools from its policy. Pure.

A pool is one place capacity can come from: (account, region, instance type). Its tier
orders placement: commits first (already paid for), then the customer's on-demand, then
gpucap's shared capacity as overflow (BRIEF.md, "Capacity is a market")."""

from __future__ import annotations

from dataclasses import dataclass

from schema.catalog import INSTANCE_TYPES, parse_gpu_shape
from schema.policy import Policy
from schema.types import CapacityTier, Cloud, Owner


@dataclass(frozen=True)
class PoolSpec:
    id: str
    customer: str
    account: str
    cloud: Cloud
    owner: Owner
    region: str
    instance_type: str
    gpu_shape: str  # the single-node GPU shape this pool provides, e.g. "8xH100"
    tier: CapacityTier
    committed: int
    reservation: str | None
    price_usd_per_hour: float


def pool_id(customer: str, account: str, region: str, instance_type: str) -> str:
    return f"{customer}/{account}/{region}/{instance_type}"


def pools_for_policy(policy: Policy) -> list[PoolSpec]:
    """Every pool the policy allows, for the node shapes its models accept."""
    wanted = {
        (s.gpu, s.gpus) for m in policy.models for s in (parse_gpu_shape(o.shape) for o in m.shapes)
    }
    out: list[PoolSpec] = []
    for acct in policy.accounts:
        for region in acct.regions:
            for it in INSTANCE_TYPES:
                if it.cloud != acct.cloud or (it.gpu, it.gpus) not in wanted:
                    continue
                commits = [
                    c for c in acct.committed if c.instance_type == it.name and c.region == region
                ]
                committed = sum(c.count for c in commits)
                if acct.owner == Owner.SHARED:
                    tier = CapacityTier.SHARED
                elif committed:
                    tier = CapacityTier.COMMITTED
                else:
                    tier = CapacityTier.ON_DEMAND
                out.append(
                    PoolSpec(
                        id=pool_id(policy.customer, acct.name, region, it.name),
                        customer=policy.customer,
                        account=acct.name,
                        cloud=acct.cloud,
                        owner=acct.owner,
                        region=region,
                        instance_type=it.name,
                        gpu_shape=f"{it.gpus}x{it.gpu}",
                        tier=tier,
                        committed=committed,
                        reservation=next((c.reservation for c in commits if c.reservation), None),
                        price_usd_per_hour=acct.prices.get(it.name, it.list_price_usd_per_hour),
                    )
                )
    return out
