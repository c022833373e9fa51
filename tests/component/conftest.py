"""Fixtures the component tests share."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.store.db import Store
from controlplane.store.migrate import upgrade
from tests.fakes.prometheus_server import prometheus  # noqa: F401  (session fixture)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A migrated store on SQLite only (the ``store`` fixture runs on both backends)."""
    url = f"sqlite:///{tmp_path / 'gpucap.db'}"
    upgrade(url)
    store = Store.from_url(url)
    yield store
    store.close()
