"""The provider interface every cloud adapter implements, with its contracts.

Contracts (the shared contract suite in ``tests/contract/`` checks each one, for every
adapter, the simulated one included):

- ``create_node`` is find-or-create on ``request.intent_id``: if an instance tagged with that
  intent already exists (a retry after a crash), it is returned with ``created=False`` and
  nothing new is launched. The intent id also goes into the cloud's idempotency token
  (AWS ClientToken, GCP requestId, OCI opc-retry-token). Capacity and quota errors raise
  at once (no SDK-level retry), so placement can go elsewhere.
- ``describe_node`` returns ``None`` when the instance no longer exists.
- ``list_nodes`` returns every non-terminated instance carrying *all* the given tags.
- ``terminate_node`` is idempotent: an instance that is already gone is success.
- ``stop_node`` stops a running instance, keeping its boot disk (what a stopped node
  bills; instance-store NVMe is wiped), and ``start_node`` starts a stopped one again on a
  host of its zone. Both are idempotent: stopping a stopping, stopped or gone instance, or
  starting a starting or running one, is success. Starting an instance that is gone (an
  unknown id, a terminated instance) raises :class:`~providers.errors.NotFound`, never
  brings it back; starting one still stopping raises a retryable
  :class:`~providers.errors.TransientError` (start it once it is stopped). A start can
  find no host: :class:`~providers.errors.CapacityUnavailable` for the instance's zone and
  type (``Scope.ZONE``), raised at once like a create's, so the caller falls back to a
  create elsewhere. Through a stop and a start the instance keeps its id, zone and tags;
  ``describe_node`` and ``list_nodes`` show it ``STOPPING`` then ``STOPPED``, never
  ``TERMINATED`` or absent (GCE calls a stopped VM TERMINATED; only a deleted one is
  gone), and ``create_node`` finds a stopped instance of its intent. Warm pools use them
  (``controlplane.lifecycle.warm``; ``controlplane.loop.reconcile._start_failed``).
- ``list_offerings`` returns every known offering in the given regions, with availability as
  a field (never by omission).
- Gangs. A request with ``placement_group`` (the gang's key, e.g. its replica id; the same on
  every node of the gang) is placed with the gang's other nodes: AWS launches it into the
  cluster placement group :func:`placement_name` (key), GCP applies the compact placement
  policy of that name, OCI puts it in the request's availability domain and in one fault
  domain derived from the key (OCI has no placement object). The placement object is
  find-or-create like the instance: the first node makes it, later nodes and retries find it,
  and it carries :func:`placement_tags`. Every node of a gang is also tagged
  ``gpucap-placement: <key>``. A gang request should name its zone; when it does not, the
  gang still lands in one (AWS: the group pins the AZ; GCP: the zone pick is deterministic;
  OCI and the simulator: the zone of a live member). ``placement_group=None``: as before.
- Images. ``create_image(region, instance, name, tags)`` is find-or-create on ``name``
  (AWS AMI names and GCP image names are unique per account and region or project; OCI
  sends a retry token of the instance and name; the simulator looks the name up): a retry
  after a lost answer returns the first image. The image carries ``tags`` and
  ``gpucap-managed`` (on AWS its EBS snapshots too), so ``list_images(region, tags)`` finds
  every image carrying all of them, one made before a crash included. ``describe_image``
  returns None once gone; ``delete_image`` is idempotent and deletes the image's snapshots
  with it.
- ``delete_placement_group(region, key)`` releases a gang's placement object once its nodes
  are gone. Idempotent: an object that is gone, or was never made, is success. While any
  instance is still in it (one still shutting down included) it raises
  :class:`~providers.errors.InUse` and deletes nothing; that is not retried in place (nodes
  take minutes to go), the caller asks again on a later pass.
- Retries live in one layer: each verb is retried as a whole by ``providers.retry`` (only
  ``Throttled`` and ``TransientError``), in the cloud's ``provider.py``; the SDK clients
  underneath make one attempt per call (botocore ``total_max_attempts=1``, google api_core
  ``retry=None``, OCI ``NoneRetryStrategy``), so the cloud sees ``max_attempts`` requests,
  never that times the SDK's own count.

Every cloud package (``providers/{aws,gcp,oci}/``, SkyPilot's ``sky/provision/<cloud>/``
shape) has the same modules: ``provider`` (the class and ``build_provider(account, *,
customer, external_id, endpoint_url=None)``, what ``providers.registry`` calls), ``session``,
``errors``, ``instances``, ``placement`` (a gang's placement object), ``offerings``,
``images``, ``objects``, ``quotas``, ``tags`` and ``check``;
``tests/contract/test_provider_shape.py`` keeps it so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from schema.types import Cloud

# Ownership tags put on everything gpucap creates; garbage collection finds orphans by them.
TAG_MANAGED = "gpucap-managed"
TAG_INTENT = "gpucap-intent"
TAG_CUSTOMER = "gpucap-customer"
TAG_POOL = "gpucap-pool"
TAG_MODEL = "gpucap-model"
TAG_PLACEMENT = "gpucap-placement"  # a gang's key, on its nodes and its placement object
MANAGED_VALUE = "true"


class InstanceStatus(StrEnum):
    """What the cloud says about an instance, normalised."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class NodeRequest:
    intent_id: str  # our node id; the idempotency anchor
    instance_type: str
    region: str
    zone: str | None = None  # None: the provider picks a zone in the region
    image: str | None = None  # None: the provider's base GPU image for the region
    user_data: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    reservation: str | None = None  # capacity reservation / commitment to launch into
    placement_group: str | None = None  # the gang's key (its replica id); None: single node


@dataclass(frozen=True)
class CloudNode:
    instance_id: str
    intent_id: str
    instance_type: str
    region: str
    zone: str
    status: InstanceStatus
    tags: Mapping[str, str] = field(default_factory=dict)
    private_ip: str | None = None


@dataclass(frozen=True)
class CreateResult:
    node: CloudNode
    created: bool  # False: an existing instance for this intent was found and returned


@dataclass(frozen=True)
class Offering:
    instance_type: str
    region: str
    zone: str
    price_usd_per_hour: float
    available: bool
    reason: str = ""  # why not available, when the API says


@dataclass(frozen=True)
class Image:
    image_id: str
    name: str
    region: str
    state: str  # "pending" | "available" | "failed"
    # What the cloud says about it (list and describe fill them): its tags (GCP: labels,
    # as ``providers.gcp.tags.labels_for`` wrote them) and when it was made (epoch s).
    tags: Mapping[str, str] = field(default_factory=dict)
    created_at: float | None = None


@runtime_checkable
class Provider(Protocol):
    """One cloud account, as seen by the control plane."""

    cloud: Cloud
    account: str

    def create_node(self, request: NodeRequest) -> CreateResult: ...

    def describe_node(self, region: str, instance_id: str) -> CloudNode | None: ...

    def list_nodes(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]: ...

    def terminate_node(self, region: str, instance_id: str) -> None: ...

    def stop_node(self, region: str, instance_id: str) -> None: ...

    def start_node(self, region: str, instance_id: str) -> None: ...

    def list_offerings(self, regions: Sequence[str]) -> list[Offering]: ...

    def create_image(
        self,
        region: str,
        source_instance_id: str,
        name: str,
        tags: Mapping[str, str] | None = None,
    ) -> Image: ...

    def list_images(self, region: str, tags: Mapping[str, str]) -> list[Image]: ...

    def describe_image(self, region: str, image_id: str) -> Image | None: ...

    def delete_image(self, region: str, image_id: str) -> None: ...

    def copy_object(self, source_uri: str, dest_uri: str) -> None: ...

    def delete_placement_group(self, region: str, placement_group: str) -> None: ...


@dataclass(frozen=True)
class StoredObject:
    """One object in a cloud's object store, as the store describes it."""

    uri: str
    size: int
    # The store's own content checksum, equal for an object and a faithful copy of it: the
    # S3 ETag (an MD5, or the MD5 of the parts' MD5s and "-N" for a multipart object, so a
    # copy made with the same part sizes has the same one), GCS's md5Hash (crc32c for a
    # composite object), OCI's content-md5 (opc-multipart-md5 for a multipart object).
    checksum: str
    parts: tuple[int, ...] = ()  # S3: the sizes of a multipart object's parts, in order


@dataclass(frozen=True)
class CopyStep:
    """Where one server-side copy stands after a bounded step of it."""

    done: bool
    bytes_done: int
    # The cloud's own state to resume from (an S3 upload id and its parts, a GCS rewrite
    # token, an OCI work request id): recorded by the caller, handed back on the next step.
    resume: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ObjectStore(Protocol):
    """Weight staging's verbs (``controlplane/loop/staging.py``). Contracts:

    - ``list_objects`` of a URI ending in ``/`` lists every object under that prefix, of
      another URI that one object; [] when nothing is there (never an error).
    - ``copy_step`` advances a server-side copy of ``source`` to ``dest_uri`` by about
      ``max_bytes`` (at least one part or chunk) and returns its progress. Given the
      ``resume`` state a previous step returned (or none, after a crash before it was
      recorded), it continues where the cloud says the copy is, never starting a second
      one: S3 finds its multipart upload by key and asks the upload for its parts.
    - ``delete_objects`` deletes the object or every object under the prefix, and any
      unfinished upload there; idempotent.
    """

    def list_objects(self, region: str, uri: str) -> list[StoredObject]: ...

    def copy_step(
        self,
        region: str,
        source: StoredObject,
        dest_uri: str,
        resume: Mapping[str, Any],
        max_bytes: int,
    ) -> CopyStep: ...

    def delete_objects(self, region: str, uri: str) -> None: ...


def ownership_tags(intent_id: str, customer: str, pool: str, model: str) -> dict[str, str]:
    return {
        TAG_MANAGED: MANAGED_VALUE,
        TAG_INTENT: intent_id,
        TAG_CUSTOMER: customer,
        TAG_POOL: pool,
        TAG_MODEL: model,
    }


def ownership_filter(customer: str | None = None) -> dict[str, str]:
    """The tags to list what gpucap made in an account: ``gpucap-managed``, and in a
    customer's own account that customer's tag too (None: a shared account, gpucap's
    own, listed once for all its customers). The gc job's and the audit's rule."""
    tags = {TAG_MANAGED: MANAGED_VALUE}
    if customer:
        tags[TAG_CUSTOMER] = customer
    return tags


# GCP resource names (RFC 1035, at most 63) are the strictest of the clouds' placement-object
# names (AWS: 255 ASCII), so one name fits every cloud.
_RFC1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def placement_name(key: str) -> str:
    """The cloud name of a gang's placement object: ``gpucap-<key>`` when that is a valid
    name, else a readable slug of the key plus a hash of it (two keys never share a name)."""
    name = f"gpucap-{key}"
    if _RFC1035.fullmatch(name):
        return name
    slug = re.sub(r"[^a-z0-9-]+", "-", key.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"gpucap-{slug}-{digest}" if slug else f"gpucap-{digest}"


def placement_tags(request: NodeRequest) -> dict[str, str]:
    """The ownership tags of a gang's placement object: the node's, without the per-node
    intent (any node of the gang may be the one that makes it), plus the gang's key."""
    if not request.placement_group:
        raise ValueError("only a gang's request (placement_group set) has a placement object")
    tags = {k: v for k, v in request.tags.items() if k != TAG_INTENT}
    return {**tags, TAG_MANAGED: MANAGED_VALUE, TAG_PLACEMENT: request.placement_group}
