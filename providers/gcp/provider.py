"""``GcpProvider``: one GCP project (shared or customer-owned) behind the provider interface
(``providers.base.Provider``), composed of the per-concern modules of this package."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from providers.base import CloudNode, CreateResult, Image, NodeRequest, Offering
from providers.gcp import errors as gerr
from providers.gcp.images import GcpImages
from providers.gcp.instances import GcpInstances
from providers.gcp.objects import GcsCopier
from providers.gcp.offerings import list_offerings
from providers.gcp.session import GcpSession
from providers.retry import DEFAULT_POLICY, RetryPolicy, call_with_retry
from schema.types import Cloud

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
        self.instances = GcpInstances(
            session,
            base_image=self.base_image,
            retry=retry,
            op_deadline_s=op_deadline_s,
            sleep=sleep,
        )
        self.images = GcpImages(session, retry=retry, op_deadline_s=op_deadline_s, sleep=sleep)
        self.objects = GcsCopier(session, retry=retry)

    def __repr__(self) -> str:
        return f"GcpProvider({self.session!r})"

    def create_node(self, request: NodeRequest) -> CreateResult:
        return self.instances.create(request)

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        return self.instances.describe(region, instance_id)

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return self.instances.list_tagged(region, tags)

    def terminate_node(self, region: str, instance_id: str) -> None:
        self.instances.terminate(region, instance_id)

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        where = gerr.Where(regions[0] if len(regions) == 1 else None)

        def attempt() -> list[Offering]:
            try:
                return list_offerings(self.session, regions, self.prices)
            except Exception as exc:
                raise gerr.from_exception(exc, where) from exc

        return call_with_retry(attempt, self.retry, what="gcp offerings")

    def create_image(self, region: str, source_instance_id: str, name: str) -> Image:
        return self.images.create(region, source_instance_id, name)

    def describe_image(self, region: str, image_id: str) -> Image | None:
        return self.images.describe(region, image_id)

    def delete_image(self, region: str, image_id: str) -> None:
        self.images.delete(region, image_id)

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        self.objects.copy(source_uri, dest_uri)
