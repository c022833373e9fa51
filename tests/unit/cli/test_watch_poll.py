"""``--watch``: a snapshot is shown when it differs from the last one shown, no more."""

from __future__ import annotations

from collections.abc import Iterator

from controlplane.cli.listing import poll
from schema.gen.gpucap.v1 import control_plane_pb2 as pb


def _models(*names: str) -> pb.ListModelsResponse:
    return pb.ListModelsResponse(models=[pb.Model(name=n) for n in names])


def test_poll_shows_each_change_once_and_stops_when_told() -> None:
    seq: Iterator[pb.ListModelsResponse] = iter(
        [_models("a"), _models("a"), _models("a", "b"), _models("a", "b"), _models("b")]
    )
    shown: list[list[str]] = []
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) < 5

    poll(lambda: next(seq), lambda r: shown.append([m.name for m in r.models]), 1.5, wait)
    assert shown == [["a"], ["a", "b"], ["b"]]
    assert waits == [1.5] * 5


def test_poll_shows_the_first_snapshot_even_when_empty() -> None:
    shown: list[int] = []
    poll(lambda: _models(), lambda r: shown.append(len(r.models)), 1.0, lambda s: False)
    assert shown == [0]
