"""The one seam every cloud call of the daemon goes through: :class:`MeteredProvider` wraps
a :class:`~providers.base.Provider` (``controlplane.resolvers`` wraps each one it hands
out), takes a token from the (cloud, account, region) budget
(:mod:`providers.ratelimit`) and counts the call per (cloud, account, region, verb) in
:data:`CALLS`, which ``controlplane.telemetry`` exports as ``gpucap_cloud_calls_total``.

A verb is counted once per call of the interface, before it is made (so a call that fails is
counted too), and once more for each of the adapter's in-call retries (``providers.retry``
calls back through ``ATTEMPT_HOOK``, so a retry also waits for its own token). A verb an
adapter serves with several requests (OCI's listing reads the VNICs of its running
instances too) counts as one.

Object storage verbs (S3/GCS/OCI Object Storage, weight staging) are counted but not
limited: they are another service with budgets of their own (S3 counts per prefix).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from providers.base import CloudNode, CreateResult, Image, NodeRequest, Offering, Provider
from providers.ratelimit import CallKind, RateLimiter
from providers.retry import ATTEMPT_HOOK
from schema.types import Cloud

T = TypeVar("T")

CallKey = tuple[str, str, str, str]  # (cloud, account, region, verb)


class CallCounts:
    """Cloud calls made by this process, per (cloud, account, region, verb); thread-safe."""

    def __init__(self) -> None:
        self._counts: dict[CallKey, int] = {}
        self._lock = threading.Lock()

    def add(self, key: CallKey, n: int = 1) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + n

    def snapshot(self) -> dict[CallKey, int]:
        with self._lock:
            return dict(self._counts)

    def total(
        self,
        *,
        cloud: str | None = None,
        account: str | None = None,
        region: str | None = None,
        verb: str | None = None,
    ) -> int:
        """The calls matching every label given."""
        want = (cloud, account, region, verb)
        return sum(
            n
            for key, n in self.snapshot().items()
            if all(w is None or w == k for w, k in zip(want, key, strict=True))
        )


# The process's counts (one daemon per process; tests read differences).
CALLS = CallCounts()

# Staging's verbs (providers.base.ObjectStore): forwarded only when the wrapped provider has
# them, so ``isinstance(p, ObjectStore)`` answers for the provider inside.
_OBJECT_VERBS = frozenset({"list_objects", "copy_step", "delete_objects"})


class MeteredProvider:
    """A provider whose every call is budgeted and counted (see the module's docstring).
    Anything not in the interface is forwarded unmetered."""

    def __init__(
        self,
        inner: Provider,
        *,
        limiter: RateLimiter | None,
        counts: CallCounts = CALLS,
        account_key: str | None = None,
    ) -> None:
        self.inner = inner
        self.cloud: Cloud = inner.cloud
        self.account: str = inner.account
        self._limiter = limiter
        self._counts = counts
        # The budget is the cloud account's: a shared account seen through several
        # customers' providers is one budget (``account_key``, default its name).
        self._key = account_key or inner.account

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name in _OBJECT_VERBS:
            fn = value

            def metered(region: str, *args: Any, **kwargs: Any) -> Any:
                return self._call(name, region, None, lambda: fn(region, *args, **kwargs))

            return metered
        return value

    def _call(
        self, verb: str, region: str | Sequence[str], kind: CallKind | None, fn: Callable[[], T]
    ) -> T:
        regions = [region] if isinstance(region, str) else list(region)

        def request() -> None:
            for where in regions:
                if kind is not None and self._limiter is not None:
                    self._limiter.acquire(self.cloud.value, self._key, where, kind)
                self._counts.add((self.cloud.value, self._key, where, verb))

        request()
        # The adapter's retries (``providers.retry``) call ``request`` again per attempt.
        token = ATTEMPT_HOOK.set(request)
        try:
            return fn()
        finally:
            ATTEMPT_HOOK.reset(token)

    # -- instances ---------------------------------------------------------------------

    def create_node(self, request: NodeRequest) -> CreateResult:
        return self._call(
            "create", request.region, CallKind.WRITE, lambda: self.inner.create_node(request)
        )

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        return self._call(
            "describe",
            region,
            CallKind.READ,
            lambda: self.inner.describe_node(region, instance_id),
        )

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return self._call(
            "list", region, CallKind.READ, lambda: self.inner.list_nodes(region, tags)
        )

    def terminate_node(self, region: str, instance_id: str) -> None:
        self._call(
            "terminate",
            region,
            CallKind.WRITE,
            lambda: self.inner.terminate_node(region, instance_id),
        )

    def stop_node(self, region: str, instance_id: str) -> None:
        self._call(
            "stop", region, CallKind.WRITE, lambda: self.inner.stop_node(region, instance_id)
        )

    def start_node(self, region: str, instance_id: str) -> None:
        self._call(
            "start", region, CallKind.WRITE, lambda: self.inner.start_node(region, instance_id)
        )

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        # One token and one count per region: the adapters read each region apart.
        return self._call(
            "offerings", regions, CallKind.READ, lambda: self.inner.list_offerings(regions)
        )

    def delete_placement_group(self, region: str, placement_group: str) -> None:
        self._call(
            "delete_placement_group",
            region,
            CallKind.WRITE,
            lambda: self.inner.delete_placement_group(region, placement_group),
        )

    # -- images ------------------------------------------------------------------------

    def create_image(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image:
        return self._call(
            "create_image",
            region,
            CallKind.WRITE,
            lambda: self.inner.create_image(region, source_instance_id, name, tags),
        )

    def list_images(self, region: str, tags: Mapping[str, str]) -> list[Image]:
        return self._call(
            "list_images", region, CallKind.READ, lambda: self.inner.list_images(region, tags)
        )

    def describe_image(self, region: str, image_id: str) -> Image | None:
        return self._call(
            "describe_image",
            region,
            CallKind.READ,
            lambda: self.inner.describe_image(region, image_id),
        )

    def delete_image(self, region: str, image_id: str) -> None:
        self._call(
            "delete_image",
            region,
            CallKind.WRITE,
            lambda: self.inner.delete_image(region, image_id),
        )

    # -- objects (counted, not limited: see the module's docstring) -----------------------

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        self._call("copy_object", "", None, lambda: self.inner.copy_object(source_uri, dest_uri))


def metered(
    provider: Provider, limiter: RateLimiter | None, *, account_key: str | None = None
) -> Provider:
    """``provider`` behind the seam (typed as the interface it keeps)."""
    out: Provider = MeteredProvider(provider, limiter=limiter, account_key=account_key)
    return out
