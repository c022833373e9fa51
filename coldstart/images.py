"""Baked machine images: which to build, which to boot nodes from, which to delete. Pure: no
clock reads, no I/O; the image job (``controlplane/loop/images.py``) gathers the input and
applies the plan.

A baked image is keyed by (customer, account, region, runtime image): images live in one
account of one cloud region, and what is baked in is the GPU driver check, the container
runtime and the engine's image layers pulled (coldstart.md §1.2: a baked image removes
roughly 3-15 min of bootstrap per node; §1.3: a 10-30 GB engine image is minutes to pull).
A changed runtime image is a new key, so it is built anew, and the old key's images go once
the new one has been ready for the grace period.

A build's life (one row per build; its id is the builder's intent id)::

    pending   the row is written; the builder's create has not returned
    building  the builder runs its bootstrap in bake mode; waiting for its "baked" report
    imaging   it reported baked; the cloud is making the image from it
    ready     the image exists; nodes of its key boot from the newest ready one
    failed    the builder failed, never reported, or the image failed (nodes keep booting
              the base image with the full bootstrap: the next slower path)
    deleting  superseded or stale: its image is being deleted
    deleted   gone (terminal)

What the plan says, per key:

- *use*: the newest ready build (by when it became ready).
- *start*: a wanted key with no build in flight, no ready image younger than
  ``max_age_s`` (freshness: drivers and base images get security fixes), and no failure
  in the last ``retry_s`` (a build that cannot succeed is not retried hot).
- *timed out*: a build in flight longer than ``build_s`` (it never reported, or the image
  never became available): failed, with an event; nothing waits for it.
- *delete*: a ready image superseded by a newer ready one of its key, or of its location
  (same customer, account and region: a changed runtime image) for ``grace_s``; a ready
  image of a key nobody wants, older than ``max_age_s``; a failed build's image, if it made
  one; and every deleting one again (delete is idempotent) until it is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class BuildState(StrEnum):
    PENDING = "pending"
    BUILDING = "building"
    IMAGING = "imaging"
    READY = "ready"
    FAILED = "failed"
    DELETING = "deleting"
    DELETED = "deleted"

    @property
    def in_flight(self) -> bool:
        return self in (BuildState.PENDING, BuildState.BUILDING, BuildState.IMAGING)


@dataclass(frozen=True, order=True)
class ImageKey:
    customer: str
    account: str
    region: str
    runtime_image: str

    @property
    def location(self) -> tuple[str, str, str]:
        return (self.customer, self.account, self.region)


@dataclass(frozen=True)
class Wanted:
    """A key some model's pools need, with what its builder launches as (the cheapest of
    those pools' instance types: the bootstrap checks the driver on a real GPU)."""

    key: ImageKey
    cloud: str
    instance_type: str
    gpus: int
    model: str = ""  # one model of the key, whose boot the builder runs in bake mode
    pool_id: str = ""  # the pool the builder's instance type comes from


@dataclass(frozen=True)
class Build:
    id: str
    key: ImageKey
    state: BuildState
    created_at: float
    state_since: float  # when it entered its state
    ready_at: float | None = None
    has_image: bool = False  # the cloud made (or may have made) an image for it


@dataclass(frozen=True)
class ImageTimings:
    # A builder boots a GPU VM (minutes; an OCI bare-metal shape can take >10 min,
    # coldstart.md §1.1), installs nothing, pulls a 10-30 GB image (§1.3), and the cloud
    # snapshots its disk (minutes for a 200 GB disk): an hour is generous.
    build_s: float = 3600.0
    retry_s: float = 3600.0
    grace_s: float = 3600.0  # an older image is kept this long after a newer one is ready
    max_age_s: float = 7 * 86400.0  # rebuilt after a week: driver and OS fixes
    # An image tagged as gpucap's that no build row knows is deleted by gc only once it is
    # this old: the cloud's listing may show a create before its row's image id is written.
    orphan_grace_s: float = 3600.0


@dataclass(frozen=True)
class ImagePlan:
    start: tuple[Wanted, ...] = ()
    timed_out: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    use: Mapping[ImageKey, str] = field(default_factory=dict)


def newest_ready(builds: Iterable[Build]) -> Build | None:
    ready = [b for b in builds if b.state == BuildState.READY and b.ready_at is not None]
    return max(ready, key=lambda b: (b.ready_at, b.id), default=None)


def current(builds: Iterable[Build]) -> dict[ImageKey, str]:
    """The build new nodes of each key boot from: its newest ready one."""
    by_key = _by_key(builds)
    return {k: n.id for k, bs in by_key.items() if (n := newest_ready(bs)) is not None}


def plan(
    wanted: Sequence[Wanted], builds: Sequence[Build], now: float, t: ImageTimings
) -> ImagePlan:
    by_key = _by_key(builds)
    wanted_keys = {w.key for w in wanted}
    use = current(builds)
    # The newest ready build of each location among the wanted keys (a changed runtime
    # image supersedes the old key's images once its own is ready).
    location_newest = _location_newest(by_key, wanted_keys)

    timed_out = sorted(
        b.id for b in builds if b.state.in_flight and now - b.created_at >= t.build_s
    )
    start = []
    for w in sorted(wanted, key=lambda w: w.key):
        bs = by_key.get(w.key, [])
        if any(b.state.in_flight and b.id not in timed_out for b in bs):
            continue
        fresh = newest_ready(bs)
        if fresh is not None and now - (fresh.ready_at or 0.0) < t.max_age_s:
            continue
        failed = [b.state_since for b in bs if b.state == BuildState.FAILED]
        if _recent(failed, now, t.retry_s) or any(b.id in timed_out for b in bs):
            continue
        start.append(w)

    delete = []
    for b in builds:
        if b.state == BuildState.DELETING or (b.state == BuildState.FAILED and b.has_image):
            delete.append(b.id)
        elif b.state == BuildState.READY:
            newer = _newer(b, by_key, wanted_keys, location_newest)
            if newer is not None:
                if now - (newer.ready_at or 0.0) >= t.grace_s:
                    delete.append(b.id)
            elif b.key not in wanted_keys and now - (b.ready_at or 0.0) >= t.max_age_s:
                delete.append(b.id)
    return ImagePlan(
        start=tuple(start), timed_out=tuple(timed_out), delete=tuple(sorted(delete)), use=use
    )


def superseded(builds: Sequence[Build], wanted_keys: Iterable[ImageKey]) -> dict[str, str]:
    """Each ready build a newer ready one replaces (by the plan's own rule: a newer one of
    its key, or, for a key nobody wants, of its location), with that newer build's id."""
    by_key = _by_key(builds)
    wanted = set(wanted_keys)
    location_newest = _location_newest(by_key, wanted)
    out = {}
    for b in builds:
        if b.state == BuildState.READY:
            newer = _newer(b, by_key, wanted, location_newest)
            if newer is not None:
                out[b.id] = newer.id
    return out


def _by_key(builds: Iterable[Build]) -> dict[ImageKey, list[Build]]:
    out: dict[ImageKey, list[Build]] = {}
    for b in builds:
        out.setdefault(b.key, []).append(b)
    return out


def _location_newest(
    by_key: Mapping[ImageKey, list[Build]], wanted_keys: set[ImageKey]
) -> dict[tuple[str, str, str], Build]:
    """The newest ready build of each location among the wanted keys."""
    out: dict[tuple[str, str, str], Build] = {}
    for k in wanted_keys:
        n = newest_ready(by_key.get(k, []))
        cur = out.get(k.location)
        if n is not None and (cur is None or (n.ready_at or 0.0) > (cur.ready_at or 0.0)):
            out[k.location] = n
    return out


def _recent(times: Sequence[float], now: float, within_s: float) -> bool:
    return any(now - at < within_s for at in times)


def _newer(
    b: Build,
    by_key: Mapping[ImageKey, list[Build]],
    wanted_keys: set[ImageKey],
    location_newest: Mapping[tuple[str, str, str], Build],
) -> Build | None:
    """The ready build that supersedes ``b``, if any: a newer one of its own key, else
    (for a key nobody wants) the newest of its location."""
    own = newest_ready(by_key.get(b.key, []))
    if own is not None and own.id != b.id:
        return own
    if b.key in wanted_keys:
        return None
    other = location_newest.get(b.key.location)
    if other is not None and (other.ready_at or 0.0) > (b.ready_at or 0.0):
        return other
    return None
