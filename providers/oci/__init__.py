"""Oracle Cloud (OCI) adapter: Core Services compute, Identity, Object Storage through the
``oci`` SDK. The SDK is imported only inside this package's functions, on first use, so a
deployment that never touches OCI never loads it (``providers.registry``).

Modules: ``session`` (identity from a reference, clients, the one call path with explicit
retry strategies), ``errors`` (the only place that knows OCI error codes), ``instances``,
``offerings``, ``images``, ``objects``, ``provider`` (the :class:`~providers.base.Provider`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from providers.base import Provider
    from schema.policy import Account


def build_provider(
    account: Account,
    *,
    customer: str,
    external_id: str | None,
    endpoint_url: str | None = None,
    **options: Any,
) -> Provider:
    """The provider for an OCI account (``providers.registry`` signature).

    ``customer`` and ``external_id`` are unused: OCI has no ExternalId; a customer tenancy is
    reached through its own profile or through cross-tenancy policies that admit our principal
    (clouds.md §C). ``endpoint_url`` points every service at an emulator and may contain
    ``{region}``. ``options``: ``config_file``, ``retry_policy``, ``timeout_s``
    (see ``OciProvider``).
    """
    del customer, external_id
    from providers.oci.provider import OciProvider

    return OciProvider(account, endpoint_url=endpoint_url, **options)
