"""The AWS adapter: one account (gpucap's shared one or a customer's, via an assumed role)
behind :class:`providers.base.Provider`.

Modules: ``session`` (credentials, clients), ``instances``, ``offerings``, ``images``,
``objects``, and ``errors`` (the only place that knows AWS error codes). boto3 is imported
only when a client is first made, so importing this package is cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from providers.aws import images, instances, objects, offerings
from providers.aws.session import AwsSession
from providers.base import CloudNode, CreateResult, Image, NodeRequest, Offering
from providers.errors import InvalidRequest
from providers.retry import DEFAULT_POLICY, RetryPolicy
from schema.policy import Account
from schema.types import Cloud


@dataclass
class AwsProvider:
    session: AwsSession
    account: str
    cloud: Cloud = Cloud.AWS
    prices: Mapping[str, float] = field(default_factory=dict)  # per-account overrides
    images: Mapping[str, str] = field(default_factory=dict)  # region -> base AMI id
    retry: RetryPolicy = DEFAULT_POLICY

    def create_node(self, request: NodeRequest) -> CreateResult:
        image = request.image or self.base_image(request.region)
        return instances.create_node(self.session, request, image, self.retry)

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        return instances.describe_node(self.session, region, instance_id)

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return instances.list_nodes(self.session, region, tags)

    def terminate_node(self, region: str, instance_id: str) -> None:
        instances.terminate_node(self.session, region, instance_id)

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        return offerings.list_offerings(self.session, regions, self.prices)

    def create_image(self, region: str, source_instance_id: str, name: str) -> Image:
        return images.create_image(self.session, region, source_instance_id, name, tags={})

    def describe_image(self, region: str, image_id: str) -> Image | None:
        return images.describe_image(self.session, region, image_id)

    def delete_image(self, region: str, image_id: str) -> None:
        images.delete_image(self.session, region, image_id)

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        objects.copy_object(self.session, self.session.home_region, source_uri, dest_uri)

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
    images: Mapping[str, str] | None = None,
    retry: RetryPolicy | None = None,
) -> AwsProvider:
    """The registry's entry point (``providers.registry.build_provider``)."""
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
    return AwsProvider(
        session=session,
        account=account.name,
        prices=dict(account.prices),
        images=dict(images or {}),
        retry=retry or DEFAULT_POLICY,
    )


__all__ = ["AwsProvider", "build_provider"]
