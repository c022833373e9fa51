"""Look-ups and counts the API modules share; each runs inside the caller's session."""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from controlplane.api.errors import InvalidArgumentError, NotFoundError, require
from controlplane.api.views import ModelView, PoolView, ZoneBlockView
from controlplane.availability import PoolKey
from controlplane.store.models import (
    Customer,
    Node,
    PolicyVersion,
    Pool,
    Replica,
    UnavailableOffering,
)
from controlplane.store.models import Model as ModelRow
from controlplane.store.transitions import unavailable_entry
from schema.policy import Model as ModelSpec
from schema.policy import Policy
from schema.policy_file import parse_policy
from schema.types import TERMINAL_NODE_STATES

K = TypeVar("K", int, str)


def resolve_customer(s: Session, customer: str | None) -> Customer:
    """The named customer, or the only one when none is named."""
    if customer:
        cust = s.get(Customer, customer)
        if cust is None:
            raise NotFoundError("customer", customer)
        return cust
    names = list(s.scalars(select(Customer.name).order_by(Customer.name)))
    if len(names) == 1:
        cust = s.get(Customer, names[0])
        assert cust is not None
        return cust
    if not names:
        raise NotFoundError("customer", "(none: no policy has been applied yet)")
    raise InvalidArgumentError(
        "customer", f"required when there are several customers ({', '.join(names)})"
    )


def policy_of(s: Session, customer: str) -> Policy:
    """The customer's active policy."""
    require("customer", customer)
    cust = s.get(Customer, customer)
    if cust is None or cust.active_policy_id is None:
        raise NotFoundError("customer", customer)
    row = s.get(PolicyVersion, cust.active_policy_id)
    assert row is not None
    return _parsed_policy(row.raw_yaml, row.source or "<policy>")


@lru_cache(maxsize=256)
def _parsed_policy(text: str, source: str) -> Policy:
    """A stored version's text parses the same every time (a Policy is frozen): every model
    call reads the active policy, and parsing it cost more than the rest of a deploy."""
    return parse_policy(text, source=source).policy


def find_model(s: Session, customer: str, name: str) -> ModelRow | None:
    return s.scalar(select(ModelRow).where(ModelRow.customer == customer, ModelRow.name == name))


def live_model(s: Session, customer: str, name: str) -> ModelRow:
    require("customer", customer)
    require("name", name)
    row = find_model(s, customer, name)
    if row is None or row.deleted_at is not None:
        raise NotFoundError("model", f"{customer}/{name}")
    return row


def api_models(s: Session, customer: str, exclude: str | None = None) -> list[ModelSpec]:
    """Specs of the customer's live API-deployed models (all but ``exclude``)."""
    rows = s.scalars(
        select(ModelRow).where(
            ModelRow.customer == customer,
            ModelRow.source == "api",
            ModelRow.deleted_at.is_(None),
        )
    )
    return [_api_spec(r.id, r.spec) for r in rows if r.name != exclude]


_API_SPECS: dict[int, tuple[dict[str, Any], ModelSpec]] = {}


def _api_spec(model_id: int, raw: dict[str, Any]) -> ModelSpec:
    """Validated once per stored spec (a comparison of the stored JSON is far cheaper than
    a validation), so checking one model against a customer's others does not validate them
    all again. The stored spec is compared, not only the id: one process may serve several
    stores (tests do), whose ids collide."""
    cached = _API_SPECS.get(model_id)
    if cached is not None and cached[0] == raw:
        return cached[1]
    spec = ModelSpec.model_validate(raw)
    _API_SPECS[model_id] = (copy.deepcopy(raw), spec)
    return spec


def model_view(s: Session, row: ModelRow) -> ModelView:
    return ModelView(row, replica_counts(s, [row.id]).get(row.id, {}))


def pool_views(s: Session, pools: list[Pool]) -> list[PoolView]:
    counts = pool_node_counts(s, [p.id for p in pools])
    blocks = zone_blocks(s, pools)
    return [PoolView(p, counts.get(p.id, {}), blocks.get(p.id, ())) for p in pools]


def zone_blocks(s: Session, pools: list[Pool]) -> dict[str, tuple[ZoneBlockView, ...]]:
    """The cache's blocks narrowed to one zone, per pool they cover (a block of whole pools
    is stamped on the pool row itself). Expired entries stay until gc, so readers compare
    ``until`` with their own clock, as for the pool row's block."""
    out: dict[str, tuple[ZoneBlockView, ...]] = {}
    if not pools:
        return out
    q = (
        select(UnavailableOffering)
        .where(
            UnavailableOffering.customer.in_({p.customer for p in pools}),
            UnavailableOffering.zone.is_not(None),
        )
        .order_by(UnavailableOffering.zone, UnavailableOffering.until)
    )
    entries = [(row, unavailable_entry(row)) for row in s.scalars(q)]
    for p in pools:
        key = PoolKey(p.id, p.account, p.region, p.instance_type)
        out[p.id] = tuple(
            ZoneBlockView(e.zone or "", row.until, e.reason, e.source)
            for row, e in entries
            if row.customer == p.customer and e.applies_to(key)
        )
    return out


def replica_counts(s: Session, model_ids: list[int]) -> dict[int, dict[str, int]]:
    """Non-terminal replicas per model, by state."""
    return _live_counts(s, Replica.model_id, Replica.state, model_ids)


def pool_node_counts(s: Session, pool_ids: list[str]) -> dict[str, dict[str, int]]:
    """Non-terminal nodes per pool, by state."""
    return _live_counts(s, Node.pool_id, Node.state, pool_ids)


def _live_counts(
    s: Session, key: InstrumentedAttribute[K], state: InstrumentedAttribute[str], ids: list[K]
) -> dict[K, dict[str, int]]:
    out: dict[K, dict[str, int]] = {}
    if not ids:
        return out
    terminal = [st.value for st in TERMINAL_NODE_STATES]
    q = (
        select(key, state, func.count())
        .where(key.in_(ids), state.not_in(terminal))
        .group_by(key, state)
    )
    for k, st, n in s.execute(q):
        out.setdefault(k, {})[st] = n
    return out
