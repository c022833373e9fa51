"""Policies: validate, apply (with the syncs a new version implies) and read them back."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from controlplane.api.errors import NotFoundError
from controlplane.api.fit import unfit_models
from controlplane.api.rows import api_models, pool_node_counts, replica_counts, resolve_customer
from controlplane.api.sync import account_names, sync_accounts, sync_policy_models, sync_pools
from controlplane.api.tx import Tx
from controlplane.api.views import AppliedPolicy, PolicyView
from controlplane.policy_diff import ModelState, PolicyDiff, diff_policy
from controlplane.store.events import record_event
from controlplane.store.models import Customer, PolicyVersion, Pool
from controlplane.store.models import Model as ModelRow
from providers.credentials import ExternalIdGenerator
from schema.policy import Policy, Problem
from schema.policy_file import LoadedPolicy, PolicyError, PolicyRefused, located, parse_policy

# How a policy version was applied (``PolicyVersion.applied_via``).
VIA_FILE = "file"  # the daemon read a configured policy file (start, SIGHUP)
VIA_API = "api"  # ApplyPolicy (`gpucap policy apply`)


class Policies:
    def __init__(self, tx: Tx, external_ids: ExternalIdGenerator | None = None) -> None:
        self._tx = tx
        self._external_ids = external_ids

    def validate(self, text: str, source: str = "<policy>") -> LoadedPolicy:
        """Parse and validate without touching the store; raise PolicyError on problems."""
        return parse_policy(text, source=source or "<policy>")

    def apply(
        self, text: str, source: str, applied_by: str, *, allow_deletes: bool = False
    ) -> PolicyVersion:
        return self.apply_result(text, source, applied_by, allow_deletes=allow_deletes).version

    def apply_result(
        self,
        text: str,
        source: str,
        applied_by: str,
        *,
        allow_deletes: bool = False,
        via: str = VIA_API,
    ) -> AppliedPolicy:
        """Validate, then in one transaction: upsert the customer, record a new policy
        version (unless identical to the active one), make it active, and sync accounts,
        pools and policy-managed models. A bad policy raises PolicyError and changes nothing.

        Refused (:class:`PolicyRefused`, the active policy stays, a ``policy.refused``
        event says why) when the file names a model the API owns without adopting it, or
        deletes or drains (``controlplane.policy_diff``) unless the file says
        ``allow_deletes: true`` or the caller passes ``allow_deletes``. ``via`` ``file``
        (the daemon's reload) keeps a newer version applied through the API while the file
        is as the daemon last applied it."""
        loaded = parse_policy(text, source=source or "<policy>")
        policy = loaded.policy

        def do(s: Session) -> AppliedPolicy:
            now = self._tx.clock()
            cust = s.get(Customer, policy.customer)
            active = _active_version(s, cust)
            if active is not None and active.sha256 == loaded.sha256:
                return AppliedPolicy(active, changed=False, warnings=loaded.warnings)
            if via == VIA_FILE and active is not None and active.applied_via != VIA_FILE:
                last = _last_from_file(s, policy.customer, source)
                if last is not None and last.sha256 == loaded.sha256:
                    kept = (
                        f"policy v{active.version} of {policy.customer}, applied through the "
                        f"API by {active.applied_by}, stays active: {source} has not changed "
                        f"since the daemon applied it as v{last.version}"
                    )
                    return AppliedPolicy(active, changed=False, kept=kept, warnings=loaded.warnings)
            diff = _diff(s, policy, active, cust is None)
            refusals = diff.refusals(allow_deletes or policy.allow_deletes)
            if refusals:
                raise PolicyRefused(located(loaded.raw, loaded.source, refusals))
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
            newest = s.scalar(
                select(func.max(PolicyVersion.version)).where(
                    PolicyVersion.customer == policy.customer
                )
            )
            row = PolicyVersion(
                customer=policy.customer,
                version=(newest or 0) + 1,
                raw_yaml=loaded.raw,
                sha256=loaded.sha256,
                applied_by=applied_by or "unknown",
                applied_at=now,
                source=source or "",
                applied_via=via,
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
            return AppliedPolicy(row, changed=True, diff=diff, warnings=loaded.warnings)

        try:
            return self._tx.write(do)
        except PolicyRefused as exc:
            refused = exc  # (the name ``exc`` ends with the except block)
            self._tx.write(
                lambda s: _record_refusal(s, self._tx.clock(), policy, refused, applied_by)
            )
            raise

    def diff(
        self, text: str, source: str, *, allow_deletes: bool = False
    ) -> tuple[PolicyDiff, list[Problem]]:
        """What :meth:`apply_result` would change (``gpucap policy diff``), and the problems
        it would be refused for (empty: it would go ahead); writes nothing."""
        loaded = parse_policy(text, source=source or "<policy>")
        policy = loaded.policy
        with self._tx.store.session() as s:
            cust = s.get(Customer, policy.customer)
            active = _active_version(s, cust)
            if active is not None and active.sha256 == loaded.sha256:
                return PolicyDiff(()), []
            diff = _diff(s, policy, active, cust is None)
        refusals = diff.refusals(allow_deletes or policy.allow_deletes)
        return diff, located(loaded.raw, loaded.source, refusals)

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


def _active_version(s: Session, cust: Customer | None) -> PolicyVersion | None:
    if cust is None or cust.active_policy_id is None:
        return None
    return s.get(PolicyVersion, cust.active_policy_id)


def _last_from_file(s: Session, customer: str, source: str) -> PolicyVersion | None:
    """The latest version the daemon applied from the file ``source``."""
    return s.scalar(
        select(PolicyVersion)
        .where(
            PolicyVersion.customer == customer,
            PolicyVersion.applied_via == VIA_FILE,
            PolicyVersion.source == source,
        )
        .order_by(PolicyVersion.version.desc())
        .limit(1)
    )


def _diff(s: Session, policy: Policy, active: PolicyVersion | None, new: bool) -> PolicyDiff:
    """:func:`diff_policy` with the store's side of it: live models, active pools."""
    rows = list(
        s.scalars(
            select(ModelRow).where(
                ModelRow.customer == policy.customer, ModelRow.deleted_at.is_(None)
            )
        )
    )
    replicas = replica_counts(s, [r.id for r in rows])
    models = {
        r.name: ModelState(r.source, r.spec, sum(replicas.get(r.id, {}).values())) for r in rows
    }
    pools = list(
        s.scalars(select(Pool.id).where(Pool.customer == policy.customer, Pool.active.is_(True)))
    )
    nodes = pool_node_counts(s, pools)
    active_pools = {p: sum(nodes.get(p, {}).values()) for p in pools}
    return diff_policy(_parsed(active), policy, models, active_pools, new_customer=new)


def _parsed(version: PolicyVersion | None) -> Policy | None:
    """A stored version's policy (None when none, or when today's rules refuse it)."""
    if version is None:
        return None
    try:
        return parse_policy(version.raw_yaml, version.source or "<policy>").policy
    except PolicyError:
        return None


def _record_refusal(
    s: Session, now: datetime, policy: Policy, exc: PolicyRefused, applied_by: str
) -> None:
    if s.get(Customer, policy.customer) is None:
        return  # (events name an existing customer; a new one has nothing to lose)
    first = exc.problems[0]
    more = len(exc.problems) - 1
    record_event(
        s,
        now,
        "policy.refused",
        f"policy of {policy.customer} from {first.file} ({applied_by or 'unknown'}) refused, "
        f"the active one stays: {first.field}: {first.reason}"
        + (f" (and {more} more)" if more else ""),
        customer=policy.customer,
        severity="warning",
    )


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
