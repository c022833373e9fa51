"""The simulated world. Thread-safe: the daemon's jobs and the gRPC server share it.

It reads a clock (it stands in for a real cloud, which is on the I/O side of the line); the
clock is injectable so tests drive time by hand.

Its state lives in a :class:`providers.sim.state.SimState`: in memory by default, or in a
SQLite file several processes share (:func:`open_shared`), where every verb is one
transaction. Local nodes with a shared file: the process that booted an instance's node
owns its process tree (recorded in the instance as ``node_owner``); another process sees
the instance's state and address in the file, and its terminate or stop is carried out by
the owner's :meth:`SimCloud.sync_local_nodes` (or by itself when the owner is gone). A live
instance whose owner is gone is taken over by the next process that syncs: it adopts the
node's process tree while it runs, or boots the node again from its disk."""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.base import InstanceStatus
from providers.errors import (
    CapacityUnavailable,
    InUse,
    InvalidRequest,
    NotFound,
    QuotaExceeded,
    Scope,
    TransientError,
)
from providers.sim import faults
from providers.sim.faults import ERRORS, KINDS, Fault
from providers.sim.state import MemoryState, SimState, SqliteState, Table
from schema.catalog import INSTANCE_TYPES, REGIONS, InstanceType
from schema.types import Cloud

if TYPE_CHECKING:
    from providers.sim.local import LocalNodes

log = logging.getLogger(__name__)
FAULTS = ERRORS  # (kept for callers: the faults that refuse a create)


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
    # Its local node: booted before (the next boot is a restart from its disk), the process
    # that runs its tree (``local.process_identity``) and the tree's process group.
    booted: bool = False
    node_owner: str | None = None
    node_group: int | None = None


def _instance_from(d: dict[str, Any]) -> SimInstance:
    return SimInstance(**{**d, "cloud": Cloud(d["cloud"])})


@dataclass
class SimImage:
    image_id: str
    name: str
    region: str
    created_at: float
    account: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    source_instance_id: str = ""


# The world's tables (``providers.sim.state``); keys are strings or tuples of strings.
INSTANCES: Table[str, SimInstance] = Table(
    "instances",
    lambda i: {**vars(i), "cloud": i.cloud.value},
    _instance_from,
    # (on fields an instance never changes: see providers.sim.state)
    indexes=(
        ("site", lambda i: (i.account, i.cloud.value, i.region)),  # a region's listing
        ("intent", lambda i: (i.account, i.intent_id)),  # a create's find-first
        ("pool", lambda i: (i.cloud.value, i.region, i.instance_type)),  # capacity
        ("zone", lambda i: i.zone),  # a create's least-used zone
    ),
)
TOKENS: Table[tuple[str, str], str] = Table("tokens")  # (account, token) -> instance id
IMAGES: Table[str, SimImage] = Table("images", vars, lambda d: SimImage(**d))
# A gang's placement object (an AWS placement group, a GCP placement policy), by
# (account, region, name) -> its ownership tags.
GROUPS: Table[tuple[str, str, str], dict[str, str]] = Table("placement_groups")
OBJECTS: Table[str, int] = Table("objects")  # uri -> size
OBJECT_DATA: Table[str, bytes] = Table(  # bodies, for objects put with data
    "object_data", lambda b: base64.b64encode(b).decode(), base64.b64decode
)
FAULTS_QUEUED: Table[tuple[str, str], list[Fault]] = Table(  # (cloud, account) -> queue
    "faults", lambda q: [vars(f) for f in q], lambda q: [Fault(**f) for f in q]
)
CAPACITY: Table[tuple[str, str, str], int] = Table("capacity")  # (cloud, region, type)
QUOTA: Table[tuple[str, str, str], int] = Table("quota")  # (account, region, type)
ZONE_CAPACITY: Table[tuple[str, str, str], int] = Table("zone_capacity")  # (cloud, zone, type)
HUNG: Table[str, bool] = Table("hung")  # instances whose model server never answers
HELD: Table[str, int] = Table("held")  # requests each instance's engine holds (default 0)
COUNTERS: Table[str, int] = Table("counters")  # "serial" (ids), "create_calls"


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
    sleep: Callable[[float], None] = time.sleep  # ``answer``: a latency fault waits here
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

    # Where the world lives (None: this process's memory). With a shared file the
    # ``capacity``, ``quota`` and ``zone_capacity`` given here are written into it, and
    # read back from it (change them with ``set_capacity``); in memory they are the tables.
    state: SimState | None = None

    def __post_init__(self) -> None:
        limits = {CAPACITY: self.capacity, QUOTA: self.quota, ZONE_CAPACITY: self.zone_capacity}
        if self.state is None:
            self.state = MemoryState({t.name: d for t, d in limits.items()})
        else:
            with self.state.transaction():
                for table, given in limits.items():
                    for key, n in given.items():
                        self.state.put(table, key, n)
        self._state: SimState = self.state
        self._owed = threading.local()  # a latency fault's delay, owed by this thread

    def answer(self) -> None:
        """Wait out the delay a latency fault put on this thread's last create answer.
        Called by the verb's outermost caller once its transaction committed (the
        provider's create), so the world, and the processes sharing its file, go on
        meanwhile: the create stands, only its answer is late."""
        delay, self._owed.delay = getattr(self._owed, "delay", 0.0), 0.0
        if delay:
            self.sleep(delay)

    # ---- the world's tables, as dicts (in memory the live ones, from a file a copy) ---
    @property
    def instances(self) -> dict[str, SimInstance]:
        return self._state.view(INSTANCES)

    @property
    def images(self) -> dict[str, SimImage]:
        return self._state.view(IMAGES)

    @property
    def placement_groups(self) -> dict[tuple[str, str, str], dict[str, str]]:
        return self._state.view(GROUPS)

    @property
    def objects(self) -> dict[str, int]:
        return self._state.view(OBJECTS)

    @property
    def object_data(self) -> dict[str, bytes]:
        return self._state.view(OBJECT_DATA)

    @property
    def create_calls(self) -> int:
        """For load/accounting views, never asserted as a call log."""
        return self._state.get(COUNTERS, "create_calls") or 0

    def transaction(self) -> AbstractContextManager[Any]:
        """One verb's worth of reads and writes, atomic (re-entrant)."""
        return self._state.transaction()

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """``with cloud.lock:`` as before the state seam: one transaction."""
        return self._state.transaction()

    def _count(self, name: str) -> int:
        n = (self._state.get(COUNTERS, name) or 0) + 1
        self._state.put(COUNTERS, name, n)
        return n

    def instance(self, instance_id: str) -> SimInstance | None:
        return self._state.get(INSTANCES, instance_id)

    def instances_in(self, account: str, cloud: Cloud, region: str) -> list[SimInstance]:
        """The account's instances in one region (terminated ones too, until reaped)."""
        return self._state.where(INSTANCES, "site", (account, cloud.value, region))

    def instances_with_intent(self, account: str, intent_id: str) -> list[SimInstance]:
        """The account's instances created with this intent (any cloud, any status)."""
        return self._state.where(INSTANCES, "intent", (account, intent_id))

    def image(self, image_id: str) -> SimImage | None:
        return self._state.get(IMAGES, image_id)

    def images_of(self, account: str, region: str) -> list[SimImage]:
        return sorted(
            (i for i in self._state.values(IMAGES) if (i.account, i.region) == (account, region)),
            key=lambda i: i.image_id,
        )

    def delete_image(self, region: str, image_id: str) -> None:
        with self._state.transaction():
            img = self._state.get(IMAGES, image_id)
            if img is not None and img.region == region:
                self._state.delete(IMAGES, image_id)

    def object_size(self, uri: str) -> int | None:
        return self._state.get(OBJECTS, uri)

    def object_body(self, uri: str) -> bytes | None:
        return self._state.get(OBJECT_DATA, uri)

    def object_uris(self, prefix: str) -> list[str]:
        return sorted(u for u in self._state.view(OBJECTS) if u.startswith(prefix))

    def copy_object(self, source_uri: str, dest_uri: str) -> None:
        with self._state.transaction():
            size = self._state.get(OBJECTS, source_uri)
            if size is None:
                raise NotFound(f"object {source_uri} not found", code="NoSuchKey")
            self._state.put(OBJECTS, dest_uri, size)
            data = self._state.get(OBJECT_DATA, source_uri)
            if data is not None:
                self._state.put(OBJECT_DATA, dest_uri, data)

    def delete_object(self, uri: str) -> None:
        with self._state.transaction():
            self._state.delete(OBJECTS, uri)
            self._state.delete(OBJECT_DATA, uri)

    # ---- configuration -------------------------------------------------------------
    def inject(
        self,
        cloud: Cloud,
        account: str,
        fault: str,
        count: int = 1,
        zone: str | None = None,
        *,
        delay_s: float = 0.0,
        skip: int = 0,
    ) -> None:
        """Make the next ``count`` creates of this account (after ``skip`` more) meet
        ``fault``, one of ``providers.sim.faults.KINDS``."""
        if fault not in KINDS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(KINDS)}")
        if count < 1 or skip < 0 or delay_s < 0:
            raise ValueError("count must be at least 1, skip and delay_s at least 0")
        with self._state.transaction():
            key = (cloud.value, account)
            queue = self._state.get(FAULTS_QUEUED, key) or []
            queue.append(Fault(fault, count, zone, delay_s=delay_s, skip=skip))
            self._state.put(FAULTS_QUEUED, key, queue)

    def clear_faults(self) -> None:
        """Forget every injected fault not yet raised (the outage is over)."""
        with self._state.transaction():
            for key in list(self._state.view(FAULTS_QUEUED)):
                self._state.delete(FAULTS_QUEUED, key)

    def set_capacity(self, cloud: Cloud, region: str, instance_type: str, n: int) -> None:
        self._state.put(CAPACITY, (cloud.value, region, instance_type), n)

    def set_quota(self, account: str, region: str, instance_type: str, n: int) -> None:
        self._state.put(QUOTA, (account, region, instance_type), n)

    def set_zone_capacity(self, cloud: Cloud, zone: str, instance_type: str, n: int) -> None:
        self._state.put(ZONE_CAPACITY, (cloud.value, zone, instance_type), n)

    def put_object(self, uri: str, size: int, data: bytes | None = None) -> None:
        with self._state.transaction():
            self._state.put(OBJECTS, uri, size)
            if data is not None:
                self._state.put(OBJECT_DATA, uri, data)

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
        with self._state.transaction():
            inst = self._state.get(INSTANCES, instance_id)
            if inst is None or self._state.get(HUNG, instance_id):
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
        return self._holding(
            self._state.where(INSTANCES, "pool", self._pool(cloud, region, instance_type))
        )

    @staticmethod
    def _pool(cloud: Cloud, region: str, instance_type: str) -> tuple[str, str, str]:
        return (cloud.value, region, instance_type)

    def pool_full(self, cloud: Cloud, region: str, instance_type: str) -> bool:
        """``in_use >= limit``, without counting when fewer instances of the type were ever
        made there than the limit (terminated ones included, until reaped)."""
        limit = self.limit(cloud, region, instance_type)
        key = self._pool(cloud, region, instance_type)
        if self._state.count(INSTANCES, "pool", key) < limit:
            return False
        return self._holding(self._state.where(INSTANCES, "pool", key)) >= limit

    def zone_full(self, cloud: Cloud, zone: str, instance_type: str) -> bool:
        limit = self._state.get(ZONE_CAPACITY, (cloud.value, zone, instance_type))
        if limit is None:
            return False
        here = self._state.where(INSTANCES, "zone", zone)
        return (
            self._holding(i for i in here if i.cloud == cloud and i.instance_type == instance_type)
            >= limit
        )

    def _account_in_use(self, account: str, region: str, instance_type: str) -> int:
        return self._alive(instance_type, lambda i: i.account == account and i.region == region)

    def _alive(self, instance_type: str, where: Callable[[SimInstance], bool]) -> int:
        """Instances of the type holding a host that ``where`` picks."""
        return self._holding(
            i
            for i in self._state.values(INSTANCES)
            if i.instance_type == instance_type and where(i)
        )

    def _holding(self, instances: Iterable[SimInstance]) -> int:
        """How many hold a host (not terminated, not stopped): a stopped instance gives its
        host back, so its start can find none."""
        return sum(
            1
            for i in instances
            if self.status(i) not in (InstanceStatus.TERMINATED, InstanceStatus.STOPPED)
        )

    def limit(self, cloud: Cloud, region: str, instance_type: str) -> int:
        n = self._state.get(CAPACITY, (cloud.value, region, instance_type))
        return self.default_capacity if n is None else n

    def live_instances_with_intent(self, intent_id: str) -> int:
        with self._state.transaction():
            return sum(
                1
                for i in self._state.values(INSTANCES)
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
        inst, created, slow = self._launch(
            cloud,
            account,
            intent_id=intent_id,
            instance_type=instance_type,
            region=region,
            zone=zone,
            tags=tags,
            user_data=user_data,
            placement_group=placement_group,
            image=image,
        )
        # A latency fault's delay is waited by ``answer``, outside the caller's transaction.
        self._owed.delay = getattr(self._owed, "delay", 0.0) + slow
        if created is None:  # crash_after_create: the create stands, its answer is lost
            raise TransientError(
                "connection reset after the create was accepted",
                code="SimConnectionReset",
                retryable=True,
            )
        return inst, created

    def _launch(
        self,
        cloud: Cloud,
        account: str,
        *,
        intent_id: str,
        instance_type: str,
        region: str,
        zone: str | None,
        tags: dict[str, str],
        user_data: str,
        placement_group: str | None,
        image: str | None,
    ) -> tuple[SimInstance, bool | None, float]:
        """``launch`` as one transaction: (instance, created, seconds its answer takes),
        created None when an injected crash_after_create loses the answer (raised once the
        create committed)."""
        with self._state.transaction():
            self._count("create_calls")
            fault = self._take_fault(cloud, account, zone, region, instance_type)
            crash = fault is not None and fault.kind == "crash_after_create"
            slow = fault.delay_s if fault is not None and fault.kind == "latency" else 0.0
            # Idempotency token: the same token returns the same instance (AWS ClientToken);
            # the same token with other parameters is refused, as EC2 refuses it
            # (IdempotentParameterMismatch) and OCI its opc-retry-token. Read inside the
            # transaction: with a shared file, another process's create with this token
            # has committed before this read or waits for this one to.
            known_id = self._state.get(TOKENS, (account, intent_id))
            known = None if known_id is None else self._state.get(INSTANCES, known_id)
            if known is not None:
                inst = known
                if (inst.image, inst.user_data) != (image, user_data):
                    raise InvalidRequest(
                        f"token {intent_id} was used with other parameters",
                        code="IdempotentParameterMismatch",
                        region=region,
                    )
                return inst, False, slow
            types = {t.name: t for t in INSTANCE_TYPES if t.cloud == cloud}
            if instance_type not in types:
                raise InvalidRequest(
                    f"{instance_type} is not a {cloud.value} instance type",
                    code="InvalidInstanceType",
                    instance_type=instance_type,
                )
            if region not in REGIONS[cloud]:
                raise InvalidRequest(f"unknown region {region}", code="InvalidRegion")
            img = None if image is None else self._state.get(IMAGES, image)
            if image is not None and (img is None or img.region != region):
                raise InvalidRequest(f"image {image} not found in {region}", code="InvalidAMIID")
            zones = zones_of(cloud, region)
            if zone is not None and zone not in zones:
                raise InvalidRequest(f"zone {zone} is not in {region}", code="InvalidZone")
            if placement_group is not None:
                if self._state.get(GROUPS, (account, region, placement_group)) is None:
                    raise InvalidRequest(
                        f"placement group {placement_group} does not exist in {region}",
                        code="SimUnknownPlacementGroup",
                    )
                # A cluster group keeps one zone: its first member's (AWS pins it so).
                zone = zone or self._member_zone(account, region, placement_group)
            if self.pool_full(cloud, region, instance_type):
                raise CapacityUnavailable(
                    f"insufficient {instance_type} capacity in {region}",
                    code="SimInsufficientCapacity",
                    scope=Scope.REGION,
                    region=region,
                    instance_type=instance_type,
                )
            quota = self._state.get(QUOTA, (account, region, instance_type))
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
                key=lambda z: self._state.count(INSTANCES, "zone", z),
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
                instance_id=f"sim-{cloud.value}-{self._count('serial'):06d}",
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
            if self.local_nodes is not None and user_data:
                self._boot_local(self.local_nodes, inst, types[instance_type])
            self._state.put(INSTANCES, inst.instance_id, inst)
            self._state.put(TOKENS, (account, intent_id), inst.instance_id)
            return inst, None if crash else True, slow

    def _boot_local(self, nodes: LocalNodes, inst: SimInstance, it: InstanceType) -> None:
        """As a cloud, the create stands whatever the user data holds: a document that
        cannot boot leaves an instance whose engine never answers. (The caller puts
        ``inst`` back.)"""
        from providers.sim.local import process_identity

        # Addresses other instances hold (another process's node may not answer yet); a
        # stopped instance keeps its address, as a cloud keeps its private IP.
        avoid = {
            i.private_ip
            for i in self._state.values(INSTANCES)
            if i.private_ip
            and i.instance_id != inst.instance_id
            and i.booted
            and i.terminate_requested_at is None
        }
        try:
            inst.private_ip = nodes.start(
                inst.instance_id,
                inst.user_data,
                it.gpus,
                gpu_name=f"NVIDIA {it.gpu}",
                again=inst.booted,
                before=inst.private_ip,
                avoid=avoid,
            )
        except (ValueError, OSError) as exc:  # (OSError: a disk that lost its files, e.g.
            # an image builder's, whose bootstrap cleans up before the image is taken)
            log.warning("local node %s does not boot: %s", inst.instance_id, exc)
        else:
            inst.booted = True
        # (Owned even when it does not boot: no other process tries again while this runs.)
        inst.node_owner = process_identity()
        inst.node_group = nodes.group_of(inst.instance_id)

    def _take_fault(
        self, cloud: Cloud, account: str, zone: str | None, region: str, instance_type: str
    ) -> Fault | None:
        """Raise the next injected fault of the ``ERRORS`` kinds; the others are returned
        for the caller to carry out (None: no fault this time)."""
        key = (cloud.value, account)
        queue = self._state.get(FAULTS_QUEUED, key)
        if not queue:
            return None
        fault = faults.take(queue)
        self._state.put(FAULTS_QUEUED, key, queue)
        if fault is not None and fault.kind in ERRORS:
            raise faults.error_for(fault, zone, region, instance_type)
        return fault

    def _members(self, account: str, region: str, name: str) -> list[SimInstance]:
        """The group's instances that are not terminated (stopping ones still count)."""
        return [
            i
            for i in self._state.values(INSTANCES)
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
        with self._state.transaction():
            if self._state.get(GROUPS, (account, region, name)) is None:
                self._state.put(GROUPS, (account, region, name), dict(tags))

    def delete_placement_group(self, account: str, region: str, name: str) -> None:
        """Gone already is success; a group with members left raises InUse."""
        with self._state.transaction():
            if self._state.get(GROUPS, (account, region, name)) is None:
                return
            if self._members(account, region, name):
                raise InUse(
                    f"placement group {name} still has instances",
                    code="SimPlacementGroupInUse",
                    region=region,
                )
            self._state.delete(GROUPS, (account, region, name))

    def terminate(self, account: str, instance_id: str) -> None:
        with self._state.transaction():
            inst = self._state.get(INSTANCES, instance_id)
            if inst is None or inst.account != account:
                return  # not found (or not ours to see) means done
            if inst.terminate_requested_at is None:
                inst.terminate_requested_at = self.clock()
            orphan = self._release_orphan(inst)
            self._state.put(INSTANCES, instance_id, inst)
        self._stop_local(instance_id, orphan)

    def stop(self, account: str, instance_id: str) -> None:
        """Stop a running (or starting) instance: its host is given back, its disk kept;
        a local node's process tree ends, its files stay. Idempotent: stopping, stopped,
        or gone is success."""
        with self._state.transaction():
            inst = self._state.get(INSTANCES, instance_id)
            if inst is None or inst.account != account:
                return
            if self.status(inst) not in (InstanceStatus.PENDING, InstanceStatus.RUNNING):
                return
            inst.stop_requested_at = self.clock()
            orphan = self._release_orphan(inst)
            self._state.put(INSTANCES, instance_id, inst)
        self._stop_local(instance_id, orphan)

    def start(self, account: str, instance_id: str) -> None:
        """Start a stopped instance on a host of its zone: CapacityUnavailable (zone scope)
        when none is free, or an injected fault; a running or starting one is success; an
        unknown or terminated one is NotFound, a stopping one a retryable TransientError (the
        provider contract, ``providers/base.py``). A local node boots its user data again
        (its bootstrap re-runs: weights on instance storage are gone)."""
        with self._state.transaction():
            inst = self._state.get(INSTANCES, instance_id)
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
            if self.pool_full(inst.cloud, region, it) or self.zone_full(inst.cloud, inst.zone, it):
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
            self._state.put(INSTANCES, instance_id, inst)

    def _release_orphan(self, inst: SimInstance) -> tuple[int, Path] | None:
        """An instance being stopped whose node another process booted and no process owns
        any more: its process group, to end here (None: this process's node, or its
        owner's to end). Clears the ownership the caller puts back."""
        from providers.sim.local import owner_alive, process_identity

        nodes, group = self.local_nodes, inst.node_group
        if nodes is None or group is None or inst.node_owner == process_identity():
            return None
        if owner_alive(inst.node_owner):
            return None  # its owner's sync_local_nodes ends it
        inst.node_owner, inst.node_group = None, None
        return group, nodes.home_of(inst.instance_id)

    def _stop_local(self, instance_id: str, orphan: tuple[int, Path] | None = None) -> None:
        """(Outside the transaction: a node takes a moment to stop.)"""
        from providers.sim.local import kill_group

        if self.local_nodes is not None:
            self.local_nodes.stop(instance_id)
        if orphan is not None:
            kill_group(*orphan)

    def sync_local_nodes(self) -> None:
        """With a shared state file, run every second or so in each process with local
        nodes: end this process's nodes whose instances another process stopped or
        terminated (or forgot), and take over live instances whose owner is gone (adopt
        the node's process tree if it still runs, else boot it again from its disk). Two
        processes never take one node: the claim is made in the file's transaction."""
        from providers.sim.local import owner_alive, process_identity

        nodes = self.local_nodes
        if nodes is None:
            return
        me = process_identity()
        to_stop: list[str] = []
        orphans: list[tuple[int, Path]] = []
        with self._state.transaction():
            types = {(t.cloud, t.name): t for t in INSTANCE_TYPES}
            for inst in self._state.values(INSTANCES):
                iid = inst.instance_id
                live = inst.terminate_requested_at is None and inst.stop_requested_at is None
                if inst.node_owner == me:
                    if not live:
                        to_stop.append(iid)
                    continue
                if nodes.owns(iid) or not inst.user_data or owner_alive(inst.node_owner):
                    continue
                if not live:  # (stopped by a process without local nodes)
                    if inst.node_group is not None:
                        orphans.append((inst.node_group, nodes.home_of(iid)))
                        inst.node_owner, inst.node_group = None, None
                        self._state.put(INSTANCES, iid, inst)
                    continue
                group, address = inst.node_group, inst.private_ip
                try:
                    if group is not None and address and nodes.adopt(iid, address, group):
                        inst.node_owner = me
                        log.info("local node %s adopted (process group %d)", iid, group)
                    else:
                        self._boot_local(nodes, inst, types[(inst.cloud, inst.instance_type)])
                        log.info("local node %s booted again (its owner is gone)", iid)
                except Exception:  # (one node must not keep the others from being taken)
                    log.exception("local node %s not taken over", iid)
                    continue
                self._state.put(INSTANCES, iid, inst)
            to_stop += [i for i in nodes.ids() if self._state.get(INSTANCES, i) is None]
        for iid in to_stop:
            nodes.stop(iid)
        for orphan in orphans:
            from providers.sim.local import kill_group

            kill_group(*orphan)

    def release_local_nodes(self) -> None:
        """End every local node this process runs and give up their ownership in the
        state, so the next process to sync boots them again (the instances still run, as
        far as the cloud knows). No process of theirs is left behind."""
        from providers.sim.local import process_identity

        if self.local_nodes is None:
            return
        self.local_nodes.close()
        me = process_identity()
        with self._state.transaction():
            for inst in self._state.values(INSTANCES):
                if inst.node_owner == me:
                    inst.node_owner, inst.node_group = None, None
                    self._state.put(INSTANCES, inst.instance_id, inst)

    def hang(self, instance_id: str) -> None:
        """The instance runs but its model server never answers (a bad driver, weights
        that never load): only the daemon's provision timeout gets rid of it."""
        self._state.put(HUNG, instance_id, True)

    def unhang(self, instance_id: str) -> None:
        """Its model server answers again."""
        self._state.delete(HUNG, instance_id)

    @property
    def _hung(self) -> _HungSet:
        """(Read by tests written when this was a set: ``discard`` is ``unhang``.)"""
        return _HungSet(self)

    def hold(self, instance_id: str, requests: int) -> None:
        """The instance's engine holds this many requests (a drain waits for them)."""
        self._state.put(HELD, instance_id, requests)

    def held(self, instance_id: str) -> int:
        return self._state.get(HELD, instance_id) or 0

    def interrupt(self, instance_id: str) -> None:
        """The cloud takes an instance back on its own (a spot interruption, a host that
        fails while booting): it is stopping from now on."""
        orphan = None
        with self._state.transaction():
            inst = self._state.get(INSTANCES, instance_id)
            if inst is not None and inst.terminate_requested_at is None:
                inst.terminate_requested_at = self.clock()
                orphan = self._release_orphan(inst)
                self._state.put(INSTANCES, instance_id, inst)
        self._stop_local(instance_id, orphan)

    def reap(self) -> None:
        """Forget instances terminated long ago (a real cloud stops listing them), and
        their idempotency tokens."""
        with self._state.transaction():
            now = self.clock()
            for inst in self._state.values(INSTANCES):
                t = inst.terminate_requested_at
                if t is not None and now - t > self.timings_for(inst).terminate_s + 3600:
                    self._state.delete(INSTANCES, inst.instance_id)
                    token = (inst.account, inst.intent_id)
                    if self._state.get(TOKENS, token) == inst.instance_id:
                        self._state.delete(TOKENS, token)

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
        with self._state.transaction():
            for img in self._state.values(IMAGES):
                if (img.account, img.region, img.name) == (account, region, name):
                    return img
            img = SimImage(
                f"sim-img-{self._count('serial'):06d}",
                name,
                region,
                self.clock(),
                account,
                dict(tags or {}),
                source_instance_id,
            )
            self._state.put(IMAGES, img.image_id, img)
            return img


@dataclass
class _HungSet:
    cloud: SimCloud

    def discard(self, instance_id: str) -> None:
        self.cloud.unhang(instance_id)

    def __contains__(self, instance_id: object) -> bool:
        if not isinstance(instance_id, str):
            return False
        hung: bool | None = self.cloud._state.get(HUNG, instance_id)
        return hung is True


def open_shared(path: Path | str, **kwargs: Any) -> SimCloud:
    """A :class:`SimCloud` on a state file several processes share (created if missing),
    on wall-clock time unless ``clock`` is given: the file's timestamps must mean the same
    in every process and after a restart."""
    kwargs.setdefault("clock", time.time)
    return SimCloud(state=SqliteState(path), **kwargs)
