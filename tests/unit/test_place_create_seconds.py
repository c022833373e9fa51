"""The place job's cold-start figures (``place.Estimates``): each distinct figure worked out
once a tick, shared by the models it does not tell apart, never by those it does; and the
per-pool create times ``keep_warm`` reads (``place._CreateSeconds``), each only when read."""

from __future__ import annotations

from typing import Any

import pytest

from coldstart import Learned
from coldstart.learned import Stat
from controlplane.loop import place
from controlplane.loop.snapshot import ModelFacts, PoolFacts
from schema.policy import Model as ModelSpec


def _model(model_id: int, size_gb: float) -> ModelFacts:
    spec = ModelSpec.model_validate(
        {
            "name": f"m{model_id}",
            "shapes": [{"shape": "1xH100", "max_concurrency": 8}],
            "weights": {"uri": "s3://w/m", "size_gb": size_gb},
        }
    )
    return ModelFacts(model_id, "acme", spec.name, spec, 1, "", None, False, False, {})


def _pool(pool_id: str) -> PoolFacts:
    return PoolFacts(
        pool_id, "acme", "aws", "own", "us-east-1", "p5.4xlarge", "1xH100", "own", 3.9, 0,
        False, None, None, None,
    )  # fmt: skip


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    calls: list[tuple[int, str]] = []
    real = place._pool_s

    def pool_s(ctx: Any, learned: Any, m: ModelFacts, seen: Any, p: PoolFacts, *a: Any) -> float:
        calls.append((m.id, p.id))
        return real(ctx, learned, m, seen, p, *a)

    monkeypatch.setattr(place, "_pool_s", pool_s)
    return calls


def _ctx() -> Any:
    from coldstart import ColdStartModel
    from controlplane.loop.context import Tuning

    class Ctx:
        tuning = Tuning()
        coldstart = ColdStartModel()

    return Ctx()


def test_models_alike_share_a_figure_and_models_apart_do_not(
    counted: list[tuple[int, str]],
) -> None:
    learned = Learned(engine_s={3: Stat(40.0, 5)})
    est = place.Estimates(_ctx(), learned)
    p1, p2 = _pool("p1"), _pool("p2")
    a, b = _model(1, 16.0), _model(2, 16.0)
    engine_learned, bigger = _model(3, 16.0), _model(4, 140.0)

    assert est.seconds(a, [], p1) == est.seconds(b, [], p1)
    assert counted == [(1, "p1")]  # b: the same figure, not worked out again
    est.seconds(a, [], p2)
    est.seconds(engine_learned, [], p1)
    est.seconds(bigger, [], p1)
    est.seconds(b, [("p1", 90.0)], p1)  # b's own launches: its own figure
    est.seconds(a, [], p1, warm=True)
    est.seconds(a, [], p1, baked=True)
    assert len(counted) == 7
    assert est.seconds(bigger, [], p1) > est.seconds(a, [], p1)
    assert est.seconds(engine_learned, [], p1) != est.seconds(a, [], p1)
    assert est.seconds(b, [("p1", 90.0)], p1) != est.seconds(b, [], p1)
    assert len(counted) == 7  # all read again from the tick's figures
    # each figure is what the estimate says of that model alone
    fresh = place.Estimates(_ctx(), learned)
    assert fresh.seconds(b, [("p1", 90.0)], p1) == est.seconds(b, [("p1", 90.0)], p1)


def test_create_seconds_are_worked_out_when_read(counted: list[tuple[int, str]]) -> None:
    est = place.Estimates(_ctx(), Learned())
    pools = {"p1": _pool("p1"), "p2": _pool("p2")}
    create_s = place._CreateSeconds(est, _model(1, 16.0), [("p1", 90.0)], pools)

    assert counted == []  # nothing estimated until read
    assert len(create_s) == 2 and list(create_s) == ["p1", "p2"]
    assert create_s.get("p2", 0.0) == est.seconds(_model(1, 16.0), [("p1", 90.0)], pools["p2"])
    assert counted == [(1, "p2")]
    assert create_s.get("elsewhere", 0.0) == 0.0  # (keep_warm's default)
    assert set(dict(create_s)) == {"p1", "p2"}
    assert counted == [(1, "p2"), (1, "p1")]
