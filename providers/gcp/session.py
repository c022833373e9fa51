"""Credentials and REST clients for one GCP project.

- gpucap's shared projects: Application Default Credentials (``google.auth.default``).
- customer-owned projects: service-account impersonation (clouds.md §C). The customer grants
  gpucap's control-plane identity ``roles/iam.serviceAccountTokenCreator`` on *their*
  service account; gpucap builds ``impersonated_credentials.Credentials`` from its own ADC
  and the customer's SA email. GCP has no ExternalId, so the confused-deputy defence is ours:
  the target SA must live in the account's own project (``NAME@PROJECT.iam.gserviceaccount.com``),
  and both come from the onboarded policy, never from a request.
- against an emulator (``endpoint_url``): anonymous credentials for shared projects (they
  send no ``Authorization`` header, clouds.md §E.2) and, for impersonation, a fixed emulator
  source token (:data:`EMULATOR_SOURCE_TOKEN`) whose ``generateAccessToken`` call goes to the
  emulator too (``iam_endpoint_override``).

Tokens live only inside the google-auth credential objects, in memory, until they expire;
nothing here stores or logs one, and ``repr`` of the session shows references only.

Every client is the REST transport, and callers poll operations with *our own*
``ZoneOperationsClient``/``RegionOperationsClient``/``GlobalOperationsClient`` built with the
same options (§E.2
pitfall 1: the ExtendedOperation's internal client ignores ``client_options``).

Operations are waited for here too, with those clients: ``zoneOperations.wait`` /
``globalOperations.wait`` are best effort and return after about two minutes even when the
operation is not DONE (clouds.md §A.4), so they are called in a loop until DONE or our own
deadline, the way SkyPilot's ``wait_for_operation`` does. The caller then *always* inspects
``error`` on the finished operation (``errors.operation_failed``): a stockout exists only
there (§A.4, §E.2 pitfall 3). Every call passes ``retry=None``: api_core's own retry is off,
and ``provider.py`` is the one retry layer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from providers.errors import InvalidRequest, Scope

log = structlog.get_logger(__name__)

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
IMPERSONATION_LIFETIME_S = 3600  # clouds.md §C: lifetime=3600
STORAGE_ENDPOINT = "https://storage.googleapis.com"
# The source identity gpucap presents to an emulator's generateAccessToken. Not a secret: it
# is only ever accepted by a test emulator that registered it.
EMULATOR_SOURCE_TOKEN = "gpucap-emulator-source-identity"

CLIENTS = (
    "InstancesClient",
    "ZoneOperationsClient",
    "RegionOperationsClient",
    "GlobalOperationsClient",
    "ResourcePoliciesClient",
    "MachineTypesClient",
    "ZonesClient",
    "RegionsClient",
    "ImagesClient",
    "ProjectsClient",
)


class GcpSession:
    """Owns the credentials of one project and hands out cached, thread-safe REST clients."""

    def __init__(
        self,
        *,
        project: str,
        account: str,
        service_account: str | None = None,
        endpoint_url: str | None = None,
        source_credentials: Any = None,
    ) -> None:
        if service_account and not service_account.endswith(f"@{project}.iam.gserviceaccount.com"):
            raise InvalidRequest(
                f"account {account!r}: service_account {service_account!r} is not in project "
                f"{project!r}; gpucap only impersonates a service account that lives in the "
                "account's own project (confused-deputy guard, clouds.md §C)",
                code="serviceAccountOutsideProject",
                scope=Scope.ACCOUNT,
            )
        self.project = project
        self.account = account
        self.service_account = service_account
        self.endpoint_url = endpoint_url.rstrip("/") if endpoint_url else None
        self._source_credentials = source_credentials
        self._lock = threading.Lock()
        self._credentials: Any = None
        self._clients: dict[str, Any] = {}
        self._http: Any = None

    def __repr__(self) -> str:  # references only
        return (
            f"GcpSession(project={self.project!r}, account={self.account!r}, "
            f"service_account={self.service_account!r}, endpoint_url={self.endpoint_url!r})"
        )

    @property
    def storage_endpoint(self) -> str:
        return self.endpoint_url or STORAGE_ENDPOINT

    # -- credentials ----------------------------------------------------------------------

    def credentials(self) -> Any:
        with self._lock:
            if self._credentials is None:
                self._credentials = self._build_credentials()
            return self._credentials

    def _build_credentials(self) -> Any:
        source = self._source_credentials
        if self.service_account:
            from google.auth import impersonated_credentials

            if source is None:
                source = self._emulator_source() if self.endpoint_url else self._adc()
            override = None
            if self.endpoint_url:
                override = (
                    f"{self.endpoint_url}/v1/projects/-/serviceAccounts/"
                    f"{self.service_account}:generateAccessToken"
                )
            log.info(
                "gcp.impersonation",
                account=self.account,
                project=self.project,
                target_principal=self.service_account,
            )
            return impersonated_credentials.Credentials(
                source_credentials=source,
                target_principal=self.service_account,
                target_scopes=[CLOUD_PLATFORM_SCOPE],
                lifetime=IMPERSONATION_LIFETIME_S,
                delegates=None,
                iam_endpoint_override=override,
            )
        if source is not None:
            return source
        if self.endpoint_url:
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials()
        return self._adc()

    @staticmethod
    def _adc() -> Any:
        import google.auth

        creds, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        return creds

    @staticmethod
    def _emulator_source() -> Any:
        from google.oauth2.credentials import Credentials

        return Credentials(token=EMULATOR_SOURCE_TOKEN)

    # -- clients --------------------------------------------------------------------------

    def client(self, name: str) -> Any:
        """A cached ``compute_v1.<name>`` REST client (e.g. ``"InstancesClient"``)."""
        if name not in CLIENTS:
            raise ValueError(f"unknown compute client {name!r}")
        creds = self.credentials()
        with self._lock:
            found = self._clients.get(name)
            if found is None:
                from google.api_core.client_options import ClientOptions
                from google.cloud import compute_v1

                opts = ClientOptions(api_endpoint=self.endpoint_url) if self.endpoint_url else None
                found = getattr(compute_v1, name)(
                    transport="rest", client_options=opts, credentials=creds
                )
                self._clients[name] = found
            return found

    def http(self) -> Any:
        """An authorized ``requests`` session (Cloud Storage JSON API calls)."""
        creds = self.credentials()
        with self._lock:
            if self._http is None:
                from google.auth.transport.requests import AuthorizedSession

                self._http = AuthorizedSession(creds)
            return self._http


# --- operations ------------------------------------------------------------------------

CALL_TIMEOUT_S = 30.0  # per HTTP call; the loop below bounds the whole wait


def _done(op: Any) -> bool:
    from google.cloud import compute_v1

    return bool(op.status == compute_v1.Operation.Status.DONE)


def wait_zone_operation(
    session: GcpSession,
    zone: str,
    op: Any,
    *,
    deadline_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Any | None:
    """The finished operation, or None when it is still running at the deadline."""
    client = session.client("ZoneOperationsClient")
    return _loop(
        op,
        lambda name: client.wait(
            project=session.project, zone=zone, operation=name, retry=None, timeout=CALL_TIMEOUT_S
        ),
        deadline_s,
        sleep,
    )


def wait_region_operation(
    session: GcpSession,
    region: str,
    op: Any,
    *,
    deadline_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Any | None:
    """The finished operation, or None when it is still running at the deadline."""
    client = session.client("RegionOperationsClient")
    return _loop(
        op,
        lambda name: client.wait(
            project=session.project,
            region=region,
            operation=name,
            retry=None,
            timeout=CALL_TIMEOUT_S,
        ),
        deadline_s,
        sleep,
    )


def wait_global_operation(
    session: GcpSession,
    op: Any,
    *,
    deadline_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Any | None:
    client = session.client("GlobalOperationsClient")
    return _loop(
        op,
        lambda name: client.wait(
            project=session.project, operation=name, retry=None, timeout=CALL_TIMEOUT_S
        ),
        deadline_s,
        sleep,
    )


def _loop(
    op: Any, wait: Callable[[str], Any], deadline_s: float, sleep: Callable[[float], None]
) -> Any | None:
    end = time.monotonic() + deadline_s
    pause = 0.05
    while not _done(op):
        if time.monotonic() >= end:
            return None
        op = wait(op.name)
        if not _done(op):
            # wait() returned early (best effort); do not spin on a server that answers fast.
            sleep(pause)
            pause = min(pause * 2, 2.0)
    return op
