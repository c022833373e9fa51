"""``AwsProvider``: one AWS account behind :class:`providers.base.Provider`, and the
registry's ``build_provider``.

This is the one place AWS calls are retried: every verb runs inside
:func:`providers.retry.call_with_retry` (Throttled and TransientError only), and the clients
underneath have botocore's retries off (``session.py``), so a throttled request is sent
``policy.max_attempts`` times, never that times botocore's own count. A create is retried
as a whole find-or-create, so an attempt after a lost response finds instead of launching.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from providers.aws import images, instances, objects, offerings, placement
from providers.aws.session import AwsSession
from providers.base import (
    CloudNode,
    CopyStep,
    CreateResult,
    Image,
    NodeRequest,
    Offering,
    StoredObject,
)
from providers.errors import InvalidRequest
from providers.retry import DEFAULT_POLICY, RetryPolicy, call_with_retry
from schema.policy import Account
from schema.types import Cloud

T = TypeVar("T")


@dataclass
class AwsProvider:
    session: AwsSession
    account: str
    cloud: Cloud = Cloud.AWS
    prices: Mapping[str, float] = field(default_factory=dict)  # per-account overrides
    images: Mapping[str, str] = field(default_factory=dict)  # region -> base AMI id
    instance_profile: str | None = None  # the nodes' identity (an instance profile ARN)
    retry: RetryPolicy = DEFAULT_POLICY

    @classmethod
    def for_account(
        cls,
        account: Account,
        *,
        customer: str,
        external_id: str | None,
        endpoint_url: str | None = None,
        images: Mapping[str, str] | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> AwsProvider:
        if account.cloud != Cloud.AWS:
            raise ValueError(f"account {account.name!r} is {account.cloud.value}, not aws")
        session = AwsSession(
            account.credentials,
            customer=customer,
            account=account.name,
            external_id=external_id,
            home_region=account.regions[0],
            endpoint_url=endpoint_url,
        )
        return cls(
            session=session,
            account=account.name,
            prices=dict(account.prices),
            images=dict(images or {}),
            instance_profile=account.credentials.instance_profile,
            retry=retry,
        )

    def _retried(self, what: str, fn: Callable[[], T]) -> T:
        return call_with_retry(fn, self.retry, what=f"aws {what}")

    def create_node(self, request: NodeRequest) -> CreateResult:
        def once() -> CreateResult:
            image = request.image or self.base_image(request.region)
            return instances.create_node(self.session, request, image, self.instance_profile)

        return self._retried(f"create {request.intent_id}", once)

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        return self._retried(
            f"describe {instance_id}",
            lambda: instances.describe_node(self.session, region, instance_id),
        )

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return self._retried("list", lambda: instances.list_nodes(self.session, region, tags))

    def terminate_node(self, region: str, instance_id: str) -> None:
        self._retried(
            f"terminate {instance_id}",
            lambda: instances.terminate_node(self.session, region, instance_id),
        )

    def stop_node(self, region: str, instance_id: str) -> None:
        self._retried(
            f"stop {instance_id}", lambda: instances.stop_node(self.session, region, instance_id)
        )

    def start_node(self, region: str, instance_id: str) -> None:
        self._retried(
            f"start {instance_id}", lambda: instances.start_node(self.session, region, instance_id)
        )

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        return self._retried(
            "offerings", lambda: offerings.list_offerings(self.session, regions, self.prices)
        )

    def create_image(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image:
        return self._retried(
            f"create image {name}",
            lambda: images.create_image(
                self.session, region, source_instance_id, name, tags=tags or {}
            ),
        )

    def list_images(self, region: str, tags: Mapping[str, str]) -> list[Image]:
        return self._retried("list images", lambda: images.list_images(self.session, region, tags))

    def describe_image(self, region: str, image_id: str) -> Image | None:
        return self._retried(
            f"describe image {image_id}",
            lambda: images.describe_image(self.session, region, image_id),
        )

    def delete_image(self, region: str, image_id: str) -> None:
        self._retried(
            f"delete image {image_id}",
            lambda: images.delete_image(self.session, region, image_id),
        )

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        self._retried(
            "s3 copy",
            lambda: objects.copy_object(
                self.session, self.session.home_region, source_uri, dest_uri
            ),
        )

    def list_objects(self, region: str, uri: str) -> list[StoredObject]:
        return self._retried(
            f"s3 list {uri}", lambda: objects.list_objects(self.session, region, uri)
        )

    def copy_step(
        self,
        region: str,
        source: StoredObject,
        dest_uri: str,
        resume: Mapping[str, Any],
        max_bytes: int,
    ) -> CopyStep:
        # A retried step asks the upload for its parts again, so it never copies one twice.
        return self._retried(
            f"s3 copy step {dest_uri}",
            lambda: objects.copy_step(self.session, region, source, dest_uri, resume, max_bytes),
        )

    def delete_objects(self, region: str, uri: str) -> None:
        self._retried(f"s3 delete {uri}", lambda: objects.delete_objects(self.session, region, uri))

    def delete_placement_group(self, region: str, placement_group: str) -> None:
        self._retried(
            f"delete placement group {placement_group}",
            lambda: placement.delete_placement_group(self.session, region, placement_group),
        )

    def base_image(self, region: str) -> str:
        """The account's base AMI for ``region``, else the newest AWS Deep Learning Base AMI."""
        named = self.images.get(region)
        if named:
            return named
        found = images.find_base_image(self.session, region)
        if found is None:
            raise InvalidRequest(
                f"no base GPU image in {region}: name one for the region in the account "
                f"file (images: {{{region}: ami-...}})",
                code="NoBaseImage",
                region=region,
            )
        return found


def build_provider(
    account: Account,
    *,
    customer: str,
    external_id: str | None,
    endpoint_url: str | None = None,
) -> AwsProvider:
    """The registry's entry point (``providers.registry.build_provider``), one signature for
    every cloud; tests that need a base AMI map or a faster retry policy call
    :meth:`AwsProvider.for_account`."""
    return AwsProvider.for_account(
        account, customer=customer, external_id=external_id, endpoint_url=endpoint_url
    )
