"""Reading a :class:`MetricsWindow`: averages over a trailing span and request counts.

Every decider reads its metrics through these few functions, so "what does a window of
samples mean" is defined once: a sample at ``t`` covers the scrape interval that ends at
``t``; a span ``(now - length, now]`` holds the samples whose ``t`` falls inside it."""

from __future__ import annotations

from collections.abc import Sequence

from autoscaler.types import MetricsSample, MetricsWindow

DEFAULT_INTERVAL_S = 1.0  # assumed scrape interval when a window holds a single sample


def latest_t(window: MetricsWindow, now: float) -> float | None:
    """Time of the newest sample at or before ``now`` (metrics arrive with a lag)."""
    for s in reversed(window.samples):
        if s.t <= now:
            return s.t
    return None


def recent(window: MetricsWindow, now: float, length: float) -> tuple[MetricsSample, ...]:
    """The last ``length`` seconds of data as of ``now``: samples with
    ``end - length < t <= end``, where ``end`` is the newest sample at or before ``now``.
    Windows end at the newest data, not at ``now``, so a metrics lag delays what a decider
    sees without shortening its window (a peer averaging over 60 s still averages 60 s)."""
    end = latest_t(window, now)
    if end is None:
        return ()
    lo = end - length
    return tuple(s for s in window.samples if lo < s.t <= end)


def concurrency(sample: MetricsSample) -> float:
    """Requests in the system: being served plus waiting (at a replica or for one)."""
    return sample.in_flight + sample.queue_depth


def in_service(sample: MetricsSample, metric: str) -> float:
    """What the replicas are serving, in the scaling metric's units: requests in flight
    (not waiting), or tokens/s; 0 where the sample does not carry it."""
    used = sample.tokens_per_s if metric == "tokens_per_s" else sample.in_flight
    return used or 0.0


def mean_concurrency(samples: Sequence[MetricsSample]) -> float | None:
    if not samples:
        return None
    return sum(concurrency(s) for s in samples) / len(samples)


def mean_in_flight(samples: Sequence[MetricsSample]) -> float:
    """Requests being served (not waiting), averaged; 0 for no samples."""
    return sum(s.in_flight for s in samples) / len(samples) if samples else 0.0


def mean_tokens(samples: Sequence[MetricsSample]) -> float | None:
    vals = [s.tokens_per_s for s in samples if s.tokens_per_s is not None]
    return sum(vals) / len(vals) if vals else None


def mean_metric(samples: Sequence[MetricsSample], metric: str) -> float | None:
    """The mean of the scaling metric (``concurrency`` or ``tokens_per_s``); ``None`` when
    the samples do not carry it (missing is never zero)."""
    if metric == "tokens_per_s":
        return mean_tokens(samples)
    return mean_concurrency(samples)


def scrape_interval(window: MetricsWindow) -> float:
    """The spacing of the window's samples (median gap), or a default for one sample."""
    ts = [s.t for s in window.samples]
    gaps = sorted(b - a for a, b in zip(ts, ts[1:], strict=False) if b > a)
    if not gaps:
        return DEFAULT_INTERVAL_S
    return gaps[len(gaps) // 2]


def request_count(window: MetricsWindow, now: float, length: float) -> float:
    """Requests that arrived in the last ``length`` seconds of data (see :func:`recent`):
    each sample's rate times the interval it covers (the gap to the previous sample, the
    median gap for the first)."""
    step = scrape_interval(window)
    end = latest_t(window, now)
    if end is None:
        return 0.0
    lo, now = end - length, end
    total = 0.0
    prev_t: float | None = None
    for s in window.samples:
        covered = step if prev_t is None else min(s.t - prev_t, step * 4)
        prev_t = s.t
        if lo < s.t <= now:
            total += s.arrival_rate * covered
    return total


def mean_completion_rate(samples: Sequence[MetricsSample]) -> float | None:
    """Requests/s completing, averaged; ``None`` unless every sample carries it (a partial
    count is not a rate)."""
    vals = [s.completion_rate for s in samples]
    if not vals or any(v is None for v in vals):
        return None
    return sum(v for v in vals if v is not None) / len(vals)


def mean_arrival_rate(samples: Sequence[MetricsSample]) -> float | None:
    if not samples:
        return None
    return sum(s.arrival_rate for s in samples) / len(samples)
