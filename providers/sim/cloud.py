"""The simulated world. Thread-safe: the daemon's jobs and the gRPC server share it.

It reads a clock (it stands in for a real cloud, which is on the I/O side of the line); the
clock is injectable so tests drive time by hand."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from providers.base import InstanceStatus
from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InUse,
    InvalidRequest,
    NotFound,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)
from schema.catalog import INSTANCE_TYPES, REGIONS, InstanceType
from schema.types import Cloud

if TYPE_CHECKING:
    from providers.sim.local import LocalNodes

log = logging.getLogger(__name__)
FAULTS = ("capacity", "quota", "throttle", "transient", "auth")


@dataclass(frozen=True)
class SimTimings:
    """Seconds from create to each phase. Real clouds take minutes (coldstart.md §1.1-§1.6);
    the demo compresses them so it moves in seconds."""

    boot_s: float = 4.0  # create -> instance running (T_capacity + T_vm)
    serve_s: float = 6.0  # running -> model server healthy (bootstrap+image+weights+init)
    terminate_s: float = 1.0  # terminate -> gone (and stop -> stopped)
    start_s: float = 1.0  # start of a stopped instance -> running (a warm node's T_vm)
    # running again after a start -> model server healthy (None: ``serve_s``); a resumed
    # node is pre-initialised, so a simulation may give it less than a new one's
    resume_serve_s: float | None = None


@dataclass
class SimInstance:
    instance_id: str
    account: str
    cloud: Cloud
    intent_id: str
    instance_type: str
    region: str
    zone: str
    tags: dict[str, str]
    created_at: float
    terminate_requested_at: float | None = None
    user_data: str = ""  # as the create sent it (kept, as a cloud keeps it)
    placement_group: str | None = None  # the placement object's name, for a gang's node
    private_ip: str | None = None  # a local node's address (None: made up, or address_of)
    image: str | None = None  # the baked image it boots from (None: the base image)
    stop_requested_at: float | None = None  # stopped (or stopping) since
    started_at: float | None = None  # its last start from stopped (None: never stopped)


@dataclass
class _Fault:
    kind: str
    remaining: int
    zone: str | None


@dataclass
class SimImage:
    image_id: str
    name: str
    region: str
    created_at: float
    account: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    source_instance_id: str = ""


def zones_of(cloud: Cloud, region: str) -> tuple[str, ...]:
    if cloud == Cloud.AWS:
        return tuple(f"{region}{s}" for s in "abc")
    if cloud == Cloud.GCP:
        return tuple(f"{region}-{s}" for s in "abc")
    return tuple(f"{region}-ad-{i}" for i in (1, 2, 3))


@dataclass
class SimCloud:
    """Capacity is per (cloud, region, instance type): ``capacity`` overrides
    ``default_capacity``. A full pool raises CapacityUnavailable at region scope."""

    timings: SimTimings = field(default_factory=SimTimings)
    default_capacity: int = 64
    capacity: dict[tuple[str, str, str], int] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    # Per-instance timings (e.g. per pool and model, as a simulation's clouds file gives
    # them); None: ``timings`` for every instance.
    timing_of: Callable[[SimInstance], SimTimings] | None = None
    # Nodes an account may run per (account, region, instance type): QuotaExceeded past it.
    quota: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # Stock per (cloud, zone, instance type), within the region's: a zone stockout.
    zone_capacity: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # Where an instance's engine is reached (None: a made-up 10.0.x.y that nothing answers;
    # the daemon then probes through ``serving``). Tests point it at engines on loopback.
    address_of: Callable[[SimInstance], str] | None = None
    # Run each instance created with user data as a real local node booting from it, from
    # the create on (``timings`` still say when the instance shows RUNNING); its address is
    # the instance's private address; terminate (or an interruption) stops it. A local node
    # serves when its engine answers there (probe it over HTTP, controlplane/probes.py),
    # whatever ``serving`` says. None: instances live in memory only.
    local_nodes: LocalNodes | None = None

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self.instances: dict[str, SimInstance] = {}
        self.images: dict[str, SimImage] = {}
        # A gang's placement object (an AWS placement group, a GCP placement policy), by
        # (account, region, name) -> its ownership tags.
        self.placement_groups: dict[tuple[str, str, str], dict[str, str]] = {}
        self.objects: dict[str, int] = {}
        self.object_data: dict[str, bytes] = {}  # bodies, for objects put with data
        self._faults: dict[tuple[Cloud, str], list[_Fault]] = defaultdict(list)
        self._tokens: dict[tuple[str, str], str] = {}  # (account, token) -> instance id
        self._hung: set[str] = set()  # instances whose model server never answers
        self._held: dict[str, int] = {}  # requests each instance's engine holds (default 0)
        self.create_calls = 0  # for load/accounting views, never asserted as a call log

    # ---- configuration -------------------------------------------------------------
    def inject(
        self, cloud: Cloud, account: str, fault: str, count: int = 1, zone: str | None = None
    ) -> None:
        """Make the next ``count`` creates of this account fail with ``fault``."""
        if fault not in FAULTS and fault != "crash_after_create":
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        with self._lock:
            self._faults[(cloud, account)].append(_Fault(fault, count, zone))

    def clear_faults(self) -> None:
        """Forget every injected fault not yet raised (the outage is over)."""
        with self._lock:
            self._faults.clear()

    def set_capacity(self, cloud: Cloud, region: str, instance_type: str, n: int) -> None:
        with self._lock:
            self.capacity[(cloud.value, region, instance_type)] = n

    def put_object(self, uri: str, size: int, data: bytes | None = None) -> None:
        with self._lock:
            self.objects[uri] = size
            if data is not None:
                self.object_data[uri] = data

    # ---- state ---------------------------------------------------------------------
    def timings_for(self, inst: SimInstance) -> SimTimings:
        return self.timings if self.timing_of is None else self.timing_of(inst)

    def status(self, inst: SimInstance) -> InstanceStatus:
        now = self.clock()
        timings = self.timings_for(inst)
        if inst.terminate_requested_at is not None:
            done = now - inst.terminate_requested_at >= timings.terminate_s
            return InstanceStatus.TERMINATED if done else InstanceStatus.STOPPING
        if inst.stop_requested_at is not None:
            done = now - inst.stop_requested_at >= timings.terminate_s
            return InstanceStatus.STOPPED if done else InstanceStatus.STOPPING
        if inst.started_at is not None:
            up = now - inst.started_at >= timings.start_s
            return InstanceStatus.RUNNING if up else InstanceStatus.PENDING
        if now - inst.created_at >= timings.boot_s:
            return InstanceStatus.RUNNING
        return InstanceStatus.PENDING

    def serving(self, instance_id: str) -> bool:
        """The node's model server answers its health check (the sim node agent)."""
        with self._lock:
            inst = self.instances.get(instance_id)
            if inst is None or instance_id in self._hung:
                return False
            if self.status(inst) != InstanceStatus.RUNNING:
                return False
            timings = self.timings_for(inst)
            if inst.started_at is not None:
                serve = (
                    timings.serve_s if timings.resume_serve_s is None else timings.resume_serve_s
                )
                return self.clock() - inst.started_at >= timings.start_s + serve
            return self.clock() - inst.created_at >= timings.boot_s + timings.serve_s

    def in_use(self, cloud: Cloud, region: str, instance_type: str) -> int:
        return self._alive(instance_type, lambda i: i.cloud == cloud and i.region == region)

    def zone_full(self, cloud: Cloud, zone: str, instance_type: str) -> bool:
        limit = self.zone_capacity.get((cloud.value, zone, instance_type))
        if limit is None:
            return False
        return self._alive(instance_type, lambda i: i.cloud == cloud and i.zone == zone) >= limit

    def _account_in_use(self, account: str, region: str, instance_type: str) -> int:
        return self._alive(instance_type, lambda i: i.account == account and i.region == region)

    def _alive(self, instance_type: str, where: Callable[[SimInstance], bool]) -> int:
        """Instances of the type holding a host (not terminated, not stopped) that ``where``
        picks: a stopped instance gives its host back, so its start can find none."""
        return sum(
            1
            for i in self.instances.values()
            if i.instance_type == instance_type
            and where(i)
            and self.status(i) not in (InstanceStatus.TERMINATED, InstanceStatus.STOPPED)
        )

    def limit(self, cloud: Cloud, region: str, instance_type: str) -> int:
        return self.capacity.get((cloud.value, region, instance_type), self.default_capacity)

    def live_instances_with_intent(self, intent_id: str) -> int:
        with self._lock:
            return sum(
                1
                for i in self.instances.values()
                if i.intent_id == intent_id and self.status(i) != InstanceStatus.TERMINATED
            )

    # ---- operations (called by SimProvider under its account) ------------------------
    def launch(
        self,
        cloud: Cloud,
        account: str,
        *,
        intent_id: str,
        instance_type: str,
        region: str,
        zone: str | None,
        tags: dict[str, str],
        user_data: str = "",
        placement_group: str | None = None,
        image: str | None = None,
    ) -> tuple[SimInstance, bool]:
        with self._lock:
            self.create_calls += 1
            crash = self._take_fault(cloud, account, zone, region, instance_type)
            # Idempotency token: the same token returns the same instance (AWS ClientToken);
            # the same token with other parameters is refused, as EC2 refuses it
            # (IdempotentParameterMismatch) and OCI its opc-retry-token.
            known = self._tokens.get((account, intent_id))
            if known is not None:
                inst = self.instances[known]
                if (inst.image, inst.user_data) != (image, user_data):
                    raise InvalidRequest(
                        f"token {intent_id} was used with other parameters",
                        code="IdempotentParameterMismatch",
                        region=region,
                    )
                return inst, False
            types = {t.name: t for t in INSTANCE_TYPES if t.cloud == cloud}
            if instance_type not in types:
                raise InvalidRequest(
                    f"{instance_type} is not a {cloud.value} instance type",
                    code="InvalidInstanceType",
                    instance_type=instance_type,
                )
            if region not in REGIONS[cloud]:
                raise InvalidRequest(f"unknown region {region}", code="InvalidRegion")
            if image is not None and (
                image not in self.images or self.images[image].region != region
            ):
                raise InvalidRequest(f"image {image} not found in {region}", code="InvalidAMIID")
            zones = zones_of(cloud, region)
            if zone is not None and zone not in zones:
                raise InvalidRequest(f"zone {zone} is not in {region}", code="InvalidZone")
            if placement_group is not None:
                if (account, region, placement_group) not in self.placement_groups:
                    raise InvalidRequest(
                        f"placement group {placement_group} does not exist in {region}",
                        code="SimUnknownPlacementGroup",
                    )
                # A cluster group keeps one zone: its first member's (AWS pins it so).
                zone = zone or self._member_zone(account, region, placement_group)
            if self.in_use(cloud, region, instance_type) >= self.limit(
                cloud, region, instance_type
            ):
                raise CapacityUnavailable(
                    f"insufficient {instance_type} capacity in {region}",
                    code="SimInsufficientCapacity",
                    scope=Scope.REGION,
                    region=region,
                    instance_type=instance_type,
                )
            quota = self.quota.get((account, region, instance_type))
            if quota is not None and self._account_in_use(account, region, instance_type) >= quota:
                raise QuotaExceeded(
                    f"quota of {quota} {instance_type} reached in {region}",
                    code="SimQuotaReached",
                    scope=Scope.ACCOUNT_REGION,
                    region=region,
                    instance_type=instance_type,
                )
            chosen = zone or min(
                zones,
                key=lambda z: sum(1 for i in self.instances.values() if i.zone == z),
            )
            if self.zone_full(cloud, chosen, instance_type):
                raise CapacityUnavailable(
                    f"insufficient {instance_type} capacity in {chosen}",
                    code="SimInsufficientCapacity",
                    scope=Scope.ZONE,
                    zone=chosen,
                    region=region,
                    instance_type=instance_type,
                )
            inst = SimInstance(
                instance_id=f"sim-{cloud.value}-{next(self._ids):06d}",
                account=account,
                cloud=cloud,
                intent_id=intent_id,
                instance_type=instance_type,
                region=region,
                zone=chosen,
                tags=dict(tags),
                created_at=self.clock(),
                user_data=user_data,
                placement_group=placement_group,
                image=image,
            )
            self.instances[inst.instance_id] = inst
            self._tokens[(account, intent_id)] = inst.instance_id
            if self.local_nodes is not None and user_data:
                self._boot_local(self.local_nodes, inst, types[instance_type])
            if crash:
                raise TransientError(
                    "connection reset after the create was accepted",
                    code="SimConnectionReset",
                    retryable=True,
                )
            return inst, True

    @staticmethod
    def _boot_local(nodes: LocalNodes, inst: SimInstance, it: InstanceType) -> None:
        """As a cloud, the create stands whatever the user data holds: a document that
        cannot boot leaves an instance whose engine never answers."""
        try:
            inst.private_ip = nodes.start(
                inst.instance_id, inst.user_data, it.gpus, gpu_name=f"NVIDIA {it.gpu}"
            )
        except ValueError as exc:
            log.warning("local node %s does not boot: %s", inst.instance_id, exc)

    def _take_fault(
        self, cloud: Cloud, account: str, zone: str | None, region: str, instance_type: str
    ) -> bool:
        """Raise the next injected fault, if any. Returns True for crash_after_create."""
        queue = self._faults.get((cloud, account))
        if not queue:
            return False
        fault = queue[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.pop(0)
        err: ProviderError
        match fault.kind:
            case "crash_after_create":
                return True
            case "capacity":
                err = CapacityUnavailable(
                    "injected stockout",
                    code="SimStockout",
                    scope=Scope.ZONE,
                    zone=fault.zone or zone,
                    region=region,
                    instance_type=instance_type,
                )
            case "quota":
                err = QuotaExceeded(
                    "injected quota",
                    code="SimQuota",
                    scope=Scope.ACCOUNT_REGION,
                    region=region,
                    instance_type=instance_type,
                )
            case "throttle":
                err = Throttled("injected throttle", code="SimThrottle", retryable=True)
            case "transient":
                err = TransientError("injected 503", code="SimUnavailable", retryable=True)
            case _:
                err = AuthFailed("injected auth failure", code="SimAuth", scope=Scope.ACCOUNT)
        raise err

    def _members(self, account: str, region: str, name: str) -> list[SimInstance]:
        """The group's instances that are not terminated (stopping ones still count)."""
        return [
            i
            for i in self.instances.values()
            if (i.account, i.region, i.placement_group) == (account, region, name)
            and self.status(i) != InstanceStatus.TERMINATED
        ]

    def _member_zone(self, account: str, region: str, name: str) -> str | None:
        members = self._members(account, region, name)
        return min(members, key=lambda i: i.created_at).zone if members else None

    def ensure_placement_group(
        self, account: str, region: str, name: str, tags: dict[str, str]
    ) -> None:
        """Find-or-create: an existing group (same name) is kept as it is."""
        with self._lock:
            self.placement_groups.setdefault((account, region, name), dict(tags))

    def delete_placement_group(self, account: str, region: str, name: str) -> None:
        """Gone already is success; a group with members left raises InUse."""
        with self._lock:
            if (account, region, name) not in self.placement_groups:
                return
            if self._members(account, region, name):
                raise InUse(
                    f"placement group {name} still has instances",
                    code="SimPlacementGroupInUse",
                    region=region,
                )
            del self.placement_groups[(account, region, name)]

    def terminate(self, account: str, instance_id: str) -> None:
        with self._lock:
            inst = self.instances.get(instance_id)
            if inst is None or inst.account != account:
                return  # not found (or not ours to see) means done
            if inst.terminate_requested_at is None:
                inst.terminate_requested_at = self.clock()
        self._stop_local(instance_id)

    def stop(self, account: str, instance_id: str) -> None:
        """Stop a running (or starting) instance: its host is given back, its disk kept;
        a local node's process tree ends, its files stay. Idempotent: stopping, stopped,
        or gone is success."""
        with self._lock:
            inst = self.instances.get(instance_id)
            if inst is None or inst.account != account:
                return
            if self.status(inst) not in (InstanceStatus.PENDING, InstanceStatus.RUNNING):
                return
            inst.stop_requested_at = self.clock()
        self._stop_local(instance_id)

    def start(self, account: str, instance_id: str) -> None:
        """Start a stopped instance on a host of its zone: CapacityUnavailable (zone scope)
        when none is free, or an injected fault; a running or starting one is success; an
        unknown or terminated one is NotFound, a stopping one a retryable TransientError (the
        provider contract, ``providers/base.py``). A local node boots its user data again
        (its bootstrap re-runs: weights on instance storage are gone)."""
        with self._lock:
            inst = self.instances.get(instance_id)
            if inst is None or inst.account != account:
                raise NotFound(f"no instance {instance_id}", code="SimUnknownInstance")
            status = self.status(inst)
            if status in (InstanceStatus.PENDING, InstanceStatus.RUNNING):
                return
            if status == InstanceStatus.TERMINATED or inst.terminate_requested_at is not None:
                raise NotFound(f"{instance_id} is terminated", code="SimUnknownInstance")
            if status != InstanceStatus.STOPPED:
                raise TransientError(
                    f"{instance_id} is still {status.value}", code="SimIncorrectInstanceState"
                )
            region, it = inst.region, inst.instance_type
            self._take_fault(inst.cloud, account, inst.zone, region, it)
            full = self.in_use(inst.cloud, region, it) >= self.limit(inst.cloud, region, it)
            if full or self.zone_full(inst.cloud, inst.zone, it):
                raise CapacityUnavailable(
                    f"insufficient {it} capacity in {inst.zone} to start {instance_id}",
                    code="SimInsufficientCapacity",
                    scope=Scope.ZONE,
                    zone=inst.zone,
                    region=region,
                    instance_type=it,
                )
            inst.stop_requested_at = None
            inst.started_at = self.clock()
            types = {t.name: t for t in INSTANCE_TYPES if t.cloud == inst.cloud}
            if self.local_nodes is not None and inst.user_data:
                self._boot_local(self.local_nodes, inst, types[it])

    def _stop_local(self, instance_id: str) -> None:
        """(Outside the lock: a node takes a moment to stop.)"""
        if self.local_nodes is not None:
            self.local_nodes.stop(instance_id)

    def hang(self, instance_id: str) -> None:
        """The instance runs but its model server never answers (a bad driver, weights
        that never load): only the daemon's provision timeout gets rid of it."""
        with self._lock:
            self._hung.add(instance_id)

    def hold(self, instance_id: str, requests: int) -> None:
        """The instance's engine holds this many requests (a drain waits for them)."""
        with self._lock:
            self._held[instance_id] = requests

    def held(self, instance_id: str) -> int:
        with self._lock:
            return self._held.get(instance_id, 0)

    def interrupt(self, instance_id: str) -> None:
        """The cloud takes an instance back on its own (a spot interruption, a host that
        fails while booting): it is stopping from now on."""
        with self._lock:
            inst = self.instances.get(instance_id)
            if inst is not None and inst.terminate_requested_at is None:
                inst.terminate_requested_at = self.clock()
        self._stop_local(instance_id)

    def reap(self) -> None:
        """Forget instances terminated long ago (a real cloud stops listing them)."""
        with self._lock:
            now = self.clock()
            for iid, inst in list(self.instances.items()):
                t = inst.terminate_requested_at
                if t is not None and now - t > self.timings_for(inst).terminate_s + 3600:
                    del self.instances[iid]

    def new_image(
        self,
        region: str,
        name: str,
        *,
        account: str = "",
        tags: dict[str, str] | None = None,
        source_instance_id: str = "",
    ) -> SimImage:
        """Find-or-create by (account, region, name), as AMI names are unique."""
        with self._lock:
            for img in self.images.values():
                if (img.account, img.region, img.name) == (account, region, name):
                    return img
            img = SimImage(
                f"sim-img-{next(self._ids):06d}",
                name,
                region,
                self.clock(),
                account,
                dict(tags or {}),
                source_instance_id,
            )
            self.images[img.image_id] = img
            return img

    @property
    def lock(self) -> threading.RLock:
        return self._lock
