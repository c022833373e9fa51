"""Run gpucap as if only some of its extras were installed, without uninstalling anything.

What an install of ``gpucap[EXTRAS]`` would hold is read from the package metadata: the
requirements in pyproject.toml (the source of truth, whatever the editable install last
recorded), then each installed distribution's own requirements, transitively. Every module
of an installed distribution outside that closure is hidden from a child process by an
import hook that raises ModuleNotFoundError, as a missing package would. So a module that
imports a package gpucap never declared (or declared only in a cloud's extra) fails there,
as it would in the image built with those extras."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"

# Installed in the child before anything else: hides every module under a hidden prefix.
PRELUDE = """
import importlib.abc, json, os, sys
_HIDDEN = tuple(json.loads(os.environ["GPUCAP_TEST_HIDDEN_MODULES"]))

class _Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        for p in _HIDDEN:
            if name == p or name.startswith(p + "."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Hidden())
del _Hidden
"""


def pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text())


def _active(req: Requirement, extras: Iterable[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in (*extras, ""))


@cache
def _dist(name: str) -> md.Distribution | None:
    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def closure(extras: frozenset[str]) -> set[str]:
    """The canonical names of the distributions ``pip install gpucap[extras]`` installs."""
    project = pyproject()["project"]
    own = canonicalize_name(project["name"])
    optional: Mapping[str, list[str]] = project.get("optional-dependencies", {})
    todo: list[tuple[str, frozenset[str]]] = [(own, extras)]
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    while todo:
        name, active = todo.pop()
        if (name, active) in seen:
            continue
        seen.add((name, active))
        names.add(name)
        if name == own:
            reqs = [Requirement(r) for r in project["dependencies"]]
            for e in sorted(active):
                reqs += [Requirement(r) for r in optional[e]]
        else:
            dist = _dist(name)
            if dist is None:
                raise AssertionError(f"{name} is required but not installed")
            reqs = [r for r in map(Requirement, dist.requires or []) if _active(r, active)]
        for r in reqs:
            todo.append((canonicalize_name(r.name), frozenset(r.extras)))
    return names


def _modules(dist: md.Distribution) -> set[str]:
    """The dotted names of the modules and packages a distribution installs, three levels
    deep at most (enough to tell ``google.cloud.compute_v1`` from ``google.protobuf``)."""
    out: set[str] = set()
    record = dist.read_text("RECORD") or ""  # md.files() is ten times slower on big SDKs
    for line in record.splitlines():
        path = line.split(",", 1)[0]
        if not path.endswith((".py", ".so", ".pyd")) or path.startswith(("..", "/", "bin/")):
            continue
        parts = path.split("/")
        if ".dist-info" in parts[0] or ".data" in parts[0] or "__pycache__" in parts:
            continue
        stem = parts[-1].split(".", 1)[0]
        dotted = (parts[:-1] if stem == "__init__" else [*parts[:-1], stem])[:3]
        if all(p.isidentifier() for p in dotted):
            out.update(".".join(dotted[: i + 1]) for i in range(len(dotted)))
    return out


@cache
def hidden_modules(extras: frozenset[str]) -> tuple[str, ...]:
    """The shortest module prefixes that only distributions outside the closure provide."""
    keep = closure(extras)
    kept: set[str] = set(pyproject()["tool"]["setuptools"]["packages"]["find"]["include"])
    kept = {k.rstrip("*") for k in kept}
    others: list[set[str]] = []
    for dist in md.distributions():
        name = canonicalize_name(dist.metadata["Name"] or "")
        mods = _modules(dist)
        if name in keep:
            kept |= mods
        else:
            others.append(mods)
    hidden: set[str] = set()
    for mods in others:
        for m in mods:
            parts = m.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix not in kept:
                    hidden.add(prefix)
                    break
    # Drop prefixes already covered by a shorter one.
    return tuple(sorted(h for h in hidden if not any(h.startswith(o + ".") for o in hidden)))


def env_with(extras: Iterable[str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    hidden = hidden_modules(frozenset(extras))
    return {**(base or os.environ), "GPUCAP_TEST_HIDDEN_MODULES": json.dumps(hidden)}


def python(code: str, extras: Iterable[str]) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child Python that sees only what gpucap[extras] installs."""
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code],
        env=env_with(extras),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def command(module: str, *args: str) -> list[str]:
    """argv running ``python -m module args`` behind the hook (env from :func:`env_with`)."""
    run = f"import runpy, sys; sys.argv = [{module!r}, *{list(args)!r}]; "
    run += f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", PRELUDE + run]
