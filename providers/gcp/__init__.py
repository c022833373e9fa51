"""The GCP adapter (google-cloud-compute, REST transport).

Modules, one job each: ``session`` (credentials incl. service-account impersonation, REST
clients), ``instances`` (find-or-create, describe, list, terminate), ``operations`` (our own
operation polling), ``offerings``, ``images``, ``objects`` (GCS server-side copy), ``labels``
(names, labels, request ids derived from the intent), ``errors`` (the only place that knows
GCP error codes), ``provider`` (the composed ``Provider``).

Importing this package loads no Google SDK; :func:`build_provider` does, on first use, so a
deployment that never uses GCP never imports google-cloud-compute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schema.policy import Account
from schema.types import Cloud, Owner

if TYPE_CHECKING:
    from providers.gcp.provider import GcpProvider


def build_provider(
    account: Account,
    *,
    customer: str,
    external_id: str | None,
    endpoint_url: str | None = None,
) -> GcpProvider:
    """The provider for a GCP ``account``. GCP has no ExternalId (clouds.md §C), so
    ``external_id`` is ignored; customer-owned projects are reached by impersonating the
    account's ``service_account``. ``endpoint_url`` points every client (Compute, Storage,
    IAM Credentials) at an emulator."""
    del external_id, customer  # the customer is on every node's labels, via the request tags
    from providers.gcp.provider import GcpProvider
    from providers.gcp.session import GcpSession

    if account.cloud != Cloud.GCP:
        raise ValueError(f"account {account.name!r} is {account.cloud.value}, not gcp")
    creds = account.credentials
    if not creds.project:
        raise ValueError(f"account {account.name!r}: a gcp account needs credentials.project")
    if account.owner == Owner.CUSTOMER and not creds.service_account:
        raise ValueError(
            f"account {account.name!r}: a customer-owned gcp account needs "
            "credentials.service_account to impersonate"
        )
    session = GcpSession(
        project=creds.project,
        account=account.name,
        service_account=creds.service_account,
        endpoint_url=endpoint_url,
    )
    return GcpProvider(session, prices=account.prices)
