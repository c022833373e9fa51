"""Pools follow API-deployed models: a deploy adds (or makes active again) only the pools of
its own shapes, beside the others' (``api.sync.add_model_pools``), and a delete re-derives
them all, deactivating the pools no live model uses (``api.sync.sync_pools``). On SQLite and
PostgreSQL (``store`` fixture)."""

from __future__ import annotations

from sqlalchemy import select

from controlplane.api import ControlPlaneService
from controlplane.store.db import Store
from controlplane.store.models import Pool
from tests.policy_texts import api_model_spec, example_policy, without_llama_8b


def _active_1xh100(store: Store) -> set[str]:
    with store.session() as s:
        rows = s.scalars(select(Pool).where(Pool.gpu_shape == "1xH100", Pool.active.is_(True)))
        return {p.id for p in rows}


def _pool_ids(store: Store, *, active: bool) -> set[str]:
    with store.session() as s:
        return {p.id for p in s.scalars(select(Pool).where(Pool.active.is_(active)))}


def test_deploys_add_their_pools_and_deletes_deactivate_only_unused_ones(store: Store) -> None:
    svc = ControlPlaneService(store)
    svc.apply_policy(without_llama_8b(example_policy()), source="p.yaml", applied_by="t")
    before = _pool_ids(store, active=True)
    assert not _active_1xh100(store)  # no model of the file runs on 1xH100

    svc.deploy_model("acme", api_model_spec("a-7b"))
    added = _active_1xh100(store)
    assert added and all("/acme-aws/" in p for p in added)  # the spec's clouds: aws only
    assert _pool_ids(store, active=True) == before | added  # nobody else's pool changed

    svc.deploy_model("acme", api_model_spec("b-7b"))  # same shape: nothing new
    assert _pool_ids(store, active=True) == before | added

    svc.delete_model("acme", "a-7b")  # b-7b still needs them
    assert _active_1xh100(store) == added

    svc.delete_model("acme", "b-7b")
    assert not _active_1xh100(store)
    assert _pool_ids(store, active=False) >= added  # kept, inactive (nodes may refer to them)
    assert _pool_ids(store, active=True) == before

    svc.deploy_model("acme", api_model_spec("a-7b"))  # a redeploy makes them active again
    assert _active_1xh100(store) == added
    kinds = [e.message for e in svc.events(limit=100) if e.kind == "pools.changed"]
    assert sum(f"{len(added)} added" in m for m in kinds) == 2
