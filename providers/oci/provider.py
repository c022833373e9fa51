"""The OCI adapter: one account (tenancy + compartment) behind :class:`providers.base.Provider`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from providers.base import CloudNode, CreateResult, Image, NodeRequest, Offering
from providers.oci.images import Images
from providers.oci.instances import Instances
from providers.oci.objects import Objects
from providers.oci.offerings import list_offerings
from providers.oci.session import TIMEOUT_S, OciSession
from providers.retry import DEFAULT_POLICY, RetryPolicy
from schema.policy import Account
from schema.types import Cloud


class OciProvider:
    """See ``providers/base.py`` for each method's contract."""

    cloud = Cloud.OCI

    def __init__(
        self,
        account: Account,
        *,
        endpoint_url: str | None = None,
        config_file: str | None = None,
        retry_policy: RetryPolicy = DEFAULT_POLICY,
        timeout_s: tuple[float, float] = TIMEOUT_S,
    ) -> None:
        self.account = account.name
        self.session = OciSession(
            account,
            endpoint_url=endpoint_url,
            config_file=config_file,
            retry_policy=retry_policy,
            timeout_s=timeout_s,
        )
        self.prices = dict(account.prices)
        self.instances = Instances(self.session)
        self._images = Images(self.session)
        self._objects = Objects(self.session)

    def __repr__(self) -> str:  # never the session's config or signer
        return f"OciProvider(account={self.account!r})"

    def create_node(self, request: NodeRequest) -> CreateResult:
        return self.instances.create(request)

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        return self.instances.describe(region, instance_id)

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        return self.instances.list_tagged(region, tags)

    def terminate_node(self, region: str, instance_id: str) -> None:
        self.instances.terminate(region, instance_id)

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        return list_offerings(self.session, regions, self.prices)

    def create_image(self, region: str, source_instance_id: str, name: str) -> Image:
        return self._images.create(region, source_instance_id, name)

    def describe_image(self, region: str, image_id: str) -> Image | None:
        return self._images.describe(region, image_id)

    def delete_image(self, region: str, image_id: str) -> None:
        self._images.delete(region, image_id)

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        self._objects.copy(source_uri, dest_uri)
