"""Provider resolvers: how the control loop gets the Provider for one of a customer's
accounts. The simulated resolver backs the demo; the cloud resolver builds real adapters
through ``providers.registry`` (lazily, one per account, cached).

Every provider handed out is behind ``providers.metered`` (the one seam of every job's and
the API's cloud calls): each call is counted per (cloud, account, region, verb) and, for
the real clouds, takes a token of the (cloud, account, region) budget of the process's
``providers.ratelimit.LIMITER``. A shared account is one budget whichever customer's
provider calls it; a customer's own account is its own."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from controlplane.lifecycle.health import Probe
from controlplane.probes import ProbeTarget
from controlplane.store.models import Account as AccountRow
from providers.base import Provider
from providers.credentials import ExternalIdGenerator
from providers.errors import AuthFailed, Scope
from providers.metered import metered
from providers.ratelimit import LIMITER, RateLimiter
from providers.registry import ProviderUnavailable, build_provider
from providers.retry import DEFAULT_POLICY, RetryPolicy
from providers.sim import SimCloud, SimProvider
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner

log = structlog.get_logger("gpucap.resolvers")


def account_model(row: AccountRow) -> Account:
    return Account(
        name=row.name,
        cloud=Cloud(row.cloud),
        owner=Owner(row.owner),
        regions=list((row.regions or {}).get("regions", [])),
        credentials=Credentials(**(row.credentials_ref or {})),
    )


@dataclass
class SimResolver:
    """Every account maps onto the one simulated world. A customer-owned account is keyed
    by customer and name, so two customers' accounts never see each other's instances."""

    world: SimCloud
    retry: RetryPolicy = DEFAULT_POLICY  # in-call retries of throttled/transient creates
    # The simulated cloud has no documented budget, and the simulator runs on virtual
    # time (a limiter sleeping on the wall clock would distort it): counted, not limited,
    # unless a limiter is given.
    limiter: RateLimiter | None = None
    _cache: dict[tuple[str, str], Provider] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def provider(self, customer: str, account: AccountRow) -> Provider:
        key = account.name if account.owner == Owner.SHARED else f"{customer}/{account.name}"
        with self._lock:
            if (customer, account.name) not in self._cache:
                self._cache[(customer, account.name)] = metered(
                    SimProvider(Cloud(account.cloud), key, self.world, retry=self.retry),
                    self.limiter,
                )
            return self._cache[(customer, account.name)]


@dataclass
class SimHealth:
    """The simulated cloud's engines, probed as the HTTP prober probes real ones."""

    world: SimCloud

    def probe(self, targets: Sequence[ProbeTarget]) -> Mapping[str, Probe]:
        out = {}
        for t in targets:
            serving = self.world.serving(t.instance_id)
            held = self.world.held(t.instance_id) if serving and t.read_load else None
            out[t.node_id] = Probe(serving, held)
        return out


@dataclass
class CloudResolver:
    external_ids: ExternalIdGenerator
    endpoints: Mapping[Cloud, str] = field(default_factory=dict)
    limiter: RateLimiter | None = LIMITER  # the process's budgets (None: unlimited)
    _cache: dict[tuple[str, str, str], Provider] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _unavailable: set[tuple[str, str, str]] = field(default_factory=set)  # logged once each

    def provider(self, customer: str, account: AccountRow) -> Provider:
        # Keyed by the credential reference too, so a policy change that points an account
        # at another role or profile builds a new client.
        key = (customer, account.name, repr(sorted((account.credentials_ref or {}).items())))
        with self._lock:
            if key not in self._cache:
                model = account_model(account)
                aws_customer = model.cloud == Cloud.AWS and model.owner == Owner.CUSTOMER
                try:
                    built = build_provider(
                        model,
                        customer=customer,
                        external_id=self.external_ids.for_customer(customer)
                        if aws_customer
                        else None,
                        endpoint_url=self.endpoints.get(model.cloud),
                    )
                except ProviderUnavailable as exc:
                    # Every job asks again each tick: the operator hears it once (the
                    # message names the package extra a missing SDK needs).
                    if key not in self._unavailable:
                        self._unavailable.add(key)
                        log.error(
                            "provider.unavailable",
                            customer=customer,
                            account=account.name,
                            cloud=model.cloud.value,
                            error=str(exc),
                        )
                    raise AuthFailed(
                        str(exc), code="AdapterUnavailable", scope=Scope.ACCOUNT
                    ) from exc
                shared = model.owner == Owner.SHARED
                budget = account.name if shared else f"{customer}/{account.name}"
                self._cache[key] = metered(built, self.limiter, account_key=budget)
            return self._cache[key]
