"""Translate between protobuf messages (``gpucap.v1``) and the service's views and dicts.

Only presence-carrying proto fields that are *set* reach the service, so pydantic applies
the same defaults to an API request as to a policy file."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from autoscaler import Decision
from controlplane.api import (
    Endpoint,
    EndpointsSnapshot,
    InvalidArgumentError,
    ModelView,
    NodeView,
    PolicyView,
    PoolView,
    ReplayView,
    StatusView,
    is_replayable,
)
from controlplane.api.images import ImageView
from controlplane.api.reads import ModelItem, model_item_view
from controlplane.api.staging import CopyView, SiteView, StagingView
from controlplane.api.usage import UsageView
from controlplane.api.views import ExplainView, PoolEstimateView
from controlplane.api.warm import WarmPoolsView, WarmPoolView
from controlplane.audit import AuditReport, Category, Finding, SiteReport
from controlplane.leadership import LeaseView
from controlplane.policy_diff import PolicyDiff
from controlplane.store.models import DecisionRecord, Event, PolicyVersion
from providers.base import TAG_CUSTOMER, CloudNode
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.policy import (
    MAX_CLOUDS,
    MAX_MIRRORS,
    MAX_REGIONS,
    MAX_SHAPES,
    Health,
    Problem,
    ScalingBehavior,
    Staging,
)
from schema.runtime import Runtime


def ts(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    if value.tzinfo is None:  # stored values are UTC; be explicit rather than local time
        value = value.replace(tzinfo=UTC)
    out = Timestamp()
    out.FromDatetime(value)
    return out


def datetime_arg(field: str, value: Timestamp) -> datetime:
    """A request's timestamp as a datetime; INVALID_ARGUMENT naming ``field`` when it is
    out of protobuf's range (years 1-9999, nanos below 10^9), which failed as INTERNAL."""
    try:
        return value.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgumentError(field, f"not a valid timestamp ({exc})") from exc


def problem(p: Problem) -> pb.PolicyProblem:
    return pb.PolicyProblem(
        file=p.file, line=p.line or 0, column=p.column or 0, field=p.field, reason=p.reason
    )


def policy_diff(diff: PolicyDiff) -> pb.PolicyDiff:
    return pb.PolicyDiff(
        changes=[
            pb.PolicyChange(
                kind=c.kind,
                name=c.name,
                action=c.action.value,
                fields=[
                    pb.PolicyFieldChange(path=f.path, before=f.before, after=f.after)
                    for f in c.fields
                ],
                detail=c.detail,
                drains=c.drains,
            )
            for c in diff.changes
        ]
    )


def policy_version(row: PolicyVersion, active: bool) -> pb.PolicyVersion:
    return pb.PolicyVersion(
        customer=row.customer,
        version=row.version,
        sha256=row.sha256,
        applied_by=row.applied_by,
        applied_at=ts(row.applied_at),
        source=row.source,
        yaml=row.raw_yaml,
        active=active,
    )


def policy_view(view: PolicyView) -> pb.PolicyVersion:
    return policy_version(view.version, view.active)


# --------------------------------------------------------------------------- model specs


SCALING_FIELDS = tuple(ScalingBehavior.model_fields)  # the message mirrors the model
# (as do these: every field is optional in the message, unset taking the model's default)
STAGING_FIELDS = tuple(Staging.model_fields)
HEALTH_FIELDS = tuple(Health.model_fields)
WARM_POOL_OPTIONAL = ("max_nodes", "disk_gb")


def _max_items(model: type[Any], field: str) -> int:
    """A list field's bound on a pydantic model (its ``max_length``)."""
    for m in model.model_fields[field].metadata:
        if getattr(m, "max_length", None) is not None:
            return int(m.max_length)
    raise ValueError(f"{model.__name__}.{field} has no max_length")


# A message's repeated fields and their bounds in schema.policy / schema.runtime, checked
# before a dict per item is built: 200,000 shapes took 12 s and 370 MB to refuse (issue 26).
REPEATED_BOUNDS = (
    (("shapes",), MAX_SHAPES),
    (("clouds",), MAX_CLOUDS),
    (("regions",), MAX_REGIONS),
    (("weights", "mirrors"), MAX_MIRRORS),
    (("runtime", "args"), _max_items(Runtime, "args")),
    (("runtime", "env"), _max_items(Runtime, "env")),
)


def check_repeated(spec: pb.ModelSpec) -> None:
    """INVALID_ARGUMENT naming the first repeated field of ``spec`` over its bound."""
    for path, most in REPEATED_BOUNDS:
        value: Any = spec
        for name in path:
            value = getattr(value, name)
        if len(value) > most:
            raise InvalidArgumentError(
                "spec." + ".".join(path), f"at most {most} items (got {len(value)})"
            )


def spec_from_pb(spec: pb.ModelSpec) -> dict[str, Any]:
    """The fields the caller set, as the dict ``schema.policy.Model`` validates."""
    check_repeated(spec)
    out: dict[str, Any] = {}
    if spec.name:
        out["name"] = spec.name
    if spec.shapes:
        shapes = []
        for opt in spec.shapes:
            d: dict[str, Any] = {"shape": opt.shape, "max_concurrency": opt.max_concurrency}
            if opt.HasField("tokens_per_s"):
                d["tokens_per_s"] = opt.tokens_per_s
            shapes.append(d)
        out["shapes"] = shapes
    for name in (
        "min_replicas",
        "max_replicas",
        "latency_slo_ms",
        "priority",
        "image",
        "scale_to_zero_grace_s",
    ):
        if spec.HasField(name):
            out[name] = getattr(spec, name)
    if spec.HasField("target"):
        target: dict[str, Any] = {}
        if spec.target.metric:
            target["metric"] = spec.target.metric
        if spec.target.HasField("utilization"):
            target["utilization"] = spec.target.utilization
        out["target"] = target
    if spec.clouds:
        out["clouds"] = list(spec.clouds)
    if spec.regions:
        out["regions"] = list(spec.regions)
    if spec.HasField("weights"):
        out["weights"] = {"uri": spec.weights.uri, "size_gb": spec.weights.size_gb}
        if spec.weights.mirrors:
            out["weights"]["mirrors"] = list(spec.weights.mirrors)
    if spec.HasField("runtime"):
        out["runtime"] = runtime_from_pb(spec.runtime)
    if spec.HasField("scaling"):
        out["scaling"] = _set_fields(spec.scaling, SCALING_FIELDS)
    if spec.HasField("staging"):
        out["staging"] = _set_fields(spec.staging, STAGING_FIELDS)
    if spec.HasField("baked_image"):
        out["baked_image"] = _set_fields(spec.baked_image, ("enabled",))
    if spec.HasField("warm_pool"):
        warm = _set_fields(spec.warm_pool, WARM_POOL_OPTIONAL)
        if spec.warm_pool.mode:
            warm["mode"] = spec.warm_pool.mode
        out["warm_pool"] = warm
    if spec.HasField("health"):
        out["health"] = _set_fields(spec.health, HEALTH_FIELDS)
    return out


def _set_fields(msg: Message, names: tuple[str, ...]) -> dict[str, Any]:
    """The presence-carrying fields of ``msg`` the caller set."""
    return {name: getattr(msg, name) for name in names if msg.HasField(name)}


def spec_to_pb(spec: Mapping[str, Any]) -> pb.ModelSpec:
    """A stored (complete, validated) spec as a message."""
    target = spec.get("target") or {}
    weights = spec.get("weights")
    scaling = spec.get("scaling") or {}
    # Stored specs are complete dumps, but rows written before a field existed lack it:
    # absent is the model's default (None for staging, baked_image and warm_pool).
    staging, baked, warm = spec.get("staging"), spec.get("baked_image"), spec.get("warm_pool")
    health = spec.get("health")
    return pb.ModelSpec(
        name=spec.get("name", ""),
        shapes=[
            pb.ShapeOption(
                shape=o["shape"],
                max_concurrency=o["max_concurrency"],
                tokens_per_s=o.get("tokens_per_s"),
            )
            for o in spec.get("shapes", [])
        ],
        min_replicas=spec.get("min_replicas"),
        max_replicas=spec.get("max_replicas"),
        target=pb.ScalingTarget(
            metric=target.get("metric", ""), utilization=target.get("utilization")
        ),
        latency_slo_ms=spec.get("latency_slo_ms"),
        clouds=spec.get("clouds", []),
        regions=spec.get("regions", []),
        priority=spec.get("priority"),
        image=spec.get("image"),
        weights=pb.Weights(
            uri=weights["uri"], size_gb=weights["size_gb"], mirrors=weights.get("mirrors", [])
        )
        if weights
        else None,
        scale_to_zero_grace_s=spec.get("scale_to_zero_grace_s"),
        scaling=pb.ScalingBehavior(**{k: v for k, v in scaling.items() if k in SCALING_FIELDS})
        if scaling
        else None,
        runtime=pb.Runtime(**spec["runtime"]) if spec.get("runtime") else None,
        staging=pb.Staging(**staging) if staging is not None else None,
        baked_image=pb.BakedImage(**baked) if baked is not None else None,
        warm_pool=pb.WarmPool(**warm) if warm is not None else None,
        health=pb.Health(**health) if health is not None else None,
    )


RUNTIME_OPTIONAL = ("image", "port", "tensor_parallel", "pipeline_parallel")


def runtime_from_pb(rt: pb.Runtime) -> dict[str, Any]:
    """A runtime message as the policy's mapping: only what the caller set."""
    out: dict[str, Any] = {}
    if rt.engine:
        out["engine"] = rt.engine
    for name in RUNTIME_OPTIONAL:
        if rt.HasField(name):
            out[name] = getattr(rt, name)
    if rt.args:
        out["args"] = list(rt.args)
    if rt.env:
        out["env"] = dict(rt.env)
    return out


def model(view: ModelView) -> pb.Model:
    row = view.row
    return pb.Model(
        customer=row.customer,
        name=row.name,
        source=row.source,
        spec=spec_to_pb(row.spec),
        desired_replicas=max(0, row.desired_replicas),
        reason=row.desired_reason,
        ready_replicas=view.ready,
        starting_replicas=view.starting,
        provisioning_replicas=view.provisioning,
        draining_replicas=view.draining,
        pinned_replicas=row.pinned_replicas,
        paused=row.paused,
        created_at=ts(row.created_at),
        updated_at=ts(row.updated_at),
        deleted_at=ts(row.deleted_at),
        replicas_by_state=dict(view.replicas_by_state),
    )


class ModelMessages:
    """Each model's message, kept serialized as a ``ListModelsResponse.models`` entry and
    built again only when its page item changed: the item is everything the message is
    made of (every column the page read, its replica counts, its versioned fields), so a
    cached entry is used only for the very item this call read. A ListModels page is then
    one parse of the page's entries joined, with no view built or spec converted for a
    model that did not change. Bounded: the oldest half is dropped when full."""

    def __init__(self, most: int = 50_000) -> None:
        self._most = most
        self._cache: dict[int, tuple[ModelItem, bytes]] = {}

    def response(self, items: Sequence[ModelItem], next_page_token: str) -> pb.ListModelsResponse:
        cache = self._cache
        entries = []
        for item in items:
            mid = item[0][0][0]
            hit = cache.get(mid)
            # (an item's versioned fields are the row cache's own tuple while the version
            # stays: comparing them is an identity check, not a walk of the spec)
            if hit is None or hit[0] != item:
                hit = (item, self._entry(item))
                if len(cache) >= self._most:
                    for old in list(cache)[: self._most // 2]:
                        cache.pop(old, None)
                cache[mid] = hit
            entries.append(hit[1])
        out = pb.ListModelsResponse.FromString(b"".join(entries))
        out.next_page_token = next_page_token
        return out

    @staticmethod
    def _entry(item: ModelItem) -> bytes:
        return pb.ListModelsResponse(models=[model(model_item_view(item))]).SerializeToString()


# --------------------------------------------------------------------------- fleet, status


def node(view: NodeView) -> pb.Node:
    n = view.row
    return pb.Node(
        id=n.id,
        customer=n.customer,
        model=view.model,
        replica_id=n.replica_id,
        pool_id=n.pool_id,
        account=n.account,
        cloud=n.cloud,
        region=n.region,
        zone=n.zone or "",
        instance_type=n.instance_type,
        instance_id=n.instance_id or "",
        state=n.state,
        error=n.error or "",
        attempts=n.attempts,
        pending_at=ts(n.pending_at),
        provisioning_at=ts(n.provisioning_at),
        running_at=ts(n.running_at),
        ready_at=ts(n.ready_at),
        draining_at=ts(n.draining_at),
        terminating_at=ts(n.terminating_at),
        terminated_at=ts(n.terminated_at),
        failed_at=ts(n.failed_at),
        private_ip=n.private_ip or "",
        probe_failures=n.probe_failures or 0,
        phases=[pb.BootPhase(phase=p.phase, at=ts(p.at), detail=p.detail) for p in view.phases],
        retiring_at=ts(view.retiring_at),
    )


def pool(view: PoolView) -> pb.Pool:
    p = view.row
    return pb.Pool(
        id=p.id,
        customer=p.customer,
        account=p.account,
        cloud=p.cloud,
        owner=p.owner,
        region=p.region,
        instance_type=p.instance_type,
        gpu_shape=p.gpu_shape,
        tier=p.tier,
        price_usd_per_hour=p.price_usd_per_hour,
        committed=p.committed,
        reservation=p.reservation or "",
        cordoned=p.cordoned,
        unavailable_until=ts(p.unavailable_until),
        unavailable_reason=p.unavailable_reason or "",
        active=p.active,
        nodes_by_state=dict(view.nodes_by_state),
        zones=list(view.zones),
        zone_blocks=[
            pb.ZoneBlock(zone=b.zone, until=ts(b.until), reason=b.reason, source=b.source)
            for b in view.zone_blocks
        ],
    )


def status(view: StatusView) -> pb.Status:
    return pb.Status(
        version=view.version,
        started_at=ts(view.started_at),
        uptime_s=view.uptime_s,
        customers=view.customers,
        models=view.models,
        pools=view.pools,
        nodes_by_state=dict(view.nodes_by_state),
        jobs=[
            pb.JobStatus(
                job=j.job,
                last_started_at=ts(j.last_started_at),
                last_duration_s=j.last_duration_s,
                last_error=j.last_error,
                runs=j.runs,
                failures=j.failures,
            )
            for j in view.jobs
        ],
        last_event_id=view.last_event_id,
        lease=lease_status(view.lease) if view.lease is not None else None,
    )


def lease_status(v: LeaseView) -> pb.LeaseStatus:
    return pb.LeaseStatus(
        role=v.role,
        holder=v.holder,
        shards=v.shards,
        held_shards=sorted(v.held),
        following=dict(v.following),
        ttl_s=v.ttl_s,
        answered_s_ago=-1.0 if v.answered_s_ago is None else v.answered_s_ago,
        error=v.error,
    )


def event(e: Event) -> pb.Event:
    return pb.Event(
        id=e.id,
        at=ts(e.at),
        kind=e.kind,
        severity=e.severity,
        customer=e.customer or "",
        model=e.model or "",
        node=e.node or "",
        message=e.message,
    )


def endpoint(e: Endpoint) -> pb.Endpoint:
    return pb.Endpoint(**vars(e))


def endpoints_snapshot(
    snap: EndpointsSnapshot, previous: tuple[Endpoint, ...] | None
) -> pb.EndpointsSnapshot:
    """``snap``, with what changed since ``previous`` (None: the stream's first message)."""
    msg = pb.EndpointsSnapshot(
        revision=snap.revision, endpoints=[endpoint(e) for e in snap.endpoints]
    )
    if previous is not None:
        before, now = set(previous), set(snap.endpoints)
        msg.added.extend(endpoint(e) for e in snap.endpoints if e not in before)
        msg.removed.extend(endpoint(e) for e in previous if e not in now)
    return msg


# --------------------------------------------------------------------------- decisions


def decision(row: DecisionRecord, *, include_inputs: bool = False) -> pb.Decision:
    return pb.Decision(
        id=row.id,
        at=ts(row.at),
        kind=row.kind,
        customer=row.customer,
        model=row.model,
        desired=max(0, row.desired) if row.desired is not None else None,
        reason=row.reason,
        detail=row.detail or "",
        replayable=is_replayable(row),
        inputs_json=json.dumps(row.inputs, sort_keys=True) if include_inputs else "",
    )


def outcome(d: Decision) -> pb.DecisionOutcome:
    return pb.DecisionOutcome(desired=max(0, d.desired), reason=d.reason, detail=d.detail)


def replay(view: ReplayView) -> pb.ReplayDecisionResponse:
    return pb.ReplayDecisionResponse(
        decision=decision(view.record),
        recorded=outcome(view.result.recorded),
        replayed=outcome(view.result.replayed),
        matches=view.result.matches,
        autoscaler=view.autoscaler,
        recorded_decider=view.recorded_decider or "",
        recorded_code=view.recorded_code or "",
        running_code=view.running_code,
        same_code=view.same_code,
    )


def explain(view: ExplainView) -> pb.ExplainModelResponse:
    return pb.ExplainModelResponse(
        customer=view.customer,
        model=view.model,
        desired_replicas=view.desired,
        pools=[pool_estimate(v) for v in view.pools],
        excluded=[pb.PoolExclusion(pool_id=i, filter=f) for i, f in view.excluded],
    )


def pool_estimate(v: PoolEstimateView) -> pb.PoolEstimate:
    p, est = v.pool, v.estimate
    return pb.PoolEstimate(
        pool_id=p.id,
        cloud=p.cloud,
        region=p.region,
        instance_type=p.instance_type,
        gpu_shape=p.gpu_shape,
        tier=p.tier,
        price_usd_per_hour=p.price_usd_per_hour,
        expected_ready_s=est.seconds,
        source=est.source,
        launches=est.launches,
        phases=[
            pb.ColdStartPhase(
                name=ph.name, seconds=ph.seconds, source=ph.source, samples=ph.samples
            )
            for ph in est.phases
        ],
        cordoned=p.cordoned,
        blocked_until=ts(datetime.fromtimestamp(v.blocked_until, UTC)) if v.blocked_until else None,
        nodes_in_use=v.nodes_in_use,
    )


def staging(view: StagingView) -> pb.ListStagingResponse:
    return pb.ListStagingResponse(
        copies=[weight_copy(c) for c in view.copies], sites=[staging_site(x) for x in view.sites]
    )


def weight_copy(c: CopyView) -> pb.WeightCopy:
    r = c.row
    return pb.WeightCopy(
        customer=r.customer,
        model=r.model,
        account=r.account,
        cloud=r.cloud,
        region=r.region,
        state=r.state,
        reason=r.reason,
        source_uri=r.source_uri,
        dest_uri=r.dest_uri,
        bytes_total=r.bytes_total or 0,
        bytes_done=r.bytes_done or 0,
        progress=c.progress,
        objects=c.objects,
        objects_done=c.objects_done,
        attempts=r.attempts,
        error=r.error or "",
        usd_per_month=c.usd_per_month,
        started_at=ts(r.started_at),
        ready_at=ts(r.ready_at),
        verified_at=ts(r.verified_at),
        last_used_at=ts(r.last_used_at),
        retry_at=ts(r.retry_at),
    )


def staging_site(x: SiteView) -> pb.StagingSite:
    return pb.StagingSite(
        customer=x.customer,
        account=x.account,
        cloud=x.cloud,
        region=x.region,
        prefix_uri=x.prefix_uri,
        budget_bytes=x.budget_bytes,
        used_bytes=x.used_bytes,
        usd_per_gb_month=x.usd_per_gb_month,
        usd_per_month=x.usd_per_month,
    )


def machine_image(v: ImageView) -> pb.MachineImage:
    r = v.row
    return pb.MachineImage(
        id=r.id,
        customer=r.customer,
        account=r.account,
        cloud=r.cloud,
        region=r.region,
        runtime_image=r.runtime_image,
        image_id=r.image_id or "",
        image_name=r.image_name,
        state=r.state,
        version=r.image_version,
        source_digest=r.source_digest or "",
        instance_type=r.instance_type,
        in_use=v.in_use,
        superseded_by=v.superseded_by or "",
        error=r.error or "",
        age_s=v.age_s,
        created_at=ts(r.created_at),
        built_at=ts(r.baked_at),
        ready_at=ts(r.ready_at),
    )


def warm_pools(view: WarmPoolsView) -> pb.ListWarmPoolsResponse:
    return pb.ListWarmPoolsResponse(
        pools=[warm_pool(p) for p in view.pools],
        nodes=view.nodes,
        usd_per_hour=view.usd_per_hour,
    )


def warm_pool(v: WarmPoolView) -> pb.WarmPoolStatus:
    p, wp = v.pool, v.policy
    return pb.WarmPoolStatus(
        customer=v.customer,
        model=v.model,
        pool_id=p.id if p else "",
        cloud=p.cloud if p else "",
        region=p.region if p else "",
        instance_type=p.instance_type if p else "",
        mode=wp.mode.value if wp else "",
        max_nodes=wp.max_nodes if wp else 0,
        disk_gb=wp.disk_gb if wp else 0,
        nodes=v.nodes,
        usd_per_hour=v.usd_per_hour,
        node_usd_per_hour=v.node_usd_per_hour,
        block_usd_per_gb_month=v.block_usd_per_gb_month,
        replicas=[
            pb.WarmReplica(
                id=r.id,
                state=r.state,
                replica_state=r.replica_state,
                nodes=r.nodes,
                since=ts(r.since),
                usd_per_hour=r.usd_per_hour,
            )
            for r in v.replicas
        ],
    )


def audit(report: AuditReport) -> pb.AuditResponse:
    n = report.totals
    return pb.AuditResponse(
        sites=[audit_site(r) for r in report.sites],
        tracked=n["tracked"],
        in_cloud=n["in_cloud"],
        stopped=n["stopped"],
        settling=n["settling"],
        leaked=n["leaked"],
        lost=n["lost"],
        duplicated=n["duplicated"],
        unreachable=n["unreachable"],
        clean=report.clean,
        grace_s=report.grace_s,
        at=ts(datetime.fromtimestamp(report.at, UTC)),
    )


def audit_site(r: SiteReport) -> pb.AuditSite:
    s = r.site
    return pb.AuditSite(
        cloud=s.cloud,
        account=s.account,
        region=s.region,
        customer=s.customer,
        owner=s.owner,
        tracked=r.tracked,
        in_cloud=r.in_cloud,
        stopped=r.stopped,
        settling=r.settling,
        leaked=r.count(Category.LEAKED),
        lost=r.count(Category.LOST),
        duplicated=r.count(Category.DUPLICATED),
        error=r.error or "",
        findings=[audit_finding(f) for f in r.findings],
    )


def audit_finding(f: Finding) -> pb.AuditFinding:
    row = f.intent
    return pb.AuditFinding(
        category=f.category.value,
        reason=f.reason.value,
        customer=f.customer,
        cloud=f.site.cloud,
        account=f.site.account,
        region=f.site.region,
        intent_id=f.intent_id,
        kind=row.kind if row else "",
        node_state=row.state if row else "",
        tracked_instance_id=(row.instance_id or "") if row else "",
        instances=[audit_instance(c) for c in f.instances],
        age_s=f.age_s,
        state_age_s=f.state_age_s,
        detail=f.detail,
    )


def audit_instance(c: CloudNode) -> pb.AuditInstance:
    return pb.AuditInstance(
        instance_id=c.instance_id,
        state=c.status.value,
        zone=c.zone,
        instance_type=c.instance_type,
        customer=c.tags.get(TAG_CUSTOMER, ""),
    )


def usage(view: UsageView) -> pb.GetUsageResponse:
    return pb.GetUsageResponse(
        rows=[
            pb.UsageRow(
                customer=r.customer,
                model=r.model,
                tier=r.tier,
                cloud=r.cloud,
                nodes=r.nodes,
                gpu_hours=r.gpu_hours,
                node_hours=r.node_hours,
                cost_usd=r.cost_usd,
            )
            for r in view.rows
        ],
        since=ts(view.since),
        until=ts(view.until),
        gpu_hours=view.gpu_hours,
        node_hours=view.node_hours,
        cost_usd=view.cost_usd,
    )
