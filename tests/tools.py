"""Tools of the field the tests run for real (Debian packages that .ci/run installs): where
one is missing a test skips with the install command, except under CI=true, where it fails
(a green CI must have run it)."""

from __future__ import annotations

import os
import shutil

import pytest


def tool(name: str, package: str | None = None) -> str:
    path = shutil.which(name)
    if path is not None:
        return path
    why = f"{name} not found (apt-get install -y {package or name})"
    if os.environ.get("CI") == "true":
        pytest.fail(why + " under CI=true")
    pytest.skip(why)
