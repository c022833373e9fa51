"""GCP images: bake an image from a node's boot disk, describe it, delete it.

``images.insert`` with ``sourceDisk`` (clouds.md §B): the REST call is
``POST /compute/v1/projects/{p}/global/images`` and returns a *global* operation, polled with
our own ``GlobalOperationsClient`` (§E.2 pitfall 1 applies to it too). ``force_create`` images
a disk still attached to a running VM, which is the point of baking from a warm node.

Images are global in GCP; ``storage_locations`` pins where the bytes live (the multi-region
of the node's region), and :class:`providers.base.Image` reports the region asked for. The
image id is the image name, unique per project, which also makes create idempotent: a 409
``alreadyExists`` for our name is our earlier attempt, described and returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from providers.base import MANAGED_VALUE, TAG_MANAGED, Image
from providers.errors import InvalidRequest, ProviderError
from providers.gcp import errors as gerr
from providers.gcp.instances import parse_instance_id
from providers.gcp.session import CALL_TIMEOUT_S, GcpSession, wait_global_operation
from providers.gcp.tags import image_request_id, label_filter, labels_for

_STATE = {"READY": "available", "PENDING": "pending", "FAILED": "failed"}
# Creating an image from a 200 GB disk takes minutes; create waits briefly, then returns
# "pending" and describe follows it.
CREATE_WAIT_S = 5.0


def storage_location(region: str) -> str:
    """The multi-region an image's bytes should live in for a region's nodes."""
    return (
        region.split("-", 1)[0] if region.split("-", 1)[0] in ("us", "europe", "asia") else region
    )


def _to_image(img: Any, region: str) -> Image:
    created = img.creation_timestamp
    return Image(
        image_id=img.name,
        name=img.name,
        region=region,
        state=_STATE.get(img.status, "pending"),
        tags=dict(img.labels),
        created_at=datetime.fromisoformat(created).timestamp() if created else None,
    )


class GcpImages:
    def __init__(
        self,
        session: GcpSession,
        *,
        op_deadline_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.session = session
        self.op_deadline_s = op_deadline_s
        self.sleep = sleep

    @property
    def _client(self) -> Any:
        return self.session.client("ImagesClient")

    def create(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image:
        from google.cloud import compute_v1

        zone, vm, _ = parse_instance_id(source_instance_id)
        where = gerr.Where(region, zone)

        try:
            inst = self.session.client("InstancesClient").get(
                project=self.session.project,
                zone=zone,
                instance=vm,
                retry=None,
                timeout=CALL_TIMEOUT_S,
            )
            boot = next((d for d in inst.disks if d.boot), None)
            if boot is None:
                raise InvalidRequest(
                    f"instance {source_instance_id} has no boot disk to image",
                    code="noBootDisk",
                )
            try:
                op = self._client.insert_unary(
                    request=compute_v1.InsertImageRequest(
                        project=self.session.project,
                        force_create=True,
                        request_id=image_request_id(self.session.project, name),
                        image_resource=compute_v1.Image(
                            name=name,
                            source_disk=boot.source,
                            labels=labels_for({**(tags or {}), TAG_MANAGED: MANAGED_VALUE}),
                            storage_locations=[storage_location(region)],
                        ),
                    ),
                    retry=None,
                    timeout=CALL_TIMEOUT_S,
                )
            except Exception as exc:
                if gerr.is_already_exists(exc):
                    found = self._describe(region, name)
                    if found is not None:
                        return found
                raise
            done = wait_global_operation(
                self.session, op, deadline_s=CREATE_WAIT_S, sleep=self.sleep
            )
            if done is not None and gerr.operation_failed(done):
                raise gerr.from_operation(done, where)
            found = self._describe(region, name)
            return found or Image(image_id=name, name=name, region=region, state="pending")
        except ProviderError:
            raise
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc

    def describe(self, region: str, image_id: str) -> Image | None:
        where = gerr.Where(region)

        try:
            return self._describe(region, image_id)
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc

    def _describe(self, region: str, name: str) -> Image | None:
        try:
            img = self._client.get(
                project=self.session.project, image=name, retry=None, timeout=CALL_TIMEOUT_S
            )
        except Exception as exc:
            if gerr.is_not_found(exc):
                return None
            raise
        if img.status == "DELETING":
            return None  # on its way out: as good as gone for anyone launching from it
        return _to_image(img, region)

    def list(self, region: str, tags: Mapping[str, str]) -> list[Image]:
        """The project's images carrying every tag (as labels, filtered server side)."""
        from google.cloud import compute_v1

        where = gerr.Where(region)
        try:
            # (``filter`` is a field of the request: the client's flattened arguments are
            # only ``project``)
            pager = self._client.list(
                request=compute_v1.ListImagesRequest(
                    project=self.session.project, filter=label_filter(tags) if tags else ""
                ),
                retry=None,
                timeout=CALL_TIMEOUT_S,
            )
            out = []
            want = labels_for(tags).items()
            for img in pager:
                if img.status != "DELETING" and want <= dict(img.labels).items():
                    out.append(_to_image(img, region))
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc
        return sorted(out, key=lambda i: i.image_id)

    def delete(self, region: str, image_id: str) -> None:
        where = gerr.Where(region)

        try:
            try:
                op = self._client.delete_unary(
                    project=self.session.project,
                    image=image_id,
                    retry=None,
                    timeout=CALL_TIMEOUT_S,
                )
            except Exception as exc:
                if gerr.is_not_found(exc):
                    return  # idempotent: already gone
                raise
            done = wait_global_operation(
                self.session, op, deadline_s=self.op_deadline_s, sleep=self.sleep
            )
            if done is not None and gerr.operation_failed(done):
                raise gerr.from_operation(done, where)
        except ProviderError:
            raise
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc
