"""Runs the contract suite once per cloud: ``harness`` is parametrized over every cloud, and
each cloud's fixtures come from ``tests/contract/harness_<cloud>.py``.

A cloud whose harness module does not exist yet is *skipped with the reason*, never silently
passed. Every pytest fixture a harness module defines or imports (e.g. the session-scoped
emulator from ``tests/fakes/``) is re-exported here so pytest can resolve it.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.contract.harness import Harness

# "simfile": the simulated cloud on a state file shared by processes (harness_simfile.py).
CLOUDS = ("sim", "simfile", "aws", "gcp", "oci")

_missing: dict[str, str] = {}


def _is_fixture(obj: Any) -> bool:
    # pytest >= 8.4 wraps fixtures in FixtureFunctionDefinition; older ones mark the function.
    return hasattr(obj, "_fixture_function_marker") or hasattr(obj, "_pytestfixturefunction")


for _cloud in CLOUDS:
    _modname = f"tests.contract.harness_{_cloud}"
    try:
        _mod = importlib.import_module(_modname)
    except ModuleNotFoundError as _exc:
        if _exc.name != _modname:
            raise  # the module exists but is broken: fail loudly, do not skip
        _missing[_cloud] = f"{_modname.replace('.', '/')}.py does not exist yet"
        continue
    for _name in dir(_mod):
        _obj = getattr(_mod, _name)
        if not _is_fixture(_obj):
            continue
        if globals().get(_name, _obj) is not _obj:  # two clouds, one fixture name: ambiguous
            raise RuntimeError(f"fixture {_name!r} of {_modname} clashes with another harness's")
        globals()[_name] = _obj
    if f"{_cloud}_harness" not in globals():
        _missing[_cloud] = f"{_modname} defines no fixture named {_cloud}_harness"


@pytest.fixture(params=CLOUDS)
def harness(request: pytest.FixtureRequest) -> Harness:
    name = request.param
    if name in _missing:
        pytest.skip(f"no {name} harness: {_missing[name]}")
    h = request.getfixturevalue(f"{name}_harness")
    assert isinstance(h, Harness), f"{name}_harness does not satisfy the Harness protocol"
    return h
