"""The sentences ``gpucap describe`` builds from the API's answers: a decision's reason code
in plain words, a model's replica counts as a sum that adds up, its expected time-to-ready,
the policy filter that rules a pool out in words, and a node's state history. Pure
functions of messages."""

from __future__ import annotations

from datetime import UTC, datetime

from schema.gen.gpucap.v1 import control_plane_pb2 as pb

# The autoscaler's and placement's reason codes (autoscaler/gpucap.py, the baselines,
# controlplane/api/decisions.py); an unknown code is shown as it is.
REASONS = {
    "scale_up": "scale up: more load than the replicas serve",
    "scale_up_burst": "scale up: a burst of requests",
    "scale_up_backlog": "scale up: requests are queueing",
    "scale_up_forecast": "scale up: the load is forecast to grow within a cold start",
    "wake": "wake from zero: a request arrived",
    "scale_down": "scale down: fewer replicas serve the load",
    "cancel_starting": "scale down: cancel replicas that are still starting",
    "scale_to_zero": "scale to zero: idle past the grace period",
    "steady": "hold: the replicas match the load",
    "hold_no_data": "hold: no metrics to decide on",
    "hold_dip": "hold: a dip shorter than a cold start",
    "hold_backlog": "hold: requests are still queued",
    "hold_idle_grace": "hold one replica: within the idle grace period",
    "hold_scale_up_delay": "hold: the scale-up delay has not passed",
    "pinned": "on-call pin: the count is fixed",
    "paused": "on-call pause: the count is held",
    "placed": "placement: replicas launched or drained to match",
    "unplaced": "placement: no allowed pool could take a replica",
}


def reason_words(code: str) -> str:
    words = REASONS.get(code)
    return f"{words} ({code})" if words else code or "-"


def replica_sum(m: pb.Model) -> str:
    """``desired 5 = ready 2 + starting 1 + provisioning 1 + 1 not yet launched``: the live
    replicas and the gap to desired, so the figures add up (draining ones leave, apart)."""
    ready, starting, prov = m.ready_replicas, m.starting_replicas, m.provisioning_replicas
    live = ready + starting + prov
    parts = f"ready {ready} + starting {starting} + provisioning {prov}"
    if live < m.desired_replicas:
        parts += f" + {m.desired_replicas - live} not yet launched"
    elif live > m.desired_replicas:
        parts += f" - {live - m.desired_replicas} to release"
    out = f"desired {m.desired_replicas} = {parts}"
    if m.draining_replicas:
        out += f"; {m.draining_replicas} more draining (leaving)"
    if len(m.spec.shapes) > 1:
        out += " (in replicas of its first shape)"
    return out


def expected_ready(explained: pb.ExplainModelResponse) -> str:
    """The fastest pool that takes a launch now, and the figure's source."""
    for p in explained.pools:  # (fastest first)
        if not p.cordoned and not p.HasField("blocked_until"):
            return f"{span(p.expected_ready_s)} in {p.pool_id} (from {p.source})"
    if explained.pools:
        return "no allowed pool takes a launch now (all cordoned or blocked)"
    return "no pool its policy allows"


def exclusion_words(name: str, spec: pb.ModelSpec, pool: pb.Pool | None) -> str:
    """Placement's policy filter ``name`` (the daemon says which one a pool fails) as a
    sentence about this model and ``pool`` (None: not listed, only the filter is known)."""
    if pool is None:
        return name
    if name == "cloud_not_allowed":
        return f"{pool.cloud} is not among its clouds ({', '.join(spec.clouds)})"
    if name == "region_not_allowed":
        return f"{pool.region} is not among its regions ({', '.join(spec.regions)})"
    if name == "shape_not_accepted":
        shapes = ", ".join(s.shape for s in spec.shapes)
        return f"{pool.gpu_shape} nodes are none of its shapes ({shapes})"
    if name == "overflow_not_allowed":
        return "a shared overflow pool: the customer's overflow is off or does not list it"
    return name


_STATES = (
    "pending",
    "provisioning",
    "running",
    "ready",
    "draining",
    "terminating",
    "terminated",
    "failed",
)


def node_history(n: pb.Node) -> list[tuple[str, datetime, str]]:
    """(state, when, time since the previous one) for each state the node has reached, in
    the order it reached them."""
    seen = []
    for state in _STATES:
        t = getattr(n, f"{state}_at")
        if n.HasField(f"{state}_at"):
            seen.append((state, t.ToDatetime(tzinfo=UTC)))
    seen.sort(key=lambda s: s[1])
    out = []
    for i, (state, at) in enumerate(seen):
        after = "-" if i == 0 else span((at - seen[i - 1][1]).total_seconds())
        out.append((state, at, after))
    return out


def span(seconds: float) -> str:
    """``8.5s``, ``42s``, ``21m48s``, ``2h05m``."""
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
