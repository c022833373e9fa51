"""boto3 sessions and clients for one AWS account.

- gpucap's shared accounts: the default credential chain, or a named ``profile``.
- customer-owned accounts: STS AssumeRole on the customer's ``role_arn`` with the ExternalId
  gpucap generated for that customer (clouds.md §C). The assumed-role credentials are
  *refreshable*: botocore fetches them on first use and again before they expire, and they
  live only in memory. Nothing here logs a key, a token or the ExternalId secret.

Every client is fail-fast: botocore's retries are off (``total_max_attempts: 1``). botocore
would retry ``InsufficientInstanceCapacity`` as a 5xx for up to 18 s (clouds.md §E.1) when
placement wants to hear about the stockout at once, and retries at two levels multiply the
requests a throttled API sees. Throttled and transient errors are retried by
``providers.retry`` around each verb, in ``provider.py`` only.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import structlog

from schema.policy import Credentials

if TYPE_CHECKING:
    import boto3

log = structlog.get_logger(__name__)

ASSUME_ROLE_DURATION_S = 3600  # clouds.md §C: DurationSeconds 900..3600
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 30

# botocore at DEBUG logs request headers (X-Amz-Security-Token) and raw response bodies
# (AssumeRole's SecretAccessKey/SessionToken): a daemon run with --log-level debug would
# write live credentials to its logs. The SDK loggers are floored at INFO, which logs no
# values (tests/providers/aws/test_secret_hygiene.py greps for them).
SDK_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3")


def floor_sdk_log_levels() -> None:
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.INFO:  # NOTSET (0) included: it would inherit DEBUG
            logger.setLevel(logging.INFO)


class AwsSession:
    """Owns the boto3 session for one account and hands out cached, thread-safe clients."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        customer: str,
        account: str,
        external_id: str | None,
        home_region: str,
        endpoint_url: str | None = None,
        role_duration_s: int = ASSUME_ROLE_DURATION_S,
    ) -> None:
        if credentials.role_arn and not external_id:
            raise ValueError(
                f"account {account!r}: assuming a customer role needs the ExternalId gpucap "
                "generated for the customer (providers.credentials.ExternalIdGenerator)"
            )
        floor_sdk_log_levels()
        self.credentials = credentials
        self.customer = customer
        self.account = account
        self.home_region = home_region
        self.endpoint_url = endpoint_url
        self.role_duration_s = role_duration_s
        self._external_id = external_id
        self._lock = threading.Lock()
        self._session: boto3.Session | None = None
        self._clients: dict[tuple[str, str], Any] = {}

    @property
    def role_session_name(self) -> str:
        # Customer and account in the session name make CloudTrail auditable (clouds.md §C).
        return f"gpucap-{self.customer}-{self.account}"[:64]

    def client(self, service: str, region: str) -> Any:
        """A fail-fast client for ``service`` in ``region`` (no SDK-level retries)."""
        key = (service, region)
        with self._lock:
            found = self._clients.get(key)
            if found is None:
                try:
                    found = self._boto3_session().client(
                        service,
                        region_name=region,
                        endpoint_url=self.endpoint_url,
                        config=_client_config(),
                    )
                except Exception as exc:  # e.g. a profile missing from the AWS config
                    from providers.aws.errors import from_botocore

                    raise from_botocore(exc, region=region) from exc
                self._clients[key] = found
            return found

    def _boto3_session(self) -> boto3.Session:
        if self._session is None:
            self._session = self._make_session()
        return self._session

    def _make_session(self) -> boto3.Session:
        import boto3

        base = boto3.Session(profile_name=self.credentials.profile)
        if not self.credentials.role_arn:
            return base
        return _assumed_role_session(
            base,
            role_arn=self.credentials.role_arn,
            session_name=self.role_session_name,
            external_id=self._external_id or "",
            region=self.home_region,
            endpoint_url=self.endpoint_url,
            duration_s=self.role_duration_s,
        )


def _client_config() -> Any:
    from botocore.config import Config

    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        user_agent_extra="gpucap",
    )


def _assumed_role_session(
    base: boto3.Session,
    *,
    role_arn: str,
    session_name: str,
    external_id: str,
    region: str,
    endpoint_url: str | None,
    duration_s: int,
) -> boto3.Session:
    """A session whose credentials come from AssumeRole, fetched lazily and refreshed by
    botocore before expiry (``DeferredRefreshableCredentials``)."""
    import boto3
    import botocore.session
    from botocore.credentials import (
        CredentialProvider,
        CredentialResolver,
        DeferredRefreshableCredentials,
    )

    sts = base.client("sts", region_name=region, endpoint_url=endpoint_url, config=_client_config())

    def fetch() -> dict[str, str]:
        resp = sts.assume_role(
            RoleArn=role_arn,
            RoleSessionName=session_name,
            ExternalId=external_id,
            DurationSeconds=duration_s,
        )
        creds = resp["Credentials"]
        expiry = creds["Expiration"]
        log.info(
            "aws.assume_role",
            role_arn=role_arn,
            session_name=session_name,
            expires=str(expiry),
        )
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": expiry.isoformat() if hasattr(expiry, "isoformat") else str(expiry),
        }

    refreshable = DeferredRefreshableCredentials(refresh_using=fetch, method="sts-assume-role")

    class _AssumedRole(CredentialProvider):  # type: ignore[misc]
        METHOD = "gpucap-assume-role"
        CANONICAL_NAME = "gpucap-assume-role"

        def load(self) -> Any:
            return refreshable

    core = botocore.session.Session()
    core.register_component("credential_provider", CredentialResolver([_AssumedRole()]))
    return boto3.Session(botocore_session=core, region_name=region)
