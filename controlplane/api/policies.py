"""Policies: validate, apply (with the syncs a new version implies) and read them back."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from controlplane.api.errors import NotFoundError
from controlplane.api.fit import unfit_models
from controlplane.api.rows import api_models, resolve_customer
from controlplane.api.sync import account_names, sync_accounts, sync_policy_models, sync_pools
from controlplane.api.tx import Tx
from controlplane.api.views import AppliedPolicy, PolicyView
from controlplane.store.events import record_event
from controlplane.store.models import Customer, PolicyVersion
from providers.credentials import ExternalIdGenerator
from schema.policy import Policy
from schema.policy_file import LoadedPolicy, parse_policy


class Policies:
    def __init__(self, tx: Tx, external_ids: ExternalIdGenerator | None = None) -> None:
        self._tx = tx
        self._external_ids = external_ids

    def validate(self, text: str, source: str = "<policy>") -> LoadedPolicy:
        """Parse and validate without touching the store; raise PolicyError on problems."""
        return parse_policy(text, source=source or "<policy>")

    def apply(self, text: str, source: str, applied_by: str) -> PolicyVersion:
        return self.apply_result(text, source, applied_by).version

    def apply_result(self, text: str, source: str, applied_by: str) -> AppliedPolicy:
        """Validate, then in one transaction: upsert the customer, record a new policy
        version (unless identical to the active one), make it active, and sync accounts,
        pools and policy-managed models. A bad policy raises PolicyError and changes nothing.
        """
        loaded = parse_policy(text, source=source or "<policy>")
        policy = loaded.policy

        def do(s: Session) -> AppliedPolicy:
            now = self._tx.clock()
            cust = s.get(Customer, policy.customer)
            if cust is None:
                cust = Customer(name=policy.customer, created_at=now)
                s.add(cust)
                s.flush()
                record_event(
                    s,
                    now,
                    "customer.created",
                    f"customer {policy.customer} created",
                    customer=policy.customer,
                )
            active = s.get(PolicyVersion, cust.active_policy_id) if cust.active_policy_id else None
            if active is not None and active.sha256 == loaded.sha256:
                return AppliedPolicy(active, changed=False)
            last = s.scalar(
                select(func.max(PolicyVersion.version)).where(
                    PolicyVersion.customer == policy.customer
                )
            )
            row = PolicyVersion(
                customer=policy.customer,
                version=(last or 0) + 1,
                raw_yaml=loaded.raw,
                sha256=loaded.sha256,
                applied_by=applied_by or "unknown",
                applied_at=now,
                source=source or "",
            )
            s.add(row)
            s.flush()
            cust.active_policy_id = row.id
            sync_accounts(s, policy, account_names(active), self._external_ids, now)
            sync_policy_models(s, policy, now)
            sync_pools(s, policy, now)
            _warn_unfit_api_models(s, policy, now)
            record_event(
                s,
                now,
                "policy.applied",
                f"policy v{row.version} of {policy.customer} applied by {row.applied_by} "
                f"(sha256 {loaded.sha256[:12]}, {len(policy.models)} models, "
                f"{len(policy.accounts)} accounts)",
                customer=policy.customer,
            )
            return AppliedPolicy(row, changed=True)

        return self._tx.write(do)

    def get(self, customer: str | None = None, version: int | None = None) -> PolicyView:
        with self._tx.store.session() as s:
            cust = resolve_customer(s, customer)
            if version is None:
                if cust.active_policy_id is None:
                    raise NotFoundError("policy of customer", cust.name)
                row = s.get(PolicyVersion, cust.active_policy_id)
            else:
                row = s.scalar(
                    select(PolicyVersion).where(
                        PolicyVersion.customer == cust.name, PolicyVersion.version == version
                    )
                )
            if row is None:
                raise NotFoundError("policy version", f"{cust.name} v{version}")
            return PolicyView(row, active=row.id == cust.active_policy_id)


def _warn_unfit_api_models(s: Session, policy: Policy, now: datetime) -> None:
    """A new policy may no longer allow what an API-deployed model asks for (e.g. its cloud's
    account was removed). The policy still wins: pools only ever come from the policy's
    accounts, so such a model cannot be placed outside it; on-call gets a warning event."""
    for model, why in unfit_models(policy, api_models(s, policy.customer)):
        record_event(
            s,
            now,
            "model.unfit",
            f"API-deployed model {model.name} does not fit the new policy: {why}",
            customer=policy.customer,
            model=model.name,
            severity="warning",
        )
