"""OCI compute instances: find-or-create launch, describe, list by ownership tags, terminate.

Idempotency (providers/base.py contract, clouds.md §D.4 point 3): the node's intent id is
in a freeform tag *and* in ``opc-retry-token``. A create first lists the compartment for a
live instance carrying the intent tag, so a retry after a crash finds the instance even if
the token has expired (24 h, clouds.md §A.5) or was never sent. The find and the launch are
retried together as one unit (by ``provider.py``, the one retry layer), so an attempt after
a lost response finds instead of creating.

A retry token outlives the instance it made: OCI replays the original launch response for
24 h, even after that instance was terminated, and answers 409 if the same token comes with
a different request. A re-create of a terminated intent would get the dead instance back (or
the 409, when it is placed elsewhere this time), so the token is then chained, to the dead
instance's OCID or to a digest of the new request (deterministic, so crash-safe), and the
launch repeated.

A gang's node is launched into the gang's fault domain (``placement.py``), in the request's
availability domain, or, when the request names none, in the AD of a live node of the gang.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Mapping
from typing import Any

import structlog

from providers.base import (
    MANAGED_VALUE,
    TAG_INTENT,
    TAG_MANAGED,
    TAG_PLACEMENT,
    CloudNode,
    CreateResult,
    InstanceStatus,
    NodeRequest,
)
from providers.errors import (
    AuthFailed,
    InvalidRequest,
    NotFound,
    ProviderError,
    Scope,
    TransientError,
)
from providers.oci.errors import Target, Where, is_retry_token_conflict
from providers.oci.offerings import availability_domains, host_availability, offered_shapes
from providers.oci.placement import fault_domain
from providers.oci.session import OciSession
from providers.oci.tags import retry_token, tags_of
from providers.retry import is_retryable

log = structlog.get_logger(__name__)

_GONE = frozenset({"TERMINATING", "TERMINATED"})
_STATUS = {
    "PROVISIONING": InstanceStatus.PENDING,
    "STARTING": InstanceStatus.PENDING,
    "MOVING": InstanceStatus.PENDING,
    "RUNNING": InstanceStatus.RUNNING,
    "CREATING_IMAGE": InstanceStatus.RUNNING,
    "STOPPING": InstanceStatus.STOPPING,
    "STOPPED": InstanceStatus.STOPPED,
    "TERMINATING": InstanceStatus.TERMINATED,
    "TERMINATED": InstanceStatus.TERMINATED,
}
# The states in which an instance action has nothing left to do.
_THERE = {
    "STOP": frozenset({"STOPPING", "STOPPED"}),
    "START": frozenset({"PROVISIONING", "STARTING", "RUNNING"}),
}
_MAX_TOKEN_CHAIN = 4  # re-creates of one intent within a token's 24 h lifetime
BASE_IMAGE_OS = "Oracle Linux"  # the GPU platform images (driver preinstalled)
SUBNET_TAG = "gpucap-subnet"  # a subnet an operator marked for gpucap nodes


def to_node(inst: Any, region: str, private_ip: str | None = None) -> CloudNode:
    tags = tags_of(inst)
    return CloudNode(
        instance_id=inst.id,
        intent_id=tags.get(TAG_INTENT, ""),
        instance_type=inst.shape,
        region=region,
        zone=inst.availability_domain,
        status=_STATUS.get(inst.lifecycle_state, InstanceStatus.PENDING),
        tags=tags,
        private_ip=private_ip,
    )


def _launch_digest(req: NodeRequest, zone: str, image: str, subnet: str) -> str:
    parts = [zone, req.instance_type, image, subnet, req.user_data, req.reservation or ""]
    parts += [f"{k}={v}" for k, v in sorted(req.tags.items())]
    if req.placement_group:  # only then, so a single node's digest is what it always was
        parts.append(fault_domain(req.placement_group))
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


class Instances:
    """Instance verbs for one account (all regions)."""

    def __init__(self, session: OciSession) -> None:
        self.session = session
        self._images: dict[tuple[str, str], str] = {}  # (region, shape) -> base image OCID
        self._subnets: dict[tuple[str, str], str] = {}  # (region, AD) -> subnet OCID
        self._lock = threading.Lock()

    # --- create ----------------------------------------------------------------------------

    def create(self, req: NodeRequest) -> CreateResult:
        zone = req.zone or self._gang_zone(req) or self._pick_zone(req)
        where = Where(region=req.region, zone=zone, instance_type=req.instance_type)
        image = req.image or self.base_image(req.region, req.instance_type, where)
        subnet = self._subnet(req.region, zone, where)
        return self._find_or_launch(req, zone, image, subnet, where)

    def _find_or_launch(
        self, req: NodeRequest, zone: str, image: str, subnet: str, where: Where
    ) -> CreateResult:
        """One attempt: find a live instance for the intent, else launch one."""
        mine = self._with_intent(req.region, req.intent_id, where)
        live = [i for i in mine if i.lifecycle_state not in _GONE]
        if live:
            live.sort(key=lambda i: i.time_created)
            found = live[0]
            log.info("oci.create_found", intent=req.intent_id, instance=found.id)
            return CreateResult(to_node(found, req.region), created=False)
        replaced: str | None = None
        for _ in range(_MAX_TOKEN_CHAIN):
            token = retry_token(req.intent_id, replaced)
            try:
                inst = self._launch(req, zone, image, subnet, token)
            except InvalidRequest as err:
                if not is_retry_token_conflict(err):
                    raise
                # The token launched a different request before (the intent was placed
                # elsewhere once its instance was gone): chain it to this request's content.
                replaced = f"{token}\x00{_launch_digest(req, zone, image, subnet)}"
                continue
            current = self.session.call(
                "get_instance",
                self.session.compute(req.region).get_instance,
                inst.id,
                where=Where(req.region, zone, req.instance_type, Target.RESOURCE),
            ).data
            if current.lifecycle_state not in _GONE:
                log.info("oci.create_launched", intent=req.intent_id, instance=current.id)
                return CreateResult(to_node(current, req.region), created=True)
            replaced = inst.id  # a replay of a terminated instance's launch: chain the token
        raise InvalidRequest(
            f"intent {req.intent_id}: launch kept replaying earlier requests",
            "RetryTokenReplay",
            Scope.REQUEST,
            region=req.region,
            zone=zone,
            instance_type=req.instance_type,
        )

    def _launch(self, req: NodeRequest, zone: str, image: str, subnet: str, token: str) -> Any:
        import oci

        m = oci.core.models
        tags = {**req.tags, TAG_INTENT: req.intent_id, TAG_MANAGED: MANAGED_VALUE}
        if req.placement_group:
            tags[TAG_PLACEMENT] = req.placement_group
        metadata = {}
        if req.user_data:
            metadata["user_data"] = base64.b64encode(req.user_data.encode()).decode()
        details = m.LaunchInstanceDetails(
            compartment_id=self.session.compartment_id,
            availability_domain=zone,
            shape=req.instance_type,
            display_name=f"gpucap-{req.intent_id}",
            freeform_tags=tags,
            metadata=metadata,
            capacity_reservation_id=req.reservation,
            fault_domain=fault_domain(req.placement_group) if req.placement_group else None,
            source_details=m.InstanceSourceViaImageDetails(image_id=image),
            create_vnic_details=m.CreateVnicDetails(subnet_id=subnet, assign_public_ip=False),
        )
        # One request, no retry of any kind here: "Out of host capacity" is a 500 and must
        # reach placement at once (clouds.md §A.5, §A.6); throttle/transient retries happen a
        # level up, around find-or-launch.
        resp = self.session.call(
            "launch_instance",
            self.session.compute(req.region).launch_instance,
            details,
            opc_retry_token=token,
            where=Where(req.region, zone, req.instance_type),
        )
        log.info(
            "oci.launch",
            intent=req.intent_id,
            region=req.region,
            zone=zone,
            shape=req.instance_type,
            instance=resp.data.id,
            opc_request_id=resp.request_id,
            work_request=resp.headers.get("opc-work-request-id"),
        )
        return resp.data

    def _with_intent(self, region: str, intent_id: str, where: Where) -> list[Any]:
        return [
            i
            for i in self.session.list_all(
                "list_instances",
                self.session.compute(region).list_instances,
                self.session.compartment_id,
                where=where,
            )
            if (i.freeform_tags or {}).get(TAG_INTENT) == intent_id
        ]

    # --- placement inputs ------------------------------------------------------------------

    def _gang_zone(self, req: NodeRequest) -> str | None:
        """The AD of a live node of the request's gang: the rest of it must follow (the free
        host probe of ``_pick_zone`` may answer differently from one node to the next)."""
        if not req.placement_group:
            return None
        live = [
            i
            for i in self.session.list_all(
                "list_instances",
                self.session.compute(req.region).list_instances,
                self.session.compartment_id,
                where=Where(region=req.region, instance_type=req.instance_type),
            )
            if i.lifecycle_state not in _GONE
            and (i.freeform_tags or {}).get(TAG_PLACEMENT) == req.placement_group
        ]
        return str(min(live, key=lambda i: i.time_created).availability_domain) if live else None

    def _pick_zone(self, req: NodeRequest) -> str:
        """No AD requested: the first AD that offers the shape and reports free hosts, else
        the first that offers it (the launch then reports the stockout, typed)."""
        offering = [
            ad
            for ad in availability_domains(self.session, req.region)
            if req.instance_type in offered_shapes(self.session, req.region, ad)
        ]
        if not offering:
            raise InvalidRequest(
                f"{req.instance_type} is not offered in any availability domain of {req.region}",
                "ShapeNotOffered",
                Scope.REQUEST,
                region=req.region,
                instance_type=req.instance_type,
            )
        for ad in offering:
            try:
                free, _ = host_availability(self.session, req.region, ad, [req.instance_type])[
                    req.instance_type
                ]
            except ProviderError as err:
                if is_retryable(err):
                    raise  # the verb's retry layer decides, not this best-effort probe
                break  # no report: availability unknown, take the first offering AD
            except KeyError:
                break
            if free:
                return ad
        return offering[0]

    def base_image(self, region: str, shape: str, where: Where | None = None) -> str:
        """The newest Oracle Linux GPU platform image for the shape (cached per region)."""
        where = where or Where(region=region, instance_type=shape)
        with self._lock:
            cached = self._images.get((region, shape))
        if cached:
            return cached
        images = self.session.list_all(
            "list_images",
            self.session.compute(region).list_images,
            self.session.compartment_id,
            operating_system=BASE_IMAGE_OS,
            shape=shape,
            lifecycle_state="AVAILABLE",
            sort_by="TIMECREATED",
            sort_order="DESC",
            where=where,
        )
        gpu = [i for i in images if "GPU" in (i.display_name or "")]
        if not gpu:
            raise InvalidRequest(
                f"no {BASE_IMAGE_OS} GPU image for {shape} in {region}",
                "NoBaseImage",
                Scope.REQUEST,
                region=region,
                instance_type=shape,
            )
        with self._lock:
            self._images[(region, shape)] = gpu[0].id
        return str(gpu[0].id)

    def _subnet(self, region: str, zone: str, where: Where) -> str:
        with self._lock:
            cached = self._subnets.get((region, zone))
        if cached:
            return cached
        subnets = [
            s
            for s in self.session.list_all(
                "list_subnets",
                self.session.network(region).list_subnets,
                self.session.compartment_id,
                where=where,
            )
            if s.lifecycle_state == "AVAILABLE" and s.availability_domain in (None, zone)
        ]
        subnets.sort(key=lambda s: (s.freeform_tags or {}).get(SUBNET_TAG) != "true")
        if not subnets:
            raise InvalidRequest(
                f"no usable subnet in compartment for {region} {zone}",
                "NoSubnet",
                Scope.REQUEST,
                region=region,
                zone=zone,
            )
        with self._lock:
            self._subnets[(region, zone)] = subnets[0].id
        return str(subnets[0].id)

    # --- describe / list / terminate -------------------------------------------------------

    def describe(self, region: str, instance_id: str) -> CloudNode | None:
        try:
            inst = self.session.call(
                "get_instance",
                self.session.compute(region).get_instance,
                instance_id,
                where=Where(region=region, target=Target.RESOURCE),
            ).data
        except NotFound:
            return None
        ips = self._private_ips(region, inst.compartment_id, [inst], instance_id=inst.id)
        return to_node(inst, region, ips.get(inst.id))

    def action(self, region: str, instance_id: str, verb: str) -> None:
        """InstanceAction STOP or START (warm pools), after reading the state: stopping,
        stopped or gone already is a stop's success; provisioning, starting or running
        already a start's; a start of one that is gone is NotFound, of one still stopping a
        retryable TransientError. A stopped instance keeps its boot volume (billed); START
        with no host in its AD is 500 "Out of host capacity", raised as CapacityUnavailable
        for that AD and shape."""
        where = Where(region=region, target=Target.RESOURCE)
        try:
            inst = self.session.call(
                "get_instance", self.session.compute(region).get_instance, instance_id, where=where
            ).data
        except NotFound:
            if verb == "STOP":
                return
            raise
        state = str(inst.lifecycle_state)
        if state in _GONE:
            if verb == "STOP":
                return
            raise NotFound(
                f"instance {instance_id} is {state.lower()}",
                "NotAuthorizedOrNotFound",
                region=region,
            )
        if state in _THERE[verb]:
            return  # the action would change nothing
        where = Where(region, inst.availability_domain, inst.shape, Target.RESOURCE)
        if verb == "START" and state == "STOPPING":
            raise TransientError(
                f"instance {instance_id} is still stopping",
                "IncorrectState",
                retryable=True,
                region=region,
                zone=inst.availability_domain,
                instance_type=inst.shape,
            )
        try:
            self.session.call(
                "instance_action",
                self.session.compute(region).instance_action,
                instance_id,
                verb,
                where=where,
            )
        except NotFound:
            if verb != "STOP":
                raise
            return  # terminated since the read
        log.info("oci.instance_action", region=region, instance=instance_id, action=verb)

    def list_tagged(self, region: str, tags: Mapping[str, str]) -> list[CloudNode]:
        found = self.session.list_all(
            "list_instances",
            self.session.compute(region).list_instances,
            self.session.compartment_id,
            where=Where(region=region),
        )
        mine = [
            i
            for i in found
            if i.lifecycle_state not in _GONE
            and all((i.freeform_tags or {}).get(k) == v for k, v in tags.items())
        ]
        ips = self._private_ips(region, self.session.compartment_id, mine) if mine else {}
        return [to_node(i, region, ips.get(i.id)) for i in mine]

    def _private_ips(
        self, region: str, compartment: str, instances: list[Any], instance_id: str | None = None
    ) -> dict[str, str]:
        """instance OCID -> private IP of its primary VNIC (OCI keeps the IP on the VNIC, not
        the instance). Best effort: an instance whose VNIC cannot be read yet has no IP, and
        the health checker waits (an auth failure still surfaces)."""
        running = {i.id for i in instances if i.lifecycle_state == "RUNNING"}
        if not running:
            return {}
        by_instance: dict[str, Any] = {"instance_id": instance_id} if instance_id else {}
        try:
            attachments = self.session.list_all(
                "list_vnic_attachments",
                self.session.compute(region).list_vnic_attachments,
                compartment,
                where=Where(region=region),
                **by_instance,
            )
            attached = [
                a
                for a in attachments
                if a.instance_id in running and a.lifecycle_state == "ATTACHED" and a.vnic_id
            ]
            # A listing reads the addresses of a whole subnet at once (not one read per
            # VNIC): its calls grow with the subnets our nodes are in, not with the nodes.
            # One node reads only its own VNIC's.
            filters: list[dict[str, str]] = (
                [{"vnic_id": a.vnic_id} for a in attached]
                if instance_id
                else [
                    {"subnet_id": sub}
                    for sub in sorted({a.subnet_id for a in attached if a.subnet_id})
                ]
            )
            ip_of_vnic: dict[str, str] = {}
            for by in filters:
                for ip in self.session.list_all(
                    "list_private_ips",
                    self.session.network(region).list_private_ips,
                    where=Where(region=region),
                    **by,
                ):
                    if ip.is_primary and ip.vnic_id and ip.ip_address:
                        ip_of_vnic[ip.vnic_id] = str(ip.ip_address)
            out: dict[str, str] = {}
            for a in attached:
                if a.vnic_id in ip_of_vnic:
                    out[a.instance_id] = ip_of_vnic[a.vnic_id]
            return out
        except AuthFailed:
            raise
        except ProviderError as err:
            if is_retryable(err):
                raise  # the verb's retry layer decides, not this best-effort read
            log.info("oci.private_ip_unknown", region=region, kind=err.kind, code=err.code)
            return {}

    def terminate(self, region: str, instance_id: str) -> None:
        """Idempotent: not found, terminating or terminated all mean done."""
        where = Where(region=region, target=Target.RESOURCE)
        try:
            self.session.call(
                "terminate_instance",
                self.session.compute(region).terminate_instance,
                instance_id,
                preserve_boot_volume=False,
                where=where,
            )
        except NotFound:
            return
        except TransientError:
            # A busy instance (e.g. mid-image-capture) can refuse; if it is already going
            # away that is success, otherwise the caller retries later.
            node = self.describe(region, instance_id)
            if node is None or node.status == InstanceStatus.TERMINATED:
                return
            raise
        log.info("oci.terminate", region=region, instance=instance_id)
