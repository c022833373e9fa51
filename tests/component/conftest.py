"""Fixtures the component tests share."""

from tests.fakes.prometheus_server import prometheus  # noqa: F401  (session fixture)
