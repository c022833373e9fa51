"""The store writes a policy implies, inside the apply (or model change) transaction:
accounts, policy-managed models and pools follow the policy."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from controlplane.api.rows import api_models
from controlplane.pools import pools_for_policy
from controlplane.store.events import record_event
from controlplane.store.models import Account, PolicyVersion, Pool
from controlplane.store.models import Model as ModelRow
from providers.credentials import ExternalIdGenerator
from schema.policy import Model as ModelSpec
from schema.policy import Policy
from schema.policy_file import PolicyError, parse_policy
from schema.types import Owner


def sync_accounts(
    s: Session,
    policy: Policy,
    previously_allowed: set[str],
    external_ids: ExternalIdGenerator | None,
    now: datetime,
) -> None:
    """Upsert the policy's accounts. An account the policy drops is *kept* (with its last
    credentials reference): nodes may still run there, and the reconciler needs it to drain
    and terminate them and the garbage collector to find orphans. Placement never reads
    accounts, only active pools, so a kept account gets no new replicas."""
    existing = {
        a.name: a for a in s.scalars(select(Account).where(Account.customer == policy.customer))
    }
    for acct in policy.accounts:
        row = existing.pop(acct.name, None)
        if row is None:
            row = Account(customer=policy.customer, name=acct.name)
            s.add(row)
        row.cloud, row.owner = acct.cloud.value, acct.owner.value
        row.regions = {"regions": list(acct.regions)}
        row.credentials_ref = acct.credentials.model_dump(mode="json", exclude_none=True)
        if external_ids is not None and acct.cloud == "aws" and acct.owner == Owner.CUSTOMER:
            # A copy for display (`gpucap account ...`); the generator is the authority and
            # never takes the id from the customer's file (providers/credentials.py).
            row.external_id = external_ids.for_customer(policy.customer)
    for row in existing.values():
        if row.name not in previously_allowed:
            continue  # dropped by an earlier version; already announced
        record_event(
            s,
            now,
            "account.removed",
            f"account {row.name} ({row.cloud}) is no longer in the policy of "
            f"{policy.customer}: no new replicas there; its nodes drain",
            customer=policy.customer,
            severity="warning",
        )


def account_names(version: PolicyVersion | None) -> set[str]:
    """Account names of a stored policy version (empty when none, or when it no longer
    parses under today's rules: then nothing is announced as removed)."""
    if version is None:
        return set()
    try:
        return {a.name for a in parse_policy(version.raw_yaml).policy.accounts}
    except PolicyError:
        return set()


def sync_policy_models(s: Session, policy: Policy, now: datetime) -> None:
    rows = {
        r.name: r for r in s.scalars(select(ModelRow).where(ModelRow.customer == policy.customer))
    }
    for m in policy.models:
        spec = m.model_dump(mode="json")
        row = rows.pop(m.name, None)
        if row is None:
            s.add(
                ModelRow(
                    customer=policy.customer,
                    name=m.name,
                    spec=spec,
                    source="policy",
                    created_at=now,
                    updated_at=now,
                )
            )
            record_event(
                s,
                now,
                "model.deployed",
                f"model {m.name} deployed by the policy",
                customer=policy.customer,
                model=m.name,
            )
        elif row.spec != spec or row.source != "policy" or row.deleted_at is not None:
            # (a live API-owned model gets here only when adopt_models names it: the apply
            # refuses any other, controlplane.policy_diff)
            was = (
                " (was deleted)"
                if row.deleted_at is not None
                else f" (was owned by {row.source})"
                if row.source != "policy"
                else ""
            )
            row.spec, row.source, row.deleted_at, row.updated_at = spec, "policy", None, now
            record_event(
                s,
                now,
                "model.updated",
                f"model {m.name} updated by the policy{was}",
                customer=policy.customer,
                model=m.name,
            )
    for row in rows.values():
        if row.source == "policy" and row.deleted_at is None:
            row.deleted_at = row.updated_at = now
            record_event(
                s,
                now,
                "model.deleted",
                f"model {row.name} removed from the policy; its replicas will drain",
                customer=policy.customer,
                model=row.name,
            )
    s.flush()


def sync_pools(s: Session, policy: Policy, now: datetime) -> None:
    """Pools follow the policy's accounts and the shapes of every live model (policy- and
    API-managed). Pools no longer allowed are deactivated, never deleted: nodes may still
    run there and refer to them."""
    models = [*policy.models, *api_models(s, policy.customer)]
    _follow(s, policy, models, now, deactivate=True)


def add_model_pools(s: Session, policy: Policy, model: ModelSpec, now: datetime) -> None:
    """The pools a newly deployed model needs, added (or made active again) beside the
    customer's others: a new model takes no pool away, so this reads only its own shapes
    and a deploy does not re-derive the pools of every model."""
    _follow(s, policy, [model], now, deactivate=False)


def _follow(
    s: Session, policy: Policy, models: list[ModelSpec], now: datetime, *, deactivate: bool
) -> None:
    specs = {p.id: p for p in pools_for_policy(policy.model_copy(update={"models": models}))}
    rows = {p.id: p for p in s.scalars(select(Pool).where(Pool.customer == policy.customer))}
    added, removed = [], []
    for pid, spec in specs.items():
        row = rows.get(pid)
        if row is None:
            row = Pool(id=pid, customer=spec.customer)
            s.add(row)
            added.append(pid)
        elif not row.active:
            added.append(pid)
        row.account, row.cloud, row.owner = spec.account, spec.cloud.value, spec.owner.value
        row.region, row.instance_type, row.gpu_shape = (
            spec.region,
            spec.instance_type,
            spec.gpu_shape,
        )
        row.tier, row.committed, row.reservation = spec.tier.value, spec.committed, spec.reservation
        row.price_usd_per_hour, row.active = spec.price_usd_per_hour, True
    for pid, row in rows.items():
        if deactivate and pid not in specs and row.active:
            row.active = False
            removed.append(pid)
    if added or removed:
        parts = [
            f"{len(added)} added" if added else "",
            f"{len(removed)} deactivated" if removed else "",
        ]
        record_event(
            s,
            now,
            "pools.changed",
            f"pools of {policy.customer}: "
            + ", ".join(p for p in parts if p)
            + (f" (deactivated: {', '.join(removed)})" if removed else ""),
            customer=policy.customer,
        )
    s.flush()
