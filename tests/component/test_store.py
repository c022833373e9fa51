"""The store's tables on SQLite and on the real PostgreSQL (``store`` fixture, migrated by
Alembic): every table round-trips, unique constraints hold, optimistic locking catches
stale writes, nodes keep a timestamp per state, and times come back as aware UTC."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Column, MetaData, Table, inspect, select
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from controlplane.store.db import Store
from controlplane.store.models import (
    Account,
    ApiToken,
    Base,
    Customer,
    DecisionRecord,
    Event,
    Lease,
    MachineImage,
    Model,
    Node,
    NodePhaseReport,
    NodeStop,
    PolicyVersion,
    Pool,
    Replica,
    UnavailableOffering,
    WeightCopy,
)
from schema.types import NodeState

# Non-UTC offsets on purpose: the store must keep the instant and hand back UTC.
CEST = timezone(timedelta(hours=2))
T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=CEST)


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _values(row: Base) -> dict[str, Any]:
    """Every mapped column of a row, by attribute name."""
    return {attr.key: getattr(row, attr.key) for attr in inspect(row).mapper.column_attrs}


def _graph(since_0003: bool = True) -> list[Base]:
    """One row per table, every column set (nullable ones included), parents first.
    ``since_0003=False``: without what revision 0003 added (for rows seeded at an older
    revision)."""
    pool_id = "acme/acme-aws/us-east-1/p5.48xlarge"
    rows: list[Base] = [
        Customer(name="acme", created_at=_at(0), active_policy_id=None),
        PolicyVersion(
            id=7,
            customer="acme",
            version=3,
            raw_yaml="customer: acme\n# ünïcode kept\n",
            sha256="ab" * 32,
            applied_by="alice@example.com",
            applied_at=_at(1),
            source="examples/policy.yaml",
        ),
        Account(
            id=11,
            customer="acme",
            name="acme-aws",
            cloud="aws",
            owner="customer",
            regions={"regions": ["us-east-1", "us-west-2"]},
            credentials_ref={"role_arn": "arn:aws:iam::123456789012:role/gpucap"},
            external_id="ext-42",
        ),
        Pool(
            id=pool_id,
            customer="acme",
            account="acme-aws",
            cloud="aws",
            owner="customer",
            region="us-east-1",
            instance_type="p5.48xlarge",
            gpu_shape="8xH100",
            tier="committed",
            committed=4,
            reservation="cr-0123456789abcdef0",
            price_usd_per_hour=98.32,
            cordoned=True,
            unavailable_until=_at(30),
            unavailable_reason="InsufficientInstanceCapacity in use1-az2",
            active=False,
        ),
        UnavailableOffering(
            id=31,
            customer="acme",
            account="acme-aws",
            region="us-east-1",
            zone="us-east-1a",
            instance_type="p5.48xlarge",
            pool_id=pool_id,
            until=_at(40),
            reason="InsufficientInstanceCapacity",
            source="error",
        ),
        Model(
            id=21,
            customer="acme",
            name="llama-70b",
            spec={"shapes": [{"shape": "8xH100", "tokens_per_s": 2500.5}], "min": 1},
            source="api",
            desired_replicas=5,
            desired_reason="load above target",
            pinned_replicas=3,
            paused=True,
            autoscaler_state={"stable_window": [1.0, 2.5], "panic_until": None},
            created_at=_at(2),
            updated_at=_at(3),
            deleted_at=_at(4),
        ),
        Replica(
            id="rep-1",
            model_id=21,
            pool_id=pool_id,
            gpu_shape="8xH100",
            state="ready",
            created_at=_at(5),
            ready_at=_at(9),
            ended_at=_at(50),
        ),
        Node(
            id="node-1",
            replica_id="rep-1",
            pool_id=pool_id,
            customer="acme",
            account="acme-aws",
            cloud="aws",
            region="us-east-1",
            zone="us-east-1a",
            instance_type="p5.48xlarge",
            idempotency_token="tok-node-1",
            instance_id="i-0123456789abcdef0",
            state="failed",
            error="boot timeout",
            attempts=2,
            last_attempt_at=_at(5),
            pending_at=_at(5),
            provisioning_at=_at(6),
            running_at=_at(7),
            ready_at=_at(8),
            draining_at=_at(40),
            terminating_at=_at(45),
            terminated_at=_at(46),
            failed_at=_at(47),
            launch_image="ami-0123456789abcdef0",
            launch_weights_uri="s3://acme-weights-us-east-1/llama-70b/",
        ),
        DecisionRecord(
            id=31,
            at=_at(10),
            kind="autoscale",
            customer="acme",
            model="llama-70b",
            desired=5,
            reason="scale_up",
            detail="load 1.3 x target over 60 s",
            inputs={"ready": 3, "load": [1.2, 1.4], "nested": {"a": [1, {"b": None}]}},
        ),
        Event(
            id=41,
            at=_at(11),
            kind="node.failed",
            severity="warning",
            customer="acme",
            model="llama-70b",
            node="node-1",
            message="node-1 failed: boot timeout",
        ),
    ]
    if not since_0003:  # (nor since 0004)
        return [r for r in rows if not isinstance(r, UnavailableOffering)]
    for r in rows:
        if isinstance(r, Pool):
            r.zones = {"zones": ["us-east-1a", "us-east-1b"]}
        if isinstance(r, Node):  # (since 0004)
            r.token_sha256 = "cd" * 32
            r.token_expires_at = _at(20)
            r.price_usd_per_hour, r.tier = 98.32, "committed"  # (since 0014)
    rows.append(  # (since 0007)
        WeightCopy(
            id=61,
            customer="acme",
            model="llama-70b",
            account="acme-aws",
            cloud="aws",
            region="us-east-1",
            source_uri="s3://acme-origin/llama-70b/",
            dest_uri="s3://acme-weights-us-east-1/gpucap-weights/acme/llama-70b/",
            state="copying",
            reason="replicas run here",
            bytes_total=140 * 10**9,
            bytes_done=7 * 10**9,
            transfer={"objects": [{"key": "a.safetensors", "resume": {"upload_id": "u-1"}}]},
            attempts=2,
            error="SlowDown",
            retry_at=_at(60),
            created_at=_at(12),
            updated_at=_at(13),
            started_at=_at(12),
            ready_at=_at(14),
            verified_at=_at(15),
            last_used_at=_at(16),
            evicted_at=_at(17),
        )
    )
    rows.append(  # (since 0008)
        MachineImage(
            id="bake-1",
            customer="acme",
            account="acme-aws",
            cloud="aws",
            region="us-east-1",
            runtime_image="vllm/vllm-openai:v0.11.0",
            image_version=3,
            instance_type="p5.48xlarge",
            state="ready",
            builder_instance_id="i-0123456789abcdef0",
            builder_terminated_at=_at(24),
            image_name="gpucap-bake-1",
            image_id="ami-0123456789abcdef0",
            source_digest="sha256:" + "ef" * 32,
            error="an earlier attempt timed out",
            token_sha256="ab" * 32,
            token_expires_at=_at(22),
            created_at=_at(18),
            state_at=_at(23),
            baked_at=_at(21),
            ready_at=_at(23),
            deleted_at=_at(25),
        )
    )
    rows.append(  # (since 0012)
        Lease(
            shard=0,
            holder="daemon-a/4242",
            token=2**40 + 7,  # (only grows: past int32 on both backends)
            expires_at=1772366415.25,
            acquired_at=1772366400.5,
            renewed_at=1772366410.0,
        )
    )
    rows.insert(
        rows.index(next(r for r in rows if isinstance(r, Node))) + 1,
        NodePhaseReport(
            id=51, node_id="node-1", phase="booted", at=_at(6), reported_at=_at(7), detail="ok"
        ),
    )
    rows.append(  # (since 0013)
        ApiToken(
            id="a1b2c3d4",
            secret_sha256="ef" * 32,
            role="customer:acme",
            description="acme's deploy pipeline",
            created_at=_at(1),
            expires_at=_at(90),
            revoked_at=_at(60),
        )
    )
    rows.insert(  # (since 0014)
        rows.index(next(r for r in rows if isinstance(r, Node))) + 1,
        NodeStop(id=71, node_id="node-1", stopped_at=_at(20), resumed_at=_at(30)),
    )
    return rows


def _insert(s: Session, rows: list[Base]) -> None:
    """Insert parents before children. The models declare foreign keys but few
    relationship()s, so the unit of work does not order INSERTs across tables by itself."""
    for row in rows:
        s.add(row)
        s.flush()


def _insert_present(s: Session, rows: list[Base]) -> None:
    """Insert parents first, writing only the columns the database has (the ORM's tables
    have more than an older revision made), with the ORM's types and Python defaults."""
    for row in rows:
        orm = row.__table__
        present = {c["name"] for c in inspect(s.connection()).get_columns(orm.name)}
        columns = [
            Column(c.name, c.type, primary_key=c.primary_key, default=c.default)
            for c in orm.c
            if c.name in present
        ]
        table = Table(orm.name, MetaData(), *columns)
        values = {c.name: getattr(row, c.name) for c in columns if c.name in row.__dict__}
        s.execute(table.insert().values(**values))


def _seed_parents(s: Session) -> None:
    """Customer, policy, account, pool, model and replica ``rep-1``, for rows to hang on
    (valid at every revision since 0001)."""
    parents = _graph(since_0003=False)
    _insert_present(s, [r for r in parents if not isinstance(r, Node | DecisionRecord | Event)])


def _node(node_id: str, token: str) -> Node:
    return Node(
        id=node_id,
        replica_id="rep-1",
        pool_id="acme/acme-aws/us-east-1/p5.48xlarge",
        customer="acme",
        account="acme-aws",
        cloud="aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        idempotency_token=token,
        state="pending",
        pending_at=_at(0),
    )


def test_every_table_round_trips(store: Store) -> None:
    written = _graph()
    assert {t.name for r in written for t in inspect(r).mapper.tables} == set(
        Base.metadata.tables
    ), "a table was added to models.py: add a row for it to _graph()"
    with store.session() as s:
        _insert(s, written)
        s.get_one(Customer, "acme").active_policy_id = 7

    # What the ORM objects hold after commit (set by us, plus versions it generated)...
    expected = {
        (type(r), inspect(r).mapper.primary_key_from_instance(r)[0]): _values(r) for r in written
    }
    assert expected[(Node, "node-1")]["version"] == 1
    # ...is exactly what a fresh session reads back from the database.
    with store.session() as s:
        for (cls, key), values in expected.items():
            row = s.get_one(cls, key)
            assert _values(row) == values, cls.__name__
            for name, value in _values(row).items():
                if isinstance(value, datetime):
                    assert value.utcoffset() == timedelta(0), f"{cls.__name__}.{name}"


def test_defaults_fill_unset_columns(store: Store) -> None:
    with store.session() as s:
        _seed_parents(s)
        s.add(_node("node-d", "tok-d"))
        s.add(Event(at=_at(1), kind="policy.applied", message="ok"))
    with store.session() as s:
        node = s.get_one(Node, "node-d")
        assert (node.attempts, node.version, node.instance_id, node.ready_at) == (0, 1, None, None)
        event = s.scalars(select(Event)).one()
        assert (event.severity, event.customer) == ("info", None)
        assert isinstance(event.id, int)


def test_naive_datetimes_are_refused(store: Store) -> None:
    with pytest.raises(StatementError, match="naive datetime"), store.session() as s:
        s.add(Customer(name="naive", created_at=datetime(2026, 1, 1)))
    with store.session() as s:
        assert s.get(Customer, "naive") is None


def test_policy_version_is_unique_per_customer(store: Store) -> None:
    def policy(customer: str, version: int) -> PolicyVersion:
        return PolicyVersion(
            customer=customer,
            version=version,
            raw_yaml="x: 1\n",
            sha256="0" * 64,
            applied_by="test",
            applied_at=_at(0),
        )

    with store.session() as s:
        s.add_all([Customer(name="a", created_at=_at(0)), Customer(name="b", created_at=_at(0))])
        s.flush()
        s.add_all([policy("a", 1), policy("a", 2), policy("b", 1)])  # same number, other customer

    with pytest.raises(IntegrityError), store.session() as s:
        s.add(policy("a", 2))

    with store.session() as s:  # the failed insert changed nothing
        rows = s.execute(select(PolicyVersion.customer, PolicyVersion.version)).all()
        assert sorted(map(tuple, rows)) == [("a", 1), ("a", 2), ("b", 1)]


def test_node_idempotency_token_is_unique(store: Store) -> None:
    with store.session() as s:
        _seed_parents(s)
        s.add(_node("node-a", "tok-shared"))

    with pytest.raises(IntegrityError), store.session() as s:
        s.add(_node("node-b", "tok-shared"))

    with store.session() as s:
        assert s.scalars(select(Node.id)).all() == ["node-a"]


@pytest.mark.parametrize(
    ("cls", "key", "column", "first", "second"),
    [
        (Node, "node-1", "state", "terminating", "running"),
        (Model, 21, "desired_replicas", 6, 2),
        (Replica, "rep-1", "state", "draining", "failed"),
    ],
)
def test_stale_concurrent_update_raises(
    store: Store,
    cls: type[Node] | type[Model] | type[Replica],
    key: Any,
    column: str,
    first: Any,
    second: Any,
) -> None:
    with store.session() as s:
        _insert(s, _graph())

    # Two writers (say the reconciler and the API) read the same version of the row...
    slow = Session(store.engine, expire_on_commit=False)  # committed by hand below
    try:
        stale = slow.get_one(cls, key)
        assert _values(stale)["version"] == 1
        # ...one of them commits first...
        with store.session() as s:
            setattr(s.get_one(cls, key), column, first)
        # ...and the other's write, based on what it read, must fail instead of winning.
        assert getattr(stale, column) not in (first, second)  # both writes are real changes
        setattr(stale, column, second)
        with pytest.raises(StaleDataError):
            slow.commit()
        slow.rollback()
    finally:
        slow.close()

    with store.session() as s:
        row = s.get_one(cls, key)
        assert getattr(row, column) == first
        assert _values(row)["version"] == 2


def test_node_keeps_a_timestamp_per_state(store: Store) -> None:
    states = [str(state) for state in NodeState]
    assert all(hasattr(Node, f"{state}_at") for state in states), (
        "every NodeState needs a <state>_at column on nodes"
    )
    with store.session() as s:
        _seed_parents(s)
        s.add(_node("node-t", "tok-t"))

    # Walk the node through every state, one transaction per step, like the reconciler.
    stamps = {"pending": _at(0)}
    for minute, state in enumerate(states[1:], start=1):
        with store.session() as s:
            node = s.get_one(Node, "node-t")
            node.state = state
            setattr(node, f"{state}_at", _at(minute))
            stamps[state] = _at(minute)

    with store.session() as s:
        node = s.get_one(Node, "node-t")
        assert node.state == states[-1]
        assert {state: getattr(node, f"{state}_at") for state in states} == stamps
        assert node.version == len(states)  # one bump per committed transition
