"""What a model's scrape would have reported: one :class:`MetricsSample` per scrape interval,
with time-averaged in-flight and queued counts and the arrival and completion rates,
computed exactly from the requests' arrival, start and end times.

Cost is per scrape interval that an autoscaler actually reads, in numpy, never per request:
the engine only appends start times in its hot loop. For a step count N(t) with +1 at times
u and -1 at times v, the integral over a bin [a, b) is
``N(a)*(b-a) + sum(b - u in bin) - sum(b - v in bin)``; queued = arrived - started and
in-flight = started - ended are such steps.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from autoscaler.types import MetricsSample


class LoadMeter:
    def __init__(
        self,
        arrivals: np.ndarray,
        service_s: np.ndarray,
        output_tokens: np.ndarray | None,
        interval_s: float,
        history_s: float,
    ) -> None:
        self.dt = interval_s
        self._arr = arrivals
        self._cum_arr = np.concatenate([[0.0], np.cumsum(arrivals)])
        self._svc = service_s
        self._tok = output_tokens
        self.next_bin = 0  # first scrape bin not computed yet
        self._queued = 0.0  # count at the start of next_bin
        self._in_flight = 0.0
        self._binned_starts = 0  # requests whose start has been binned
        size = 1024
        self._end_n = np.zeros(size)
        self._end_sum = np.zeros(size)
        self._end_tok = np.zeros(size)
        self.samples: deque[MetricsSample] = deque(maxlen=max(1, math.ceil(history_s / self.dt)))

    def _grow(self, need: int) -> None:
        size = self._end_n.size
        if need <= size:
            return
        new = max(need, size * 2)
        for name in ("_end_n", "_end_sum", "_end_tok"):
            old = getattr(self, name)
            grown = np.zeros(new)
            grown[:size] = old
            setattr(self, name, grown)

    def update(self, starts: list[float], upto_bin: int) -> None:
        """Compute samples for every bin before ``upto_bin``. All requests starting before
        that bin's end must already be in ``starts`` (indexed like the arrivals)."""
        k0, k1 = self.next_bin, upto_bin
        if k1 <= k0:
            return
        dt = self.dt
        nb = k1 - k0
        edges = np.arange(k0, k1 + 1, dtype=np.float64) * dt
        ia = np.searchsorted(self._arr, edges, "left")
        n_arr = np.diff(ia).astype(np.float64)
        s_arr = np.diff(self._cum_arr[ia])

        j0 = self._binned_starts
        new = np.asarray(starts[j0:], dtype=np.float64)
        cut = int(np.searchsorted(new, edges[-1], "left"))
        st = new[:cut]
        j1 = j0 + cut
        self._binned_starts = j1
        n_st: np.ndarray
        s_st: np.ndarray
        if cut:
            sb = np.clip(np.floor(st / dt).astype(np.int64) - k0, 0, nb - 1)
            n_st = np.bincount(sb, minlength=nb).astype(np.float64)
            s_st = np.bincount(sb, weights=st, minlength=nb)
            ends = st + self._svc[j0:j1]
            eb = np.maximum(np.floor(ends / dt).astype(np.int64), k0)
            self._grow(int(eb.max()) + 1)
            lo = int(eb.min())
            span = int(eb.max()) - lo + 1
            rel = eb - lo
            self._end_n[lo : lo + span] += np.bincount(rel, minlength=span)
            self._end_sum[lo : lo + span] += np.bincount(rel, weights=ends, minlength=span)
            if self._tok is not None:
                tok = self._tok[j0:j1]
                self._end_tok[lo : lo + span] += np.bincount(rel, weights=tok, minlength=span)
        else:
            n_st = np.zeros(nb)
            s_st = np.zeros(nb)
        self._grow(k1)
        n_end = self._end_n[k0:k1]
        s_end = self._end_sum[k0:k1]
        b = edges[1:]
        dq = n_arr - n_st
        di = n_st - n_end
        q_at = self._queued + np.concatenate([[0.0], np.cumsum(dq)[:-1]])
        i_at = self._in_flight + np.concatenate([[0.0], np.cumsum(di)[:-1]])
        area_q = q_at * dt + (n_arr * b - s_arr) - (n_st * b - s_st)
        area_i = i_at * dt + (n_st * b - s_st) - (n_end * b - s_end)
        self._queued += float(dq.sum())
        self._in_flight += float(di.sum())
        self.next_bin = k1
        keep = min(nb, self.samples.maxlen or nb)
        tok_rate = self._end_tok[k1 - keep : k1] / dt if self._tok is not None else None
        off = nb - keep
        rates = (n_arr[off:] / dt).tolist()
        flights = np.maximum(area_i[off:] / dt, 0.0).tolist()
        queues = np.maximum(area_q[off:] / dt, 0.0).tolist()
        times = b[off:].tolist()
        toks = tok_rate.tolist() if tok_rate is not None else [None] * keep
        done = (n_end[off:] / dt).tolist()
        append = self.samples.append
        for t, r, f, q, k, c in zip(times, rates, flights, queues, toks, done, strict=True):
            append(MetricsSample(t, r, f, q, k, c))

    def window(self) -> tuple[MetricsSample, ...]:
        return tuple(self.samples)
