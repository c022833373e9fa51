"""Every cloud package has the same shape, like SkyPilot's ``sky/provision/<cloud>/``: the
same modules, the same ``build_provider`` signature (what ``providers.registry`` calls), and
retries applied in one layer (``provider.py``), so the shape cannot drift again."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from providers.base import Provider
from providers.registry import ADAPTERS
from schema.policy import Account

PROVIDERS = Path(__file__).resolve().parents[2] / "providers"
CLOUDS = ("aws", "gcp", "oci")
MODULES = {
    "__init__",
    "provider",  # the Provider class and build_provider; the one retry layer
    "session",  # credentials and fail-fast SDK clients
    "errors",  # the only place that knows the cloud's error codes
    "instances",
    "placement",  # a gang's placement object (AWS group, GCP policy; OCI: a fault domain)
    "offerings",
    "images",
    "objects",
    "quotas",
    "tags",  # ownership tags and idempotency tokens in the cloud's own form
    "check",  # preflight for `gpucap account check`
}


def shared_signature(
    account: Account,
    *,
    customer: str,
    external_id: str | None,
    endpoint_url: str | None = None,
) -> Provider:
    """The one signature every ``<cloud>.build_provider`` has (the return type may narrow)."""
    raise NotImplementedError


def test_the_registry_dispatches_to_exactly_these_packages() -> None:
    assert sorted(m.removeprefix("providers.") for m in ADAPTERS.values()) == sorted(CLOUDS)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_cloud_package_has_the_same_modules(cloud: str) -> None:
    assert {p.stem for p in (PROVIDERS / cloud).glob("*.py")} == MODULES


@pytest.mark.parametrize("cloud", CLOUDS)
def test_build_provider_has_the_shared_signature(cloud: str) -> None:
    package = importlib.import_module(f"providers.{cloud}")
    got = inspect.signature(package.build_provider, eval_str=True)
    want = inspect.signature(shared_signature, eval_str=True)
    assert list(got.parameters.values()) == list(want.parameters.values())
    cls = got.return_annotation
    verbs = [n for n, v in vars(Provider).items() if inspect.isfunction(v) and n[0] != "_"]
    assert verbs and all(inspect.isfunction(getattr(cls, v, None)) for v in verbs), cls


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_package_only_re_exports_the_provider(cloud: str) -> None:
    package = importlib.import_module(f"providers.{cloud}")
    provider = importlib.import_module(f"providers.{cloud}.provider")
    assert package.build_provider is provider.build_provider
    cls = inspect.signature(package.build_provider, eval_str=True).return_annotation
    assert getattr(package, cls.__name__) is cls
    assert set(package.__all__) == {"build_provider", cls.__name__}
    tree = ast.parse((PROVIDERS / cloud / "__init__.py").read_text())
    defined = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert defined == [], "the provider and build_provider live in provider.py"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_only_provider_py_applies_the_retry_layer(cloud: str) -> None:
    """Retrying at two levels multiplies the requests a throttled API sees; each verb is
    retried once, around the whole verb, in ``provider.py``."""
    callers = sorted(
        p.stem
        for p in (PROVIDERS / cloud).glob("*.py")
        if "call_with_retry"
        in {n.id for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Name)}
    )
    assert callers == ["provider"]
