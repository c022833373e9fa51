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
        # Requests ending per scrape bin (count, sum of end times, output tokens), from bin
        # ``_base`` on: only bins from next_bin on are ever read again, so the arrays span
        # the requests in service, not the replay (a day asleep costs nothing here).
        self._base = 0
        size = 1024
        self._end_n = np.zeros(size)
        self._end_sum = np.zeros(size)
        self._end_tok = np.zeros(size)
        self.samples: deque[MetricsSample] = deque(maxlen=max(1, math.ceil(history_s / self.dt)))

    def _cover(self, lo: int, hi: int) -> None:
        """Make the end arrays hold bins [lo, hi); the ones before ``lo`` are done with."""
        size = self._end_n.size
        if hi - self._base <= size:
            return
        keep = self._base + size - lo  # bins from lo on that may hold counts already
        new = max(hi - lo, 2 * keep, 1024)
        for name in ("_end_n", "_end_sum", "_end_tok"):
            old = getattr(self, name)
            grown = np.zeros(new)
            if keep > 0:
                grown[:keep] = old[lo - self._base :]
            setattr(self, name, grown)
        self._base = lo

    def update(self, starts: list[float], upto_bin: int) -> None:
        """Compute samples for every bin before ``upto_bin``. All requests starting before
        that bin's end must already be in ``starts`` (indexed like the arrivals). Only the
        newest bins, the ones the history keeps, are computed bin by bin; the ones before
        them (a model woken after a night asleep) only move the running counts."""
        k0, k1 = self.next_bin, upto_bin
        if k1 <= k0:
            return
        dt = self.dt
        ks = k1 - min(k1 - k0, self.samples.maxlen or k1 - k0)  # the first bin kept
        j0 = self._binned_starts
        new = np.asarray(starts[j0:], dtype=np.float64)
        st = new[: int(np.searchsorted(new, k1 * dt, "left"))]
        j1 = j0 + st.size
        self._binned_starts = j1
        ends = st + self._svc[j0:j1]
        eb = np.maximum(np.floor(ends / dt).astype(np.int64), k0)
        tok = self._tok[j0:j1] if self._tok is not None else None
        if ks > k0:  # bins before ks only move the counts (whole numbers: exact in floats)
            n_arr = np.searchsorted(self._arr, [k0 * dt, ks * dt], "left")
            # (Starts split by their bin, as ``_bins`` bins them: sorted, so a prefix.)
            n_st = int(np.searchsorted(np.floor(st / dt), ks, "left"))
            early = eb < ks
            a, b = (min(max(k - self._base, 0), self._end_n.size) for k in (k0, ks))
            n_end = float(self._end_n[a:b].sum()) + float(np.count_nonzero(early))
            self._queued += float(n_arr[1] - n_arr[0] - n_st)
            self._in_flight += n_st - n_end
            st, ends, eb = st[n_st:], ends[~early], eb[~early]
            tok = tok[~early] if tok is not None else None
        self._cover(ks, max(k1, int(eb.max()) + 1 if eb.size else k1))
        if eb.size:
            lo = int(eb.min())
            span = int(eb.max()) - lo + 1
            rel = eb - lo
            at = lo - self._base
            self._end_n[at : at + span] += np.bincount(rel, minlength=span)
            self._end_sum[at : at + span] += np.bincount(rel, weights=ends, minlength=span)
            if tok is not None:
                self._end_tok[at : at + span] += np.bincount(rel, weights=tok, minlength=span)
        self._bins(st, ks, k1)
        self.next_bin = k1

    def _bins(self, st: np.ndarray, k0: int, k1: int) -> None:
        """The samples of bins [k0, k1), given the starts ``st`` inside them (ends binned)."""
        dt = self.dt
        nb = k1 - k0
        edges = np.arange(k0, k1 + 1, dtype=np.float64) * dt
        ia = np.searchsorted(self._arr, edges, "left")
        n_arr = np.diff(ia).astype(np.float64)
        s_arr = np.diff(self._cum_arr[ia])
        n_st: np.ndarray
        s_st: np.ndarray
        if st.size:
            sb = np.clip(np.floor(st / dt).astype(np.int64) - k0, 0, nb - 1)
            n_st = np.bincount(sb, minlength=nb).astype(np.float64)
            s_st = np.bincount(sb, weights=st, minlength=nb)
        else:
            n_st = np.zeros(nb)
            s_st = np.zeros(nb)
        at = k0 - self._base
        n_end = self._end_n[at : at + nb]
        s_end = self._end_sum[at : at + nb]
        b = edges[1:]
        dq = n_arr - n_st
        di = n_st - n_end
        q_at = self._queued + np.concatenate([[0.0], np.cumsum(dq)[:-1]])
        i_at = self._in_flight + np.concatenate([[0.0], np.cumsum(di)[:-1]])
        area_q = q_at * dt + (n_arr * b - s_arr) - (n_st * b - s_st)
        area_i = i_at * dt + (n_st * b - s_st) - (n_end * b - s_end)
        self._queued += float(dq.sum())
        self._in_flight += float(di.sum())
        tok_rate = self._end_tok[at : at + nb] / dt if self._tok is not None else None
        rates = (n_arr / dt).tolist()
        flights = np.maximum(area_i / dt, 0.0).tolist()
        queues = np.maximum(area_q / dt, 0.0).tolist()
        times = b.tolist()
        toks = tok_rate.tolist() if tok_rate is not None else [None] * nb
        done = (n_end / dt).tolist()
        append = self.samples.append
        for t, r, f, q, k, c in zip(times, rates, flights, queues, toks, done, strict=True):
            append(MetricsSample(t, r, f, q, k, c))

    def window(self) -> tuple[MetricsSample, ...]:
        return tuple(self.samples)
