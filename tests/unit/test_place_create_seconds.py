"""The place job's per-pool create time for ``keep_warm`` (``place._CreateSeconds``): the
same figures the eager dict had, each worked out only when read, once."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.loop import place


def test_create_seconds_are_worked_out_when_read_and_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake_pool_s(ctx: Any, learned: Any, m: Any, seen: Any, p: Any) -> float:
        calls.append((ctx, learned, m, seen, p))
        return {"p1": 100.0, "p2": 250.0}[p]

    monkeypatch.setattr(place, "_pool_s", fake_pool_s)
    pools: dict[str, Any] = {"p1": "p1", "p2": "p2"}  # (pool facts: passed through)
    seen = [("p1", 90.0)]
    create_s = place._CreateSeconds("ctx", "learned", "model", seen, pools)  # type: ignore[arg-type]

    assert calls == []  # nothing estimated until read
    assert len(create_s) == 2 and list(create_s) == ["p1", "p2"]
    assert create_s.get("p2", 0.0) == 250.0
    assert create_s.get("p2", 0.0) == 250.0
    assert calls == [("ctx", "learned", "model", seen, "p2")]  # once
    assert create_s.get("elsewhere", 0.0) == 0.0  # (keep_warm's default)
    assert dict(create_s) == {"p1": 100.0, "p2": 250.0}
    assert len(calls) == 2
