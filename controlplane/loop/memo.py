"""Values a job derives from a tick's inputs, kept while those inputs are the very same
objects: the snapshot's reads are shared between ticks while nothing changed
(``SnapshotReader``), and so are parsed specs (``SpecCache``), so a model whose replicas,
spec and observed launches are as they were is not worked out again. Identity, not
equality: comparing the inputs would cost what deriving them does."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class TickMemo:
    """Kept for the keys of the last tick only (``new_tick``), so what leaves goes."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[tuple[object, ...], Any]] = {}
        self._used: dict[Hashable, tuple[tuple[object, ...], Any]] = {}

    def new_tick(self) -> None:
        self._kept, self._used = self._used, {}

    def get(self, key: Hashable, inputs: tuple[object, ...], make: Callable[[], T]) -> T:
        kept = self._used.get(key) or self._kept.get(key)
        if (
            kept is None
            or len(kept[0]) != len(inputs)
            or any(a is not b for a, b in zip(kept[0], inputs, strict=True))
        ):
            kept = (inputs, make())
        self._used[key] = kept
        return kept[1]  # type: ignore[no-any-return]
