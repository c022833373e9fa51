"""One account's view of the simulated cloud (see ``providers/base.py`` for the contracts)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from providers.base import (
    MANAGED_VALUE,
    TAG_INTENT,
    TAG_MANAGED,
    TAG_PLACEMENT,
    CloudNode,
    CopyStep,
    CreateResult,
    Image,
    InstanceStatus,
    NodeRequest,
    Offering,
    StoredObject,
    placement_name,
    placement_tags,
)
from providers.errors import InvalidRequest, NotFound
from providers.retry import DEFAULT_POLICY, RetryPolicy, call_with_retry
from providers.sim.cloud import SimCloud, SimImage, SimInstance, zones_of
from schema.catalog import INSTANCE_TYPES, REGIONS
from schema.types import Cloud


@dataclass
class SimProvider:
    cloud: Cloud
    account: str
    world: SimCloud
    prices: Mapping[str, float] | None = None  # per-account overrides, USD per node-hour
    # Throttled/transient creates are retried like the real adapters do (providers.retry).
    retry: RetryPolicy = field(default=DEFAULT_POLICY)

    def _node(self, inst: SimInstance) -> CloudNode:
        return CloudNode(
            instance_id=inst.instance_id,
            intent_id=inst.intent_id,
            instance_type=inst.instance_type,
            region=inst.region,
            zone=inst.zone,
            status=self.world.status(inst),
            tags=dict(inst.tags),
            private_ip=inst.private_ip or (self.world.address_of or _private_ip)(inst),
        )

    def create_node(self, request: NodeRequest) -> CreateResult:
        return call_with_retry(lambda: self._create_once(request), self.retry, what="sim create")

    def _create_once(self, request: NodeRequest) -> CreateResult:
        tags = dict(request.tags)
        tags[TAG_INTENT] = request.intent_id
        # One transaction: with a shared state file, another process's create of this
        # intent is either seen here or waits for this one.
        with self.world.transaction():
            # Find first: a retry after a crash must never make a second instance.
            for inst in self.world.instances_with_intent(self.account, request.intent_id):
                if inst.cloud == self.cloud and self.world.status(inst) not in (
                    InstanceStatus.TERMINATED,
                    InstanceStatus.STOPPING,
                ):
                    return CreateResult(self._node(inst), created=False)
            group = None
            if request.placement_group:  # like a cloud: the group first, then the launch
                group = placement_name(request.placement_group)
                tags[TAG_PLACEMENT] = request.placement_group
                self.world.ensure_placement_group(
                    self.account, request.region, group, placement_tags(request)
                )
            inst, created = self.world.launch(
                self.cloud,
                self.account,
                intent_id=request.intent_id,
                instance_type=request.instance_type,
                region=request.region,
                zone=request.zone,
                tags=tags,
                user_data=request.user_data,
                placement_group=group,
                image=request.image,
            )
            result = CreateResult(self._node(inst), created=created)
        self.world.answer()  # (a latency fault: the answer comes late, the create stands)
        return result

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None:
        with self.world.transaction():
            inst = self.world.instance(instance_id)
            if inst is None or inst.account != self.account or inst.region != region:
                return None
            node = self._node(inst)
            return None if node.status == InstanceStatus.TERMINATED else node

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        with self.world.transaction():
            out = []
            for inst in self.world.instances_in(self.account, self.cloud, region):
                if any(inst.tags.get(k) != v for k, v in tags.items()):
                    continue
                node = self._node(inst)
                if node.status != InstanceStatus.TERMINATED:
                    out.append(node)
            return sorted(out, key=lambda n: n.instance_id)

    def terminate_node(self, region: str, instance_id: str) -> None:
        del region  # instance ids are unique across the simulated world
        self.world.terminate(self.account, instance_id)

    def stop_node(self, region: str, instance_id: str) -> None:
        del region
        self.world.stop(self.account, instance_id)

    def start_node(self, region: str, instance_id: str) -> None:
        del region
        self.world.start(self.account, instance_id)

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]:
        out: list[Offering] = []
        with self.world.transaction():
            for region in regions:
                if region not in REGIONS[self.cloud]:
                    raise InvalidRequest(f"unknown {self.cloud.value} region {region!r}")
                for it in INSTANCE_TYPES:
                    if it.cloud != self.cloud:
                        continue
                    full = self.world.pool_full(self.cloud, region, it.name)
                    price = (self.prices or {}).get(it.name, it.list_price_usd_per_hour)
                    for zone in zones_of(self.cloud, region):
                        out_of = full or self.world.zone_full(self.cloud, zone, it.name)
                        out.append(
                            Offering(
                                instance_type=it.name,
                                region=region,
                                zone=zone,
                                price_usd_per_hour=price,
                                available=not out_of,
                                reason="capacity exhausted" if out_of else "",
                            )
                        )
        return out

    def create_image(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image:
        with self.world.transaction():
            src = self.world.instance(source_instance_id)
            if src is None or src.account != self.account:
                raise NotFound(f"instance {source_instance_id} not found", code="NotFound")
            img = self.world.new_image(
                region,
                name,
                account=self.account,
                tags={**(tags or {}), TAG_MANAGED: MANAGED_VALUE},
                source_instance_id=source_instance_id,
            )
            return _image(img)

    def describe_image(self, region: str, image_id: str) -> Image | None:
        img = self.world.image(image_id)
        if img is None or img.region != region:
            return None
        return _image(img)

    def list_images(self, region: str, tags: Mapping[str, str]) -> list[Image]:
        return [
            _image(i)
            for i in self.world.images_of(self.account, region)
            if all(i.tags.get(k) == v for k, v in tags.items())
        ]

    def delete_image(self, region: str, image_id: str) -> None:
        self.world.delete_image(region, image_id)

    def delete_placement_group(self, region: str, placement_group: str) -> None:
        self.world.delete_placement_group(self.account, region, placement_name(placement_group))

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        self.world.copy_object(source_uri, dest_uri)

    # ---- staging's verbs (providers.base.ObjectStore), on the world's objects ----------
    def list_objects(self, region: str, uri: str) -> list[StoredObject]:
        with self.world.transaction():
            out = []
            for u in self._under(uri):
                size = self.world.object_size(u)
                assert size is not None  # (listed in this transaction)
                out.append(StoredObject(u, size, self._checksum(u, size)))
            return out

    def _under(self, uri: str) -> list[str]:
        """The objects a prefix (ending in "/") holds, or the one object."""
        if not uri.endswith("/"):
            return [uri] if self.world.object_size(uri) is not None else []
        return self.world.object_uris(uri)

    def _checksum(self, uri: str, size: int) -> str:
        data = self.world.object_body(uri)
        if data is None:  # (an object known by its size only)
            return f"size:{size}"
        return f"md5:{hashlib.md5(data).hexdigest()}"

    def copy_step(
        self,
        region: str,
        source: StoredObject,
        dest_uri: str,
        resume: Mapping[str, Any],
        max_bytes: int,
    ) -> CopyStep:
        """Copies ``max_bytes`` a step (the object appears whole when the last one is done)."""
        with self.world.transaction():
            if self.world.object_size(source.uri) is None:
                raise NotFound(f"object {source.uri} not found", code="NoSuchKey")
            done = min(source.size, int(resume.get("offset") or 0) + max(1, max_bytes))
            if done < source.size:
                return CopyStep(False, done, {"offset": done})
        self.copy_object(source.uri, dest_uri)
        return CopyStep(True, source.size)

    def delete_objects(self, region: str, uri: str) -> None:
        with self.world.transaction():
            for u in self._under(uri):
                self.world.delete_object(u)


def _private_ip(inst: SimInstance) -> str:
    """A stable made-up address per instance (10.0.x.y)."""
    n = int(inst.instance_id[-6:])
    return f"10.0.{n // 250}.{n % 250}"


def _image(img: SimImage) -> Image:
    return Image(img.image_id, img.name, img.region, "available", dict(img.tags), img.created_at)
