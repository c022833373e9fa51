"""One OCI account's identity and SDK clients, and the one way adapter code calls the SDK.

Identity comes from a *reference* (``schema.policy.Credentials``), never from key material:
- ``profile``: a section of the operator's OCI config file (``$OCI_CONFIG_FILE``, default
  ``~/.oci/config``). The file names the key file and pass phrase; gpucap reads it when it
  builds the signer and keeps nothing but the SDK objects in memory. This is how gpucap's
  shared tenancies and customer tenancies reached through a dedicated API user are used.
- ``principal: instance | resource``: the control plane's own instance or resource
  principal; customer tenancies then grant it access with cross-tenancy "Endorse/Admit"
  policies and calls name the customer's compartment directly (clouds.md §C).

Every call goes through :meth:`OciSession.call`, which passes an explicit
``retry_strategy`` (clouds.md §A.5: SDK defaults differ per operation, and
``OCI_SDK_DEFAULT_RETRY_ENABLED=true`` would retry "Out of host capacity" for ten minutes), so
the SDK never retries on its own, and makes exactly one attempt itself: throttling and
transient errors are retried by ``providers.retry`` around each verb, in ``provider.py``
only, so launches fail fast on capacity and a throttled request is never multiplied.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from providers.errors import AuthFailed, ProviderError, Scope
from providers.oci.errors import Where, translate
from schema.policy import Account

T = TypeVar("T")
log = structlog.get_logger(__name__)

DEFAULT_PROFILE = "DEFAULT"
CONFIG_FILE_ENV = "OCI_CONFIG_FILE"
# (connect, read) seconds. Launches of bare-metal shapes answer quickly (the work happens in
# a work request), so a long read timeout only hides a dead endpoint.
TIMEOUT_S = (10.0, 60.0)


@dataclass
class OciSession:
    """Clients for one account, built lazily per (service, region) and reused."""

    account: Account
    endpoint_url: str | None = None  # emulator; may contain "{region}" (one host per region)
    config_file: str | None = None
    timeout_s: tuple[float, float] = TIMEOUT_S
    _identity: tuple[dict[str, Any], Any] | None = field(default=None, repr=False)
    _clients: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def compartment_id(self) -> str:
        comp = self.account.credentials.compartment_id
        if not comp:
            raise AuthFailed(
                f"account {self.account.name}: credentials.compartment_id is required",
                "MissingCompartment",
                Scope.ACCOUNT,
            )
        return comp

    @property
    def home_region(self) -> str:
        return self.account.regions[0]

    # --- clients ---------------------------------------------------------------------------

    def compute(self, region: str) -> Any:
        return self._client("compute", region)

    def identity(self, region: str) -> Any:
        return self._client("identity", region)

    def network(self, region: str) -> Any:
        return self._client("network", region)

    def object_storage(self, region: str) -> Any:
        return self._client("object_storage", region)

    def limits(self, region: str) -> Any:
        return self._client("limits", region)

    def tenancy_id(self) -> str | None:
        """The tenancy whose service limits apply: the account's (a customer's tenancy for a
        customer-owned account), else the signing identity's own."""
        if self.account.credentials.tenancy:
            return self.account.credentials.tenancy
        config, signer = self.load_identity()
        return config.get("tenancy") or getattr(signer, "tenancy_id", None)

    def _client(self, service: str, region: str) -> Any:
        with self._lock:
            client = self._clients.get((service, region))
            if client is not None:
                return client
            import oci

            config, signer = self.load_identity()
            cls = {
                "compute": oci.core.ComputeClient,
                "identity": oci.identity.IdentityClient,
                "network": oci.core.VirtualNetworkClient,
                "object_storage": oci.object_storage.ObjectStorageClient,
                "limits": oci.limits.LimitsClient,
            }[service]
            kwargs: dict[str, Any] = {
                "signer": signer,
                # Client-wide default as a backstop; every call also passes one explicitly.
                "retry_strategy": oci.retry.NoneRetryStrategy(),
                "timeout": self.timeout_s,
            }
            if self.endpoint_url:
                kwargs["service_endpoint"] = self.endpoint_url.replace("{region}", region)
            try:
                client = cls({**config, "region": region}, **kwargs)
            except Exception as exc:
                err = translate(exc, Where(region=region))
                if err is None:
                    raise
                raise err from None
            self._clients[(service, region)] = client
            return client

    def load_identity(self) -> tuple[dict[str, Any], Any]:
        """(config, signer) from the account's reference. Built once; never logged. Raises
        AuthFailed when the profile, key file or pass phrase is unusable."""
        if self._identity is not None:
            return self._identity
        import oci

        creds = self.account.credentials
        try:
            if creds.principal == "instance":
                # clouds.md §C: a dynamic-group identity, no key file. Config validation is
                # skipped for this signer (clouds.md §E.3), so the config needs only a region.
                signer = oci.auth.signers.InstancePrincipalsSecurityTokenSigner()
                config: dict[str, Any] = {"region": self.home_region}
            elif creds.principal == "resource":
                signer = oci.auth.signers.get_resource_principals_signer()
                config = {"region": self.home_region}
            else:
                location = self.config_file or os.environ.get(CONFIG_FILE_ENV)
                config = oci.config.from_file(
                    file_location=location or oci.config.DEFAULT_LOCATION,
                    profile_name=creds.profile or DEFAULT_PROFILE,
                )
                signer = oci.signer.Signer.from_config(config)
        except Exception as exc:
            err = translate(exc, Where(region=self.home_region))
            if err is None:
                raise
            log.warning(
                "oci.credentials_unusable",
                account=self.account.name,
                profile=creds.profile,
                principal=creds.principal,
                error=err.code,
            )
            raise err from None
        self._identity = (config, signer)
        return self._identity

    # --- calls -----------------------------------------------------------------------------

    def call(
        self, what: str, fn: Callable[..., Any], *args: Any, where: Where, **kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)``: one attempt with the SDK's retries off, errors typed."""
        import oci

        try:
            return fn(*args, retry_strategy=oci.retry.NoneRetryStrategy(), **kwargs)
        except Exception as exc:
            err = translate(exc, where)
            if err is None:
                raise
            self._log_failure(what, where, err)
            raise err from None

    def _log_failure(self, what: str, where: Where, err: ProviderError) -> None:
        log.info(
            "oci.call_failed",
            what=what,
            account=self.account.name,
            region=where.region,
            kind=err.kind,
            code=err.code,
            opc_request_id=err.details.get("opc_request_id"),
        )

    def list_all(
        self, what: str, fn: Callable[..., Any], *args: Any, where: Where, **kwargs: Any
    ) -> list[Any]:
        """Every page of a list call (``oci.pagination``), each page with retries off."""
        import oci

        try:
            return list(
                oci.pagination.list_call_get_all_results(
                    fn, *args, retry_strategy=oci.retry.NoneRetryStrategy(), **kwargs
                ).data
            )
        except Exception as exc:
            err = translate(exc, where)
            if err is None:
                raise
            self._log_failure(what, where, err)
            raise err from None
