"""Fixtures for the bench scripts' tests: the scripts under bench/ are not a package, so they
are loaded from their files (registered under their own names, as they import each other)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/simulate_bench.py."""
    return _load("simulate_bench")


@pytest.fixture(scope="module")
def heldout(bench: ModuleType) -> ModuleType:
    """bench/heldout.py (importing the ``bench`` fixture's module)."""
    return _load("heldout")


@pytest.fixture(scope="module")
def floor(bench: ModuleType) -> ModuleType:
    """bench/floor.py (importing the ``bench`` fixture's module)."""
    return _load("floor")


@pytest.fixture(scope="module")
def bound(floor: ModuleType) -> ModuleType:
    """bench/bound.py (importing the ``floor`` fixture's module)."""
    return _load("bound")
