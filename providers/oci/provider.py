"""``OciProvider``: one OCI account (tenancy + compartment) behind
:class:`providers.base.Provider`, and the registry's ``build_provider``.

This is the one place OCI calls are retried: every verb runs inside
:func:`providers.retry.call_with_retry` (Throttled and TransientError only), while every SDK
call underneath makes one attempt with the SDK's retries off (``session.py``). A create is
retried as a whole find-or-launch, so an attempt after a lost response finds instead of
launching.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from providers.base import (
    CloudNode,
    CopyStep,
    CreateResult,
    Image,
    NodeRequest,
    Offering,
    StoredObject,
)
from providers.oci import placement
from providers.oci.images import Images
from providers.oci.instances import Instances
from providers.oci.objects import Objects, Staging
from providers.oci.offerings import list_offerings
from providers.oci.session import TIMEOUT_S, OciSession
from providers.retry import DEFAULT_POLICY, RetryPolicy, call_with_retry
from schema.policy import Account
from schema.types import Cloud

T = TypeVar("T")


class OciProvider:
    """See ``providers/base.py`` for each method's contract."""

    cloud = Cloud.OCI

    def __init__(
        self,
        account: Account,
        *,
        endpoint_url: str | None = None,
        config_file: str | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
        timeout_s: tuple[float, float] = TIMEOUT_S,
    ) -> None:
        self.account = account.name
        self.retry = retry
        self.session = OciSession(
            account, endpoint_url=endpoint_url, config_file=config_file, timeout_s=timeout_s
        )
        self.prices = dict(account.prices)
        self.instances = Instances(self.session)
        self._images = Images(self.session)
        self._objects = Objects(self.session)
        self._staging = Staging(self.session)

    def __repr__(self) -> str:  # never the session's config or signer
        return f"OciProvider(account={self.account!r})"

    def _retried(self, what: str, fn: Callable[[], T]) -> T:
        return call_with_retry(fn, self.retry, what=f"oci.{what}")

    def create_node(self, request: NodeRequest) -> CreateResult:
        return self._retried("create_node", lambda: self.instances.create(request))

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        return self._retried("describe_node", lambda: self.instances.describe(region, instance_id))

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return self._retried("list_nodes", lambda: self.instances.list_tagged(region, tags))

    def terminate_node(self, region: str, instance_id: str) -> None:
        self._retried("terminate_node", lambda: self.instances.terminate(region, instance_id))

    def stop_node(self, region: str, instance_id: str) -> None:
        self._retried("stop_node", lambda: self.instances.action(region, instance_id, "STOP"))

    def start_node(self, region: str, instance_id: str) -> None:
        self._retried("start_node", lambda: self.instances.action(region, instance_id, "START"))

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        return self._retried(
            "list_offerings", lambda: list_offerings(self.session, regions, self.prices)
        )

    def create_image(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image:
        return self._retried(
            "create_image", lambda: self._images.create(region, source_instance_id, name, tags)
        )

    def list_images(self, region: str, tags: Mapping[str, str]) -> list[Image]:
        return self._retried("list_images", lambda: self._images.list(region, tags))

    def describe_image(self, region: str, image_id: str) -> Image | None:
        return self._retried("describe_image", lambda: self._images.describe(region, image_id))

    def delete_image(self, region: str, image_id: str) -> None:
        self._retried("delete_image", lambda: self._images.delete(region, image_id))

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        self._retried("copy_object", lambda: self._objects.copy(source_uri, dest_uri))

    def list_objects(self, region: str, uri: str) -> list[StoredObject]:
        return self._retried(f"list objects {uri}", lambda: self._staging.list_objects(uri))

    def copy_step(
        self,
        region: str,
        source: StoredObject,
        dest_uri: str,
        resume: Mapping[str, Any],
        max_bytes: int,
    ) -> CopyStep:
        return self._retried(
            f"copy step {dest_uri}",
            lambda: self._staging.copy_step(source, dest_uri, resume, max_bytes),
        )

    def delete_objects(self, region: str, uri: str) -> None:
        self._retried(f"delete objects {uri}", lambda: self._staging.delete_objects(uri))

    def delete_placement_group(self, region: str, placement_group: str) -> None:
        # No API call: OCI has no placement object (placement.py), so nothing to retry.
        placement.delete_placement_group(region, placement_group)


def build_provider(
    account: Account,
    *,
    customer: str,
    external_id: str | None,
    endpoint_url: str | None = None,
) -> OciProvider:
    """The provider for an OCI account (``providers.registry`` signature, the same for every
    cloud; tests that need a config file, a retry policy or timeouts build ``OciProvider``).

    ``customer`` and ``external_id`` are unused: OCI has no ExternalId; a customer tenancy is
    reached through its own profile or through cross-tenancy policies that admit our principal
    (clouds.md §C). ``endpoint_url`` points every service at an emulator and may contain
    ``{region}``.
    """
    del customer, external_id
    return OciProvider(account, endpoint_url=endpoint_url)
