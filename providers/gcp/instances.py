"""GCP instances: find-or-create, describe, list by ownership labels, idempotent terminate.

Identity. An instance id is ``<zone>/<name>/<numeric id>``. The name is derived from the
intent (``labels.vm_name``) and is the idempotency anchor; the numeric id is GCP's own and
changes when a name is reused, so a stale id never describes or deletes a newer instance
that got the same name (describe answers None, terminate answers "already gone").

Create is find-or-create; ``provider.py`` retries each whole attempt with ``providers.retry``
(only Throttled and TransientError are retried; capacity/quota/auth return at once,
clouds.md §D.4), and every call here is sent once (``retry=None``):

1. *find*: an aggregated list filtered on the intent label, in the request's region; an
   instance carrying this intent (exact, from the ``gpucap-tags`` metadata) is returned with
   ``created=False``. This is what makes a retry after a crash or a lost response safe even
   where a server ignored the token.
2. *insert* with ``requestId`` = uuid5(intent) (§A.4, passed inside the request: it is not a
   flattened kwarg and the library does not generate it, §E.2 pitfall 2), through
   ``insert_unary`` and our own operations client (§E.2 pitfall 1).
3. The server answers a repeated ``requestId`` with the *original* operation. If that comes
   back already DONE, the token was spent by an earlier, finished attempt (a stockout a
   minute ago; an instance since terminated): the next token is derived from that
   operation's name and the insert is sent again. The chain is deterministic, so a process
   that crashes half-way walks the same tokens again and meets its own operation.
4. Wait for the operation (bounded) and always check its ``error``: a stockout
   (ZONE_RESOURCE_POOL_EXHAUSTED) lives only there (§A.4).

A gang's node names its compact placement policy in ``resourcePolicies``; the policy is
found or made (``placement.py``) after the find and before the insert.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from providers.base import (
    TAG_INTENT,
    TAG_PLACEMENT,
    CloudNode,
    CreateResult,
    InstanceStatus,
    NodeRequest,
)
from providers.errors import InvalidRequest, NotFound, ProviderError, Scope, TransientError
from providers.gcp import errors as gerr
from providers.gcp.placement import GcpPlacement
from providers.gcp.session import CALL_TIMEOUT_S, GcpSession, wait_zone_operation
from providers.gcp.tags import (
    TAGS_METADATA_KEY,
    USER_DATA_METADATA_KEY,
    delete_request_id,
    label_filter,
    labels_for,
    request_id,
    vm_name,
)

log = structlog.get_logger(__name__)

# How many spent request ids a create walks past before giving up (each step is one earlier
# finished attempt for the same intent in the token's lifetime).
MAX_TOKEN_CHAIN = 8
BOOT_DISK_GB = 200  # clouds.md §A.4 example

# GCP instance status -> ours. GCP "TERMINATED" means *stopped* (the VM still exists and
# holds its name); a deleted instance is simply gone (404).
_STATUS = {
    "PROVISIONING": InstanceStatus.PENDING,
    "STAGING": InstanceStatus.PENDING,
    "REPAIRING": InstanceStatus.PENDING,
    "RUNNING": InstanceStatus.RUNNING,
    "STOPPING": InstanceStatus.STOPPING,
    "SUSPENDING": InstanceStatus.STOPPING,
    "STOPPED": InstanceStatus.STOPPED,
    "SUSPENDED": InstanceStatus.STOPPED,
    "TERMINATED": InstanceStatus.STOPPED,
}


def parse_instance_id(instance_id: str) -> tuple[str, str, str]:
    """``zone/name/id`` -> (zone, name, id); raises InvalidRequest naming the format."""
    parts = instance_id.split("/")
    if len(parts) != 3 or not all(parts):
        raise InvalidRequest(
            f"not a gpucap GCP instance id: {instance_id!r} (expected ZONE/NAME/NUMERIC_ID)",
            code="invalidInstanceId",
        )
    return parts[0], parts[1], parts[2]


CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class GcpInstances:
    def __init__(
        self,
        session: GcpSession,
        *,
        base_image: str,
        placement: GcpPlacement,
        node_service_account: str | None = None,
        op_deadline_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.session = session
        self.base_image = base_image
        self.placement = placement
        # The nodes' identity (what they read weights with), attached at creation.
        self.node_service_account = node_service_account
        # dstack waits 30 s for a capacity error to show up; A3 inserts usually finish (or
        # fail) well within 2 min (clouds.md §A.4, §D.2).
        self.op_deadline_s = op_deadline_s
        self.sleep = sleep

    @property
    def _client(self) -> Any:
        return self.session.client("InstancesClient")

    # -- create ---------------------------------------------------------------------------

    def create(self, req: NodeRequest) -> CreateResult:
        where = gerr.Where(req.region, req.zone, req.instance_type)

        try:
            found = self._find_intent(req.region, req.intent_id)
            if found is not None:
                return CreateResult(found, created=False)
            zone = req.zone or self._pick_zone(req.region, req.instance_type)
            policy = self.placement.ensure(req) if req.placement_group else None
            return self._insert(req, zone, policy)
        except ProviderError:
            raise
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc

    def _insert(self, req: NodeRequest, zone: str, policy: str | None) -> CreateResult:
        from google.cloud import compute_v1

        where = gerr.Where(req.region, zone, req.instance_type)
        name = vm_name(req.intent_id)
        resource = self._instance_resource(req, zone, name, policy)
        rid = request_id(req.intent_id)
        spent: Any = None
        for _ in range(MAX_TOKEN_CHAIN):
            try:
                op = self._client.insert_unary(
                    request=compute_v1.InsertInstanceRequest(
                        project=self.session.project,
                        zone=zone,
                        instance_resource=resource,
                        request_id=rid,
                    ),
                    retry=None,  # capacity/quota must reach placement at once (§D.4)
                    timeout=CALL_TIMEOUT_S,
                )
            except Exception as exc:
                if gerr.is_already_exists(exc):
                    return self._name_taken(req, zone, name)
                raise gerr.from_exception(exc, where) from exc
            if op.status == compute_v1.Operation.Status.DONE:
                # A replay: this token belongs to an attempt that already finished.
                if not gerr.operation_failed(op):
                    node = self._get(zone, name)
                    if node is not None and self._node_id(node) == str(op.target_id):
                        return CreateResult(node, created=False)
                spent = op
                rid = request_id(req.intent_id, after=op.name)
                continue
            done = wait_zone_operation(
                self.session, zone, op, deadline_s=self.op_deadline_s, sleep=self.sleep
            )
            if done is None:
                node = self._get(zone, name)
                if node is not None:  # still provisioning; describe will follow it
                    return CreateResult(node, created=True)
                raise TransientError(
                    f"insert operation {op.name} still running after {self.op_deadline_s:.0f}s",
                    code="operationTimeout",
                    retryable=True,
                    **_at(where),
                )
            if gerr.operation_failed(done):
                raise gerr.from_operation(done, where)
            node = self._get(zone, name)
            if node is None:
                raise TransientError(
                    f"instance {name} not visible after its insert finished",
                    code="notVisible",
                    retryable=True,
                    **_at(where),
                )
            log.info("gcp.instance.created", intent=req.intent_id, instance=node.instance_id)
            return CreateResult(node, created=True)
        if spent is not None and gerr.operation_failed(spent):
            raise gerr.from_operation(spent, where)
        raise TransientError(
            f"{MAX_TOKEN_CHAIN} request ids for intent {req.intent_id} were already spent",
            code="requestIdChainExhausted",
            **_at(where),
        )

    def _name_taken(self, req: NodeRequest, zone: str, name: str) -> CreateResult:
        node = self._get(zone, name)
        if node is not None and node.intent_id == req.intent_id:
            if node.status == InstanceStatus.STOPPING:
                raise TransientError(
                    f"the previous instance {name} of this intent is still being deleted",
                    code="alreadyExists",
                    retryable=True,
                    region=req.region,
                    zone=zone,
                )
            return CreateResult(node, created=False)
        raise InvalidRequest(
            f"instance name {name} in {zone} is taken by an instance that is not this intent's",
            code="alreadyExists",
            region=req.region,
            zone=zone,
        )

    def _instance_resource(self, req: NodeRequest, zone: str, name: str, policy: str | None) -> Any:
        from google.cloud import compute_v1

        tags = {**req.tags, TAG_INTENT: req.intent_id}
        if req.placement_group:
            tags[TAG_PLACEMENT] = req.placement_group
        items = [compute_v1.Items(key=TAGS_METADATA_KEY, value=json.dumps(tags, sort_keys=True))]
        if req.user_data:
            items.append(compute_v1.Items(key=USER_DATA_METADATA_KEY, value=req.user_data))
        resource = compute_v1.Instance(
            name=name,
            machine_type=f"zones/{zone}/machineTypes/{req.instance_type}",
            labels=labels_for(tags),
            metadata=compute_v1.Metadata(items=items),
            disks=[
                compute_v1.AttachedDisk(
                    boot=True,
                    auto_delete=True,
                    initialize_params=compute_v1.AttachedDiskInitializeParams(
                        source_image=self._source_image(req.image), disk_size_gb=BOOT_DISK_GB
                    ),
                )
            ],
            network_interfaces=[compute_v1.NetworkInterface(network="global/networks/default")],
            # GPU VMs cannot live-migrate (§A.4: on_host_maintenance TERMINATE).
            scheduling=compute_v1.Scheduling(
                on_host_maintenance="TERMINATE",
                provisioning_model="STANDARD",
                automatic_restart=True,
            ),
        )
        if policy:
            resource.resource_policies = [policy]
        if self.node_service_account:
            # The cloud-platform scope: what the node may do is the account's IAM's to say.
            resource.service_accounts = [
                compute_v1.ServiceAccount(
                    email=self.node_service_account, scopes=[CLOUD_PLATFORM_SCOPE]
                )
            ]
        if req.reservation:
            resource.reservation_affinity = compute_v1.ReservationAffinity(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key="compute.googleapis.com/reservation-name",
                values=[req.reservation],
            )
        return resource

    def _source_image(self, image: str | None) -> str:
        """A boot disk's source: the base image, or a baked one. A baked image's id is its
        name (``providers/gcp/images.py``), which GCE takes only as a path in the project."""
        if image is None:
            return self.base_image
        return image if "/" in image else f"projects/{self.session.project}/global/images/{image}"

    def _pick_zone(self, region: str, instance_type: str) -> str:
        """The first zone of the region (by name) that offers the machine type."""
        from google.cloud import compute_v1

        pager = self.session.client("MachineTypesClient").aggregated_list(
            request=compute_v1.AggregatedListMachineTypesRequest(
                project=self.session.project, filter=f'name = "{instance_type}"'
            ),
            retry=None,
            timeout=CALL_TIMEOUT_S,
        )
        zones = sorted(
            scope.split("/", 1)[1]
            for scope, scoped in pager
            if scoped.machine_types and scope.split("/", 1)[1].rsplit("-", 1)[0] == region
        )
        if not zones:
            raise InvalidRequest(
                f"{instance_type} is not offered in any zone of {region}",
                code="machineTypeNotOffered",
                scope=Scope.REGION,
                region=region,
                instance_type=instance_type,
            )
        return zones[0]

    # -- describe / list ------------------------------------------------------------------

    def describe(self, region: str, instance_id: str) -> CloudNode | None:
        zone, name, nid = parse_instance_id(instance_id)
        where = gerr.Where(region, zone)

        try:
            node = self._get(zone, name)
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc
        return node if node is not None and self._node_id(node) == nid else None

    def list_tagged(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        where = gerr.Where(region)

        try:
            return self._list(region, tags)
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc

    def _list(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        from google.cloud import compute_v1

        pager = self._client.aggregated_list(
            request=compute_v1.AggregatedListInstancesRequest(
                project=self.session.project, filter=label_filter(tags) if tags else ""
            ),
            retry=None,
            timeout=CALL_TIMEOUT_S,
        )
        out: list[CloudNode] = []
        for scope, scoped in pager:
            zone = scope.split("/", 1)[1] if scope.startswith("zones/") else ""
            if not zone or _region_of(zone) != region:
                continue
            for inst in scoped.instances:
                node = self._node(inst, zone)
                # Labels are a lossy mapping; the exact tags decide.
                if all(node.tags.get(k) == v for k, v in tags.items()):
                    out.append(node)
        return sorted(out, key=lambda n: n.instance_id)

    def _find_intent(self, region: str, intent_id: str) -> CloudNode | None:
        for node in self._list(region, {TAG_INTENT: intent_id}):
            if node.status != InstanceStatus.STOPPING:  # a dying one is not "found"
                return node
        return None

    def _get(self, zone: str, name: str) -> CloudNode | None:
        try:
            inst = self._client.get(
                project=self.session.project,
                zone=zone,
                instance=name,
                retry=None,
                timeout=CALL_TIMEOUT_S,
            )
        except Exception as exc:
            if gerr.is_not_found(exc):
                return None
            raise
        return self._node(inst, zone)

    def _node(self, inst: Any, zone: str) -> CloudNode:
        tags = _tags_of(inst)
        ip = inst.network_interfaces[0].network_i_p if inst.network_interfaces else ""
        return CloudNode(
            instance_id=f"{zone}/{inst.name}/{inst.id}",
            intent_id=tags.get(TAG_INTENT, ""),
            instance_type=inst.machine_type.rsplit("/", 1)[-1],
            region=_region_of(zone),
            zone=zone,
            status=_STATUS.get(inst.status, InstanceStatus.PENDING),
            tags=tags,
            private_ip=ip or None,
        )

    @staticmethod
    def _node_id(node: CloudNode) -> str:
        return node.instance_id.rsplit("/", 1)[-1]

    # -- terminate ------------------------------------------------------------------------

    def terminate(self, region: str, instance_id: str) -> None:
        from google.cloud import compute_v1

        zone, name, nid = parse_instance_id(instance_id)
        where = gerr.Where(region, zone)

        try:
            node = self._get(zone, name)
            if node is None or self._node_id(node) != nid:
                return  # gone already, or the name now belongs to a newer instance
            try:
                op = self._client.delete_unary(
                    request=compute_v1.DeleteInstanceRequest(
                        project=self.session.project,
                        zone=zone,
                        instance=name,
                        request_id=delete_request_id(instance_id),
                    ),
                    retry=None,
                    timeout=CALL_TIMEOUT_S,
                )
            except Exception as exc:
                if gerr.is_not_found(exc):
                    return
                raise
            done = wait_zone_operation(
                self.session, zone, op, deadline_s=self.op_deadline_s, sleep=self.sleep
            )
            gerr.raise_unless_succeeded(done, op.name, "delete", where)
            log.info("gcp.instance.deleted", instance=instance_id)
        except ProviderError:
            raise
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc

    # -- stop / start (warm pools) --------------------------------------------------------

    def stop(self, region: str, instance_id: str) -> None:
        """instances.stop: the boot disk stays (and bills), local SSD is discarded. Stopping,
        stopped (GCE: TERMINATED) or gone already is success."""
        self._power(region, instance_id, "stop")

    def start(self, region: str, instance_id: str) -> None:
        """instances.start: pending or running already is success; gone is NotFound; still
        stopping is a retryable TransientError (GCE would answer resourceNotReady);
        ZONE_RESOURCE_POOL_EXHAUSTED, in the operation's error when the zone has no host for
        it, is CapacityUnavailable for the instance's zone and type."""
        self._power(region, instance_id, "start")

    def _power(self, region: str, instance_id: str, verb: str) -> None:
        from google.cloud import compute_v1

        zone, name, nid = parse_instance_id(instance_id)
        where = gerr.Where(region, zone)
        try:
            node = self._get(zone, name)
            if node is None or self._node_id(node) != nid:
                if verb == "stop":
                    return
                # (a newer instance under the name is not this one: never start that)
                raise NotFound(
                    f"no instance {instance_id}", code="notFound", region=region, zone=zone
                )
            where = gerr.Where(region, zone, node.instance_type)
            if node.status in _THERE[verb]:
                return  # one call less; GCE would answer with an operation that does nothing
            if verb == "start" and node.status == InstanceStatus.STOPPING:
                # (a stop or a delete still running: the next pass sees which)
                raise TransientError(
                    f"instance {instance_id} is still stopping",
                    code="resourceNotReady",
                    retryable=True,
                    **_at(where),
                )
            if verb == "stop":
                request: Any = compute_v1.StopInstanceRequest(
                    project=self.session.project, zone=zone, instance=name
                )
                call = self._client.stop_unary
            else:
                request = compute_v1.StartInstanceRequest(
                    project=self.session.project, zone=zone, instance=name
                )
                call = self._client.start_unary
            try:
                op = call(request=request, retry=None, timeout=CALL_TIMEOUT_S)
            except Exception as exc:
                if verb == "stop" and gerr.is_not_found(exc):
                    return  # deleted since the read
                raise
            done = wait_zone_operation(
                self.session, zone, op, deadline_s=self.op_deadline_s, sleep=self.sleep
            )
            gerr.raise_unless_succeeded(done, op.name, verb, where)
            log.info(f"gcp.instance.{verb}", instance=instance_id)
        except ProviderError:
            raise
        except Exception as exc:
            raise gerr.from_exception(exc, where) from exc


# The statuses in which a stop / a start has nothing left to do.
_THERE = {
    "stop": (InstanceStatus.STOPPING, InstanceStatus.STOPPED),
    "start": (InstanceStatus.PENDING, InstanceStatus.RUNNING),
}


def _region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def _tags_of(inst: Any) -> dict[str, str]:
    for item in inst.metadata.items if inst.metadata else []:
        if item.key == TAGS_METADATA_KEY:
            try:
                raw = json.loads(item.value)
            except ValueError:
                break
            if isinstance(raw, dict):
                return {str(k): str(v) for k, v in raw.items()}
    return dict(inst.labels)  # not ours, or metadata edited: the labels are all there is


def _at(where: gerr.Where) -> dict[str, Any]:
    return {"region": where.region, "zone": where.zone, "instance_type": where.instance_type}
