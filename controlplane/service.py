"""Kept for compatibility: the API moved to :mod:`controlplane.api`."""

from controlplane.api import *  # noqa: F403
