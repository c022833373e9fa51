"""The image job: baked machine images built, used and garbage-collected
(``coldstart.images`` decides; this module gathers its input and applies it).

A build is one ``machine_images`` row, written before any provider call; its id is the
builder's intent id (and so the cloud's idempotency token) and names the image, so a create
retried after a crash finds what the first made. A build advances one step a pass:

- ``pending``: the builder is created with bake-mode user data (``bootstrap.render`` with
  ``bake=True``: driver check, container runtime, the engine's image pulled, then it
  reports ``baked`` to the phase API and stops) -> ``building``;
- ``building``: once it reported baked, the image is asked for from its disk (the row is
  ``imaging`` before the call) -> ``imaging``;
- ``imaging``: the cloud says the image is available -> ``ready``, and the builder is
  terminated; failed or gone -> ``failed``.

A build that never reports, or whose image never becomes available, times out
(``ImageTimings.build_s``) with an ``image.build_timed_out`` event: its builder is
terminated and nodes keep booting the base image with the full bootstrap, so nothing ever
waits for an image. Superseded and stale images are deleted (``deleting`` before the call).
Builds need a boot config (the daemon's report URL and token key): without one a builder's
report could not reach the daemon, so none is started.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from bootstrap import render
from coldstart.images import Build, BuildState, ImageKey, Wanted, plan
from controlplane.loop.context import LoopContext, epoch
from controlplane.node_boot import node_boot
from controlplane.node_tokens import TOKEN_TTL_S, digest
from controlplane.placement.plan import option_for
from controlplane.store.events import record_event
from controlplane.store.models import Account, MachineImage, Pool
from controlplane.store.models import Model as ModelRow
from providers.base import (
    MANAGED_VALUE,
    TAG_CUSTOMER,
    TAG_INTENT,
    TAG_MANAGED,
    NodeRequest,
    Provider,
    ownership_tags,
)
from providers.errors import ProviderError, Throttled, TransientError
from runtimes import ENGINES
from schema.catalog import parse_gpu_shape
from schema.policy import Model as ModelSpec

log = structlog.get_logger("gpucap.images")

TAG_ROLE = "gpucap-role"
BUILDER_ROLE = "image-builder"
BUILDER_POOL = "image-builder"  # (the pool tag of a builder: it serves no pool)


def runtime_image(spec: ModelSpec) -> str:
    """The container image a model's nodes run (``runtimes.resolve``'s choice)."""
    return spec.runtime.image or spec.image or ENGINES[spec.runtime.engine].image


def image_for(s: Session, customer: str, account: str, region: str, image: str) -> str | None:
    """The freshest ready baked image for a node of this key (None: the base image)."""
    row = s.scalars(
        select(MachineImage)
        .where(
            MachineImage.customer == customer,
            MachineImage.account == account,
            MachineImage.region == region,
            MachineImage.runtime_image == image,
            MachineImage.state == BuildState.READY.value,
        )
        .order_by(MachineImage.ready_at.desc(), MachineImage.id.desc())
    ).first()
    return row.image_id if row is not None else None


def builder_ids(s: Session, ids: Sequence[str]) -> dict[str, bool]:
    """Of these intent ids, those that are image builders: True while the build still
    needs its builder (gc leaves those alone)."""
    rows = s.execute(
        select(MachineImage.id, MachineImage.state).where(MachineImage.id.in_(ids))
    ).all()
    return {i: BuildState(st).in_flight for i, st in rows}


class Baker:
    def run(self, ctx: LoopContext) -> None:
        self.timings = ctx.tuning.images
        now = ctx.now()
        with ctx.store.session() as s:
            wanted = wanted_builds(s) if ctx.boot is not None else {}
            rows = list(s.scalars(select(MachineImage).where(MachineImage.state != "deleted")))
            builds = [build_of(r) for r in rows]
            accounts = {(a.customer, a.name): a for a in s.scalars(select(Account))}
        decided = plan(list(wanted.values()), builds, now, self.timings)
        for bid in decided.timed_out:
            self._fail(ctx, bid, f"no image within {self.timings.build_s:.0f} s", timed_out=True)
        for w in decided.start:
            self._start(ctx, w)
        with ctx.store.session() as s:
            live = list(
                s.scalars(
                    select(MachineImage).where(
                        MachineImage.state.in_([st.value for st in BuildState if st.in_flight])
                    )
                )
            )
            ended = list(
                s.scalars(
                    select(MachineImage).where(
                        MachineImage.builder_instance_id.is_not(None),
                        MachineImage.builder_terminated_at.is_(None),
                        MachineImage.state.notin_([st.value for st in BuildState if st.in_flight]),
                    )
                )
            )
            doomed = list(
                s.scalars(select(MachineImage).where(MachineImage.id.in_(decided.delete)))
            )
        for row in live:
            self._guarded(ctx, row, accounts, partial(self._advance, ctx, row=row, wanted=wanted))
        for row in ended:
            self._guarded(ctx, row, accounts, partial(_terminate_builder, ctx, row=row))
        for row in doomed:
            self._guarded(ctx, row, accounts, partial(_delete, ctx, row=row))

    def _guarded(
        self,
        ctx: LoopContext,
        row: MachineImage,
        accounts: Mapping[tuple[str, str], Account],
        act: Callable[[Provider], None],
    ) -> None:
        acct = accounts.get((row.customer, row.account))
        if acct is None:
            return
        try:
            act(ctx.providers.provider(row.customer, acct))
        except (Throttled, TransientError) as err:
            ctx.telemetry.provider_errors.labels(row.cloud, row.account, err.kind).inc()
        except ProviderError as err:
            ctx.telemetry.provider_errors.labels(row.cloud, row.account, err.kind).inc()
            if BuildState(row.state).in_flight:
                self._fail(ctx, row.id, f"{err.kind}: {err.message}")
        except StaleDataError:
            pass  # moved on meanwhile (a report); the next pass sees it

    def _start(self, ctx: LoopContext, w: Wanted) -> None:
        """Record the build (and its builder's token digest) before any provider call."""
        assert ctx.boot is not None
        bid = f"bake-{uuid.uuid4().hex[:20]}"
        now = ctx.now_dt()
        with ctx.store.session() as s:
            prior = s.scalars(
                select(MachineImage.image_version)
                .where(
                    MachineImage.customer == w.key.customer,
                    MachineImage.account == w.key.account,
                    MachineImage.region == w.key.region,
                    MachineImage.runtime_image == w.key.runtime_image,
                )
                .order_by(MachineImage.image_version.desc())
            ).first()
            s.add(
                MachineImage(
                    id=bid,
                    customer=w.key.customer,
                    account=w.key.account,
                    cloud=w.cloud,
                    region=w.key.region,
                    runtime_image=w.key.runtime_image,
                    image_version=(prior or 0) + 1,
                    instance_type=w.instance_type,
                    state=BuildState.PENDING.value,
                    image_name=f"gpucap-{bid}",
                    token_sha256=digest(ctx.boot.tokens.for_node(bid)),
                    token_expires_at=now + timedelta(seconds=TOKEN_TTL_S),
                    created_at=now,
                    state_at=now,
                )
            )
            record_event(
                s,
                now,
                "image.build_started",
                f"baking {w.key.runtime_image} for {w.key.account} in {w.key.region} "
                f"(build {bid}, on a {w.instance_type})",
                customer=w.key.customer,
            )

    def _advance(
        self,
        ctx: LoopContext,
        provider: Provider,
        row: MachineImage,
        wanted: Mapping[ImageKey, Wanted],
    ) -> None:
        state = BuildState(row.state)
        if state == BuildState.PENDING:
            w = wanted.get(_key(row))
            if w is None:
                self._fail(ctx, row.id, "no model wants this image any more")
                return
            user_data = _builder_user_data(ctx, row, w)
            tags = {
                **ownership_tags(row.id, row.customer, BUILDER_POOL, w.model),
                TAG_ROLE: BUILDER_ROLE,
            }
            req = NodeRequest(row.id, row.instance_type, row.region, user_data=user_data, tags=tags)
            ctx.telemetry.provider_calls.labels(row.cloud, "create").inc()
            created = provider.create_node(req)
            _move(ctx, row, BuildState.BUILDING, builder_instance_id=created.node.instance_id)
        elif state == BuildState.BUILDING and row.baked_at is not None:
            row = _move(ctx, row, BuildState.IMAGING)  # (before the call, as an intent)
            self._image(ctx, provider, row)
        elif state == BuildState.IMAGING and row.image_id is None:
            self._image(ctx, provider, row)  # (the create's answer was lost: find-or-create)
        elif state == BuildState.IMAGING:
            assert row.image_id is not None
            img = provider.describe_image(row.region, row.image_id)
            if img is None or img.state == "failed":
                self._fail(ctx, row.id, f"image {row.image_id} {'failed' if img else 'is gone'}")
            elif img.state == "available":
                _ready(ctx, row)

    def _image(self, ctx: LoopContext, provider: Provider, row: MachineImage) -> None:
        assert row.builder_instance_id is not None
        tags = {TAG_INTENT: row.id, TAG_CUSTOMER: row.customer}
        img = provider.create_image(row.region, row.builder_instance_id, row.image_name, tags)
        row = _move(ctx, row, BuildState.IMAGING, image_id=img.image_id)
        if img.state == "available":
            _ready(ctx, row)

    def _fail(self, ctx: LoopContext, bid: str, why: str, *, timed_out: bool = False) -> None:
        now = ctx.now_dt()
        with ctx.store.session() as s:
            row = s.get(MachineImage, bid)
            if row is None or not BuildState(row.state).in_flight:
                return
            row.state = BuildState.FAILED.value
            row.state_at = now
            row.error = why
            row.token_expires_at = now
            record_event(
                s,
                now,
                "image.build_timed_out" if timed_out else "image.build_failed",
                f"image build {bid} of {row.runtime_image} in {row.region}: {why}; nodes "
                "boot the base image with the full bootstrap",
                customer=row.customer,
                severity="warning",
            )


def wanted_builds(s: Session) -> dict[ImageKey, Wanted]:
    """Every key an active model with ``baked_image`` needs, with its builder: the
    cheapest of the key's pools (a builder checks the driver on a real GPU of the cloud)."""
    pools = list(s.scalars(select(Pool).where(Pool.active.is_(True))))
    out: dict[ImageKey, tuple[float, Wanted]] = {}
    for m in s.scalars(select(ModelRow).where(ModelRow.deleted_at.is_(None))):
        spec = ModelSpec.model_validate(m.spec)
        if spec.baked_image is None or not spec.baked_image.enabled:
            continue
        image = runtime_image(spec)
        for p in pools:
            if p.customer != m.customer or (spec.clouds and p.cloud not in spec.clouds):
                continue
            if (spec.regions and p.region not in spec.regions) or not option_for(spec, p.gpu_shape):
                continue
            key = ImageKey(m.customer, p.account, p.region, image)
            gpus = parse_gpu_shape(p.gpu_shape).gpus
            w = Wanted(key, p.cloud, p.instance_type, gpus, model=m.name, pool_id=p.id)
            cur = out.get(key)
            if cur is None or (p.price_usd_per_hour, p.id) < (cur[0], cur[1].pool_id):
                out[key] = (p.price_usd_per_hour, w)
    return {k: w for k, (_, w) in out.items()}


def _builder_user_data(ctx: LoopContext, row: MachineImage, w: Wanted) -> str:
    """The builder's cloud-init document: its model's boot in ``w``'s pool, in bake mode
    (no weights, no engine start), with its own report token."""
    assert ctx.boot is not None
    with ctx.store.session() as s:
        model = s.scalars(
            select(ModelRow).where(ModelRow.customer == row.customer, ModelRow.name == w.model)
        ).one()
        pool = s.get_one(Pool, w.pool_id)
        spec = ModelSpec.model_validate(model.spec)
        boot = node_boot(
            row.customer,
            spec,
            pool,
            row.id,
            report_url=ctx.boot.report_url,
            token=ctx.boot.tokens.for_node(row.id),
        )
    return render(replace(boot, bake=True, weights_uri=None, leader=None))


def build_of(r: MachineImage) -> Build:
    return Build(
        id=r.id,
        key=_key(r),
        state=BuildState(r.state),
        created_at=epoch(r.created_at) or 0.0,
        state_since=epoch(r.state_at) or 0.0,
        ready_at=epoch(r.ready_at),
        has_image=r.image_id is not None or r.state == BuildState.IMAGING,
    )


def _key(r: MachineImage) -> ImageKey:
    return ImageKey(r.customer, r.account, r.region, r.runtime_image)


def _move(ctx: LoopContext, row: MachineImage, to: BuildState, **values: object) -> MachineImage:
    now: datetime = ctx.now_dt()
    with ctx.store.session() as s:
        fresh = s.get_one(MachineImage, row.id)
        if fresh.version != row.version:
            raise StaleDataError(f"image build {row.id} moved on")
        if fresh.state != to.value:
            fresh.state = to.value
            fresh.state_at = now
        for k, v in values.items():
            setattr(fresh, k, v)
        s.flush()
        s.expunge(fresh)
        return fresh


def _ready(ctx: LoopContext, row: MachineImage) -> None:
    now = ctx.now_dt()
    row = _move(ctx, row, BuildState.READY, ready_at=now)
    with ctx.store.session() as s:
        record_event(
            s,
            now,
            "image.ready",
            f"baked image {row.image_id} (v{row.image_version}) of {row.runtime_image} ready in "
            f"{row.region}; new nodes there boot from it",
            customer=row.customer,
        )


def _terminate_builder(ctx: LoopContext, provider: Provider, row: MachineImage) -> None:
    assert row.builder_instance_id is not None
    ctx.telemetry.provider_calls.labels(row.cloud, "terminate").inc()
    provider.terminate_node(row.region, row.builder_instance_id)
    _move(ctx, row, BuildState(row.state), builder_terminated_at=ctx.now_dt())


def _delete(ctx: LoopContext, provider: Provider, row: MachineImage) -> None:
    """Superseded, stale or failed: ``deleting`` recorded, then the image (and its
    snapshots) deleted, then ``deleted``."""
    row = _move(ctx, row, BuildState.DELETING)
    if row.image_id is None and row.builder_instance_id is not None:
        # (an image create whose answer was lost: find it by its intent tag)
        found = provider.list_images(row.region, {TAG_INTENT: row.id, TAG_MANAGED: MANAGED_VALUE})
        for img in found:
            provider.delete_image(row.region, img.image_id)
    elif row.image_id is not None:
        provider.delete_image(row.region, row.image_id)
    _move(ctx, row, BuildState.DELETED, deleted_at=ctx.now_dt())
