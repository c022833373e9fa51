"""What applying a policy would change, against what is active. Pure: the store's part of the
picture (each live model's owner and spec, live nodes per pool) comes in as plain data.

The same diff serves three callers: ``gpucap policy diff`` (shown to a person), the apply
itself (refused when it deletes or drains without the file's ``allow_deletes`` or the
caller's ``--allow-deletes``, or when it names a model the API owns), and the events a
refusal records. The ownership and deletion rules are in docs/policy.md."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controlplane.pools import pools_for_policy
from schema.policy import Model, Policy, Problem

OWNER_POLICY = "policy"  # the customer's policy file (applied by the daemon or the CLI)
OWNER_API = "api"  # DeployModel / UpdateModel / DeleteModel


class Action(StrEnum):
    CREATE = "create"
    CHANGE = "change"
    DELETE = "delete"  # a model deleted, an account dropped, a pool no longer allowed
    ADOPT = "adopt"  # an API-owned model the file takes over (``adopt_models``)
    CONFLICT = "conflict"  # an API-owned model named in the file without adopting it


@dataclass(frozen=True)
class FieldChange:
    path: str  # e.g. "shapes" or "target.utilization"
    before: str  # JSON text; "" when the field was absent
    after: str


@dataclass(frozen=True)
class Change:
    kind: str  # "model" | "account" | "pool" | "overflow" | "customer"
    name: str
    action: Action
    fields: tuple[FieldChange, ...] = ()
    detail: str = ""
    # Where the change shows in the new file (for file:line when it is refused).
    path: tuple[str | int, ...] = ()
    live: int = 0  # the live replicas (a model) or nodes (a pool) a deletion drains

    @property
    def drains(self) -> bool:
        """Deletes a model or an account, or drains live nodes: needs ``allow_deletes``."""
        return self.action == Action.DELETE and (self.kind != "pool" or self.live > 0)

    def __str__(self) -> str:
        head = f"{self.action.value} {self.kind} {self.name}"
        return f"{head} ({self.detail})" if self.detail else head


@dataclass(frozen=True)
class ModelState:
    """A live (not deleted) model of the customer in the store."""

    owner: str  # OWNER_POLICY | OWNER_API
    spec: Mapping[str, Any]  # schema.policy.Model as JSON, as stored
    live_replicas: int = 0


@dataclass(frozen=True)
class PolicyDiff:
    changes: tuple[Change, ...]

    @property
    def empty(self) -> bool:
        return not self.changes

    @property
    def drains(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.drains)

    @property
    def conflicts(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.action == Action.CONFLICT)

    def refusals(self, allow_deletes: bool) -> list[Problem]:
        """Why this apply must not go ahead (empty: it may), one problem per change,
        at the field of the new file that causes it (the document for a removal)."""
        out = [
            Problem(
                c.path,
                f"model {c.name} is owned by the API (DeployModel); delete it there first, "
                "or list it under adopt_models to let this file take it over",
            )
            for c in self.conflicts
        ]
        if not allow_deletes:
            out += [
                Problem(
                    c.path,
                    f"would {c}: a deletion needs 'allow_deletes: true' in the file "
                    "(or --allow-deletes); nothing was applied",
                )
                for c in self.drains
            ]
        return out


def diff_policy(
    active: Policy | None,
    new: Policy,
    models: Mapping[str, ModelState],
    active_pools: Mapping[str, int],
    *,
    new_customer: bool = False,
) -> PolicyDiff:
    """What applying ``new`` would change. ``active``: the customer's active policy (None:
    none, or one that no longer parses); ``models``: the customer's live models by name;
    ``active_pools``: the customer's active pools with their live nodes."""
    changes = [
        *_model_changes(new, models),
        *_account_changes(active, new),
        *_pool_changes(new, models, active_pools),
    ]
    before = active.overflow.model_dump(mode="json") if active else {}
    fields = tuple(field_changes(before, new.overflow.model_dump(mode="json")))
    if active is not None and fields:
        changes.append(Change("overflow", new.customer, Action.CHANGE, fields, path=("overflow",)))
    if new_customer:
        changes.insert(0, Change("customer", new.customer, Action.CREATE, path=("customer",)))
    return PolicyDiff(tuple(changes))


def _model_changes(new: Policy, models: Mapping[str, ModelState]) -> Iterator[Change]:
    adopt = set(new.adopt_models)
    named = set()
    for i, m in enumerate(new.models):
        named.add(m.name)
        path = ("models", i, "name")
        state = models.get(m.name)
        spec = m.model_dump(mode="json")
        if state is None:
            yield Change("model", m.name, Action.CREATE, detail=_bounds(m), path=path)
        elif state.owner != OWNER_POLICY:
            fields = tuple(field_changes(state.spec, spec))
            action = Action.ADOPT if m.name in adopt else Action.CONFLICT
            yield Change("model", m.name, action, fields, f"owned by {state.owner}", path)
        elif fields := tuple(field_changes(state.spec, spec)):
            yield Change("model", m.name, Action.CHANGE, fields, path=path)
    for name in sorted(models):
        state = models[name]
        if state.owner == OWNER_POLICY and name not in named:
            n = state.live_replicas
            detail = _draining(n, "live replica") if n else "no live replicas"
            yield Change("model", name, Action.DELETE, detail=detail, path=("models",), live=n)


def _account_changes(active: Policy | None, new: Policy) -> Iterator[Change]:
    before = {a.name: a.model_dump(mode="json") for a in (active.accounts if active else [])}
    for i, acct in enumerate(new.accounts):
        old = before.pop(acct.name, None)
        path = ("accounts", i, "name")
        if old is None:
            detail = f"{acct.cloud.value}, {acct.owner.value}, {len(acct.regions)} regions"
            yield Change("account", acct.name, Action.CREATE, detail=detail, path=path)
        elif fields := tuple(field_changes(old, acct.model_dump(mode="json"))):
            yield Change("account", acct.name, Action.CHANGE, fields, path=path)
    for name in before:
        detail = "no new replicas there; its nodes drain"
        yield Change("account", name, Action.DELETE, detail=detail, path=("accounts",))


def _pool_changes(
    new: Policy, models: Mapping[str, ModelState], active_pools: Mapping[str, int]
) -> Iterator[Change]:
    # Pools serve the policy's models and the API's (as api.sync.sync_pools derives them).
    in_file = set(new.adopt_models) | {m.name for m in new.models}
    api = [
        Model.model_validate(s.spec)
        for name, s in sorted(models.items())
        if s.owner == OWNER_API and name not in in_file
    ]
    wanted = {
        p.id for p in pools_for_policy(new.model_copy(update={"models": [*new.models, *api]}))
    }
    for pid in sorted(wanted - set(active_pools)):
        yield Change("pool", pid, Action.CREATE)
    for pid in sorted(set(active_pools) - wanted):
        n = active_pools[pid]
        detail = _draining(n, "live node") if n else "no nodes"
        yield Change("pool", pid, Action.DELETE, detail=detail, path=("accounts",), live=n)


def _draining(n: int, what: str) -> str:
    return f"{n} {what}s drain" if n != 1 else f"1 {what} drains"


def _bounds(m: Model) -> str:
    return f"replicas {m.min_replicas}..{m.max_replicas}"


def field_changes(
    before: Mapping[str, Any], after: Mapping[str, Any], prefix: str = ""
) -> Iterator[FieldChange]:
    """Field by field, nested mappings by their dotted path; lists as a whole."""
    for key in sorted(set(before) | set(after), key=str):
        path = f"{prefix}{key}"
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            yield from field_changes(old, new, f"{path}.")
        else:
            yield FieldChange(path, _text(key in before, old), _text(key in after, new))


def _text(present: bool, value: Any) -> str:
    return json.dumps(value, sort_keys=True) if present else ""
