"""OCI custom images: create from an instance, describe, delete (clouds.md §B, OCI).

``CreateImage`` captures the boot volume only (not block volumes), and the source instance
shuts down for several minutes while it is captured. The image goes PROVISIONING ->
AVAILABLE. The SDK would retry ``create_image`` by default (clouds.md §A.5); here, as
everywhere, the strategy is explicit and retries are ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.base import MANAGED_VALUE, TAG_MANAGED, Image
from providers.errors import NotFound
from providers.oci.errors import Target, Where
from providers.oci.session import OciSession
from providers.oci.tags import image_retry_token

_STATE = {
    "PROVISIONING": "pending",
    "IMPORTING": "pending",
    "EXPORTING": "pending",
    "AVAILABLE": "available",
    "DISABLED": "failed",
}


def _to_image(img: Any, region: str) -> Image:
    created = img.time_created
    return Image(
        image_id=str(img.id),
        name=str(img.display_name),
        region=region,
        state=_STATE.get(img.lifecycle_state, "pending"),
        tags=dict(img.freeform_tags or {}),
        created_at=created.timestamp() if created is not None else None,
    )


class Images:
    def __init__(self, session: OciSession) -> None:
        self.session = session

    def create(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image:
        import oci

        details = oci.core.models.CreateImageDetails(
            compartment_id=self.session.compartment_id,
            instance_id=source_instance_id,
            display_name=name,
            freeform_tags={**(tags or {}), TAG_MANAGED: MANAGED_VALUE},
        )
        token = image_retry_token(source_instance_id, name)
        img = self.session.call(
            "create_image",
            self.session.compute(region).create_image,
            details,
            opc_retry_token=token,
            where=Where(region=region),
        ).data
        return _to_image(img, region)

    def list(self, region: str, tags: Mapping[str, str]) -> list[Image]:
        """The compartment's custom images carrying every tag (ListImages filters no tag:
        the freeform tags of each decide)."""
        found = self.session.list_all(
            "list_images",
            self.session.compute(region).list_images,
            self.session.compartment_id,
            where=Where(region=region),
        )
        return sorted(
            (
                _to_image(i, region)
                for i in found
                if i.lifecycle_state != "DELETED"
                and all((i.freeform_tags or {}).get(k) == v for k, v in tags.items())
            ),
            key=lambda i: i.image_id,
        )

    def describe(self, region: str, image_id: str) -> Image | None:
        try:
            img = self.session.call(
                "get_image",
                self.session.compute(region).get_image,
                image_id,
                where=Where(region=region, target=Target.RESOURCE),
            ).data
        except NotFound:
            return None
        if img.lifecycle_state == "DELETED":
            return None
        return _to_image(img, region)

    def delete(self, region: str, image_id: str) -> None:
        """Idempotent: an image already gone is success."""
        try:
            self.session.call(
                "delete_image",
                self.session.compute(region).delete_image,
                image_id,
                where=Where(region=region, target=Target.RESOURCE),
            )
        except NotFound:
            return
