"""Where each model is served: every ready replica's address and port, for routers and
gateways (``ListEndpoints``, and ``WatchEndpoints`` to follow it) and as Prometheus HTTP
service discovery (``/sd/prometheus``), so a Prometheus with ``http_sd_configs`` scrapes
every engine gpucap starts. A gang is reached at its leader (rank 0, the node with the least
id), the one that serves.

Revisions (``WatchEndpoints``): each model row keeps the revision last given to its set of
endpoints and the set's digest. Reading a selection compares each of its models' sets with
the digest; a model whose set changed gets a revision above every model's (taken under a
lock every daemon of the database honours), so a selection's revision, the greatest of its
models', moves exactly when its endpoints change and never goes back: it is in the
database, and model rows are kept. Revisions are given when a set is read, so the writers
(the loop, the API) know nothing of them, and a change nobody watched costs nothing."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from controlplane.api.errors import InvalidArgumentError
from controlplane.api.paging import Page, keyset, matching, page_request, take
from controlplane.store.db import Store
from controlplane.store.locks import exclusive
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, Replica
from runtimes import ENGINES, port
from schema.policy import Model as ModelSpec
from schema.policy import Name
from schema.types import NodeState


@dataclass(frozen=True)
class Endpoint:
    customer: str
    model: str
    replica_id: str
    node_id: str
    pool_id: str
    address: str
    port: int
    engine: str
    metrics_path: str

    @property
    def target(self) -> str:
        return f"{self.address}:{self.port}"


@dataclass(frozen=True)
class EndpointsSnapshot:
    """A selection's endpoints and the revision that names exactly this set."""

    revision: int
    endpoints: tuple[Endpoint, ...]


# A gang's leader: the least node id of its replica.
_LEADER = (
    select(func.min(Node.id)).where(Node.replica_id == Replica.id).correlate(Replica)
).scalar_subquery()
_NAME = TypeAdapter(Name)


# What routers get: ready replicas. What is scraped: those and the draining ones, whose
# engines finish their in-flight requests: dropping them from discovery when the drain
# starts would take their last completions out of every rate (an arrival-rate dip the
# autoscaler would read as cheaper requests) while they still count.
SERVING = (NodeState.READY.value,)
SCRAPED = (NodeState.READY.value, NodeState.DRAINING.value)


def _ready(
    s: Session, customer: str | None, model: str | None, states: tuple[str, ...] = SERVING
) -> list[Endpoint]:
    """One statement, so one snapshot of the database: a revision never names a mix."""
    q = _ready_query(customer, model, states).order_by(ModelRow.customer, ModelRow.name, Replica.id)
    return _endpoints(s.execute(q).all())


def _ready_query(customer: str | None, model: str | None, states: tuple[str, ...]) -> Any:
    q = (
        select(
            Replica.id,
            Replica.pool_id,
            ModelRow.customer,
            ModelRow.name,
            ModelRow.spec,
            Node.id,
            Node.private_ip,
        )
        .join(ModelRow, Replica.model_id == ModelRow.id)
        .join(Node, Node.id == _LEADER)
        # (a warm-pool replica is parked, even while ready: it serves once resumed)
        .where(Replica.state.in_(states), Replica.warm.is_(False), ModelRow.deleted_at.is_(None))
    )
    return matching(q, (ModelRow.customer, customer), (ModelRow.name, model))


def _endpoints(rows: Sequence[Any]) -> list[Endpoint]:
    out = []
    specs: dict[tuple[str, str], ModelSpec] = {}
    for rid, pool_id, cust, name, raw, node_id, address in rows:
        if not address:
            continue  # (the cloud has not told its address yet)
        if (cust, name) not in specs:
            specs[(cust, name)] = ModelSpec.model_validate(raw)
        runtime = specs[(cust, name)].runtime
        out.append(
            Endpoint(
                customer=cust,
                model=name,
                replica_id=rid,
                node_id=node_id,
                pool_id=pool_id,
                address=address,
                port=port(runtime),
                engine=runtime.engine.value,
                metrics_path=ENGINES[runtime.engine].metrics.path,
            )
        )
    return out


def _digest(endpoints: list[Endpoint]) -> str | None:
    """What a model's set is compared by; None for no endpoints (as a new model has)."""
    if not endpoints:
        return None
    return hashlib.sha256(json.dumps([astuple(e) for e in endpoints]).encode()).hexdigest()


def _read(
    s: Session, customer: str | None, model: str | None
) -> tuple[list[Endpoint], int, dict[int, str | None]]:
    """The selection's endpoints, its revision, and (by model id, with the new digest) the
    models whose set no longer matches the digest their revision was given for."""
    found = _ready(s, customer, model)
    by_model: dict[tuple[str, str], list[Endpoint]] = defaultdict(list)
    for e in found:
        by_model[(e.customer, e.model)].append(e)
    q = select(
        ModelRow.id,
        ModelRow.customer,
        ModelRow.name,
        ModelRow.endpoints_revision,
        ModelRow.endpoints_digest,
    )
    revision, stale = 0, {}
    for mid, cust, name, rev, digest in s.execute(
        matching(q, (ModelRow.customer, customer), (ModelRow.name, model))
    ):
        now = _digest(by_model.get((cust, name), []))
        if now != digest:
            stale[mid] = now
        revision = max(revision, rev or 0)
    return found, revision, stale


def _check_name(field: str, value: str | None) -> None:
    if not value:
        return
    try:
        _NAME.validate_python(value)
    except ValidationError:
        raise InvalidArgumentError(
            field, f"{value!r} is not a name (lowercase letters, digits and '-', at most 63)"
        ) from None


class Endpoints:
    def __init__(self, store: Store) -> None:
        self._store = store

    def ready(self, customer: str | None = None, model: str | None = None) -> list[Endpoint]:
        """Ready replicas with a known address, by customer, model and replica."""
        with self._store.session() as s:
            return _ready(s, customer, model)

    def page(
        self,
        customer: str | None = None,
        model: str | None = None,
        *,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[Endpoint]:
        """One page of :meth:`ready`, keyset on (customer, model, replica): the page's
        replicas whose address the cloud has not told yet are left out, so a page may be
        short."""
        req = page_request(
            page_size,
            page_token,
            {"list": "endpoints", "customer": customer or "", "model": model or ""},
        )
        q = keyset(
            _ready_query(customer, model, SERVING),
            req,
            ModelRow.customer,
            ModelRow.name,
            Replica.id,
        )
        with self._store.session() as s:
            page = take(s.execute(q).all(), req, lambda r: (r[2], r[3], r[0]))
        return Page(_endpoints(page.items), page.next_page_token)

    def scrape_targets(self) -> list[Endpoint]:
        """Every engine to scrape: the ready replicas' and the draining ones' (``SCRAPED``)."""
        with self._store.session() as s:
            return _ready(s, None, None, SCRAPED)

    def snapshot(self, customer: str | None = None, model: str | None = None) -> EndpointsSnapshot:
        """The selection's ready endpoints with their revision (0: never any). An unknown
        model selects nothing; a malformed name is InvalidArgumentError."""
        _check_name("customer", customer)
        _check_name("model", model)
        with self._store.session() as s:  # the usual case: nothing changed, nothing written
            found, revision, stale = _read(s, customer, model)
        if not stale:
            return EndpointsSnapshot(revision, tuple(found))
        with self._store.session() as s:
            # Read again under the lock: the revision above every model's must be given by
            # one reader at a time, to the set it read after the last one committed.
            exclusive(s, "gpucap.endpoints_revision")
            found, revision, stale = _read(s, customer, model)
            if stale:
                revision = (s.scalar(select(func.max(ModelRow.endpoints_revision))) or 0) + 1
                for mid, digest in stale.items():  # (a bulk UPDATE: the row's version stays)
                    s.execute(
                        update(ModelRow)
                        .where(ModelRow.id == mid)
                        .values(endpoints_revision=revision, endpoints_digest=digest)
                        .execution_options(synchronize_session=False)
                    )
        return EndpointsSnapshot(revision, tuple(found))

    def prometheus_sd(self) -> list[dict[str, Any]]:
        """Prometheus HTTP SD: one target group per (customer, model), labelled with both
        (the labels the default PromQL sums by) and the engine's metrics path; draining
        engines stay listed until their replica is gone (``SCRAPED``)."""
        groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
        for e in self.scrape_targets():
            groups[(e.customer, e.model, e.engine, e.metrics_path)].append(e.target)
        return [
            {
                "targets": targets,
                "labels": {
                    "customer": cust,
                    "model": model,
                    "engine": engine,
                    "__metrics_path__": path,
                },
            }
            for (cust, model, engine, path), targets in sorted(groups.items())
        ]
