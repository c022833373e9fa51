"""Builds the :class:`~providers.base.Provider` for an account, importing only that cloud's SDK.

Each cloud package (``providers.aws``, ``providers.gcp``, ``providers.oci``) exposes one
function with the same signature as :func:`build_provider` below (minus ``sim``; checked by
``tests/contract/test_provider_shape.py``); the
registry imports the package on first use, so a deployment that only uses AWS never loads
google-cloud-compute or oci. ``sim`` selects the simulated cloud instead (the demo, the
simulator and end-to-end tests): same interface, same contract suite.

Each cloud's SDK is an optional extra of the package (``gpucap[aws]``, ``[gcp]``, ``[oci]``,
``[all]``). The adapters import their SDK only inside functions, so a missing SDK would
otherwise surface as an ImportError deep in a job's first cloud call; building a provider
checks first and raises :class:`ProviderUnavailable` naming the extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from providers.base import Provider
from schema.policy import Account
from schema.types import Cloud

if TYPE_CHECKING:
    from providers.sim import SimCloud

# cloud -> module exposing ``build_provider(account, *, customer, external_id, endpoint_url)``
ADAPTERS: dict[Cloud, str] = {
    Cloud.AWS: "providers.aws",
    Cloud.GCP: "providers.gcp",
    Cloud.OCI: "providers.oci",
}


# cloud -> (the package extra that installs its SDK, the modules its adapter imports)
SDKS: dict[Cloud, tuple[str, tuple[str, ...]]] = {
    Cloud.AWS: ("aws", ("boto3", "botocore")),
    Cloud.GCP: ("gcp", ("google.cloud.compute_v1", "google.api_core", "google.auth", "requests")),
    Cloud.OCI: ("oci", ("oci",)),
}


class ProviderUnavailable(RuntimeError):
    """The adapter for a cloud cannot be loaded (not built yet, or its SDK is missing)."""


def missing_sdk(cloud: Cloud) -> str | None:
    """The first module of ``cloud``'s SDK that cannot be imported, or None when all can.
    Looks the modules up without importing them (a parent package, such as the
    ``google.cloud`` namespace, is imported to search it)."""
    for module in SDKS[cloud][1]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a parent package is missing
            found = False
        if not found:
            return module
    return None


def build_provider(
    account: Account,
    *,
    customer: str,
    external_id: str | None,
    endpoint_url: str | None = None,
    sim: SimCloud | None = None,
) -> Provider:
    """The provider for ``account`` of ``customer``.

    ``external_id`` is the one gpucap generated for ``customer``
    (:class:`providers.credentials.ExternalIdGenerator`); only AWS customer-owned accounts
    use it. ``endpoint_url`` points the SDK at an emulator (moto, the GCP/OCI fakes).
    """
    if sim is not None:
        from providers.sim import SimProvider

        return SimProvider(account.cloud, account.name, sim, prices=dict(account.prices))
    missing = missing_sdk(account.cloud)
    if missing is not None:
        extra = SDKS[account.cloud][0]
        raise ProviderUnavailable(
            f"account {account.name!r} is on {account.cloud.value}, whose SDK is not installed "
            f"(no module {missing!r}): install the {extra!r} extra, pip install "
            f"'gpucap[{extra}]' (or the image built with --build-arg EXTRAS={extra} or all)"
        )
    return _builder(account.cloud)(
        account, customer=customer, external_id=external_id, endpoint_url=endpoint_url
    )


def _builder(cloud: Cloud) -> Callable[..., Provider]:
    modname = ADAPTERS[cloud]
    try:
        module = importlib.import_module(modname)
    except ImportError as exc:
        raise ProviderUnavailable(f"cannot load the {cloud.value} adapter: {exc}") from exc
    fn: Any = getattr(module, "build_provider", None)
    if fn is None:
        raise ProviderUnavailable(f"{modname} has no build_provider()")
    return cast(Callable[..., Provider], fn)
