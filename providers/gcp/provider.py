"""``GcpProvider``: one GCP project (shared or customer-owned) behind the provider interface
(``providers.base.Provider``), composed of the per-concern modules of this package, and the
registry's ``build_provider``.

This is the one place GCP calls are retried: every verb runs inside
:func:`providers.retry.call_with_retry` (Throttled and TransientError only), and every
google-cloud-compute call underneath passes ``retry=None`` (api_core's own retry off). A
create is retried as a whole find-or-create, so an attempt after a lost response finds
instead of inserting.
"""

from __future__ import annotations

import time
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
from providers.gcp import errors as gerr
from providers.gcp.images import GcpImages
from providers.gcp.instances import GcpInstances
from providers.gcp.objects import GcsCopier
from providers.gcp.offerings import list_offerings
from providers.gcp.placement import GcpPlacement
from providers.gcp.session import GcpSession
from providers.retry import DEFAULT_POLICY, RetryPolicy, call_with_retry
from schema.policy import Account
from schema.types import Cloud, Owner

T = TypeVar("T")

BASE_IMAGE_FAMILY = (
    "gpucap-gpu-node"  # clouds.md §B: launch from a family, roll back by deprecating
)


class GcpProvider:
    cloud: Cloud = Cloud.GCP

    def __init__(
        self,
        session: GcpSession,
        *,
        prices: Mapping[str, float] | None = None,
        base_image: str | None = None,
        node_service_account: str | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
        op_deadline_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.session = session
        self.account = session.account
        self.prices = dict(prices or {})
        self.retry = retry
        self.base_image = base_image or (
            f"projects/{session.project}/global/images/family/{BASE_IMAGE_FAMILY}"
        )
        self.placement = GcpPlacement(session, op_deadline_s=op_deadline_s, sleep=sleep)
        self.instances = GcpInstances(
            session,
            base_image=self.base_image,
            placement=self.placement,
            node_service_account=node_service_account,
            op_deadline_s=op_deadline_s,
            sleep=sleep,
        )
        self.images = GcpImages(session, op_deadline_s=op_deadline_s, sleep=sleep)
        self.objects = GcsCopier(session)

    def __repr__(self) -> str:
        return f"GcpProvider({self.session!r})"

    def _retried(self, what: str, fn: Callable[[], T]) -> T:
        return call_with_retry(fn, self.retry, what=f"gcp {what}")

    def create_node(self, request: NodeRequest) -> CreateResult:
        return self._retried(f"create {request.intent_id}", lambda: self.instances.create(request))

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        return self._retried(
            f"describe {instance_id}", lambda: self.instances.describe(region, instance_id)
        )

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return self._retried("list", lambda: self.instances.list_tagged(region, tags))

    def terminate_node(self, region: str, instance_id: str) -> None:
        self._retried(
            f"terminate {instance_id}", lambda: self.instances.terminate(region, instance_id)
        )

    def stop_node(self, region: str, instance_id: str) -> None:
        self._retried(f"stop {instance_id}", lambda: self.instances.stop(region, instance_id))

    def start_node(self, region: str, instance_id: str) -> None:
        self._retried(f"start {instance_id}", lambda: self.instances.start(region, instance_id))

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        where = gerr.Where(regions[0] if len(regions) == 1 else None)

        def attempt() -> list[Offering]:
            try:
                return list_offerings(self.session, regions, self.prices)
            except Exception as exc:
                raise gerr.from_exception(exc, where) from exc

        return self._retried("offerings", attempt)

    def create_image(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image:
        return self._retried(
            f"create image {name}",
            lambda: self.images.create(region, source_instance_id, name, tags),
        )

    def list_images(self, region: str, tags: Mapping[str, str]) -> list[Image]:
        return self._retried("list images", lambda: self.images.list(region, tags))

    def describe_image(self, region: str, image_id: str) -> Image | None:
        return self._retried(
            f"describe image {image_id}", lambda: self.images.describe(region, image_id)
        )

    def delete_image(self, region: str, image_id: str) -> None:
        self._retried(f"delete image {image_id}", lambda: self.images.delete(region, image_id))

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        self._retried("gcs copy", lambda: self.objects.copy(source_uri, dest_uri))

    def list_objects(self, region: str, uri: str) -> list[StoredObject]:
        return self._retried(f"gcs list {uri}", lambda: self.objects.list_objects(uri))

    def copy_step(
        self,
        region: str,
        source: StoredObject,
        dest_uri: str,
        resume: Mapping[str, Any],
        max_bytes: int,
    ) -> CopyStep:
        # (a retried call sends the same token: GCS continues the same rewrite)
        return self._retried(
            f"gcs rewrite {dest_uri}",
            lambda: self.objects.copy_step(source, dest_uri, resume, max_bytes),
        )

    def delete_objects(self, region: str, uri: str) -> None:
        self._retried(f"gcs delete {uri}", lambda: self.objects.delete_objects(uri))

    def delete_placement_group(self, region: str, placement_group: str) -> None:
        self._retried(
            f"delete placement policy {placement_group}",
            lambda: self.placement.delete(region, placement_group),
        )


def build_provider(
    account: Account,
    *,
    customer: str,
    external_id: str | None,
    endpoint_url: str | None = None,
) -> GcpProvider:
    """The provider for a GCP ``account`` (``providers.registry`` signature, the same for
    every cloud). GCP has no ExternalId (clouds.md §C), so ``external_id`` is ignored;
    customer-owned projects are reached by impersonating the account's ``service_account``.
    ``endpoint_url`` points every client (Compute, Storage, IAM Credentials) at an emulator."""
    del external_id, customer  # the customer is on every node's labels, via the request tags
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
    return GcpProvider(
        session, prices=account.prices, node_service_account=creds.node_service_account
    )
