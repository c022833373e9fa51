"""ServeGen per-client rate files (Alibaba Bailian, ../shared/traces/servegen-bailian-clients):
read them and synthesise request arrivals with a seeded generator.

A file is one client of one model pool, one row per 10-minute window, no header:
``window_start_s,rate_rps,cv,distribution,param1,param2`` where the distribution is the
inter-arrival law fitted to the window (``Gamma`` or ``Weibull``; param1 = shape,
param2 = scale, checked against the data: Gamma shape*scale and Weibull
scale*Gamma(1+1/shape) both equal 1/rate). Arrivals are drawn per client per window from that
law (a stationary renewal process: the window opens mid-stream), rescaled so the mean gap
is exactly 1/(rate * rate_scale), and merged over clients.

Accepted paths: one client file, a pool folder (``data/<category>/<pool>/``), the ``data``
folder or the published tarball (read in memory, never extracted next to the trace). With
several pools, ``MODEL=`` or ``#POOL`` picks one.

Collection gaps (trace README, "Caveat"): windows where the whole pool's rate is below 2 % of
its median are data gaps, not traffic. They are skipped: removed from the timeline, so the
replay does not see spurious 0 -> 2,500 req/s bursts (the cost: the clock after a gap is
shifted by the gap's length).
"""

from __future__ import annotations

import gzip
import math
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from controlplane.simulator.traces import (
    BYTES_PER_REQUEST,
    FileTrace,
    ModelTrace,
    TraceError,
    TraceOptions,
    TraceSpec,
    history_span,
    not_utf8,
    open_text,
    read_error,
    request_budget,
)

WINDOW_S = 600.0  # the trace README: one row per 10-minute window
GAP_FRACTION = 0.02  # the trace README: gap windows are < 2 % of the pool's median rate
_ROW = re.compile(r"^\d+(\.\d+)?,[0-9.eE+-]+,[^,]*,[A-Za-z]*,[^,]*,[^,]*$")
_MEMBER = re.compile(
    r"(?:^|/)data/(?P<category>[^/]+)/(?P<pool>[^/]+)/chunk-(?P<client>\d+)-trace\.csv$"
)


def looks_like_rate_row(line: str) -> bool:
    return bool(_ROW.match(line.strip()))


@dataclass(frozen=True)
class ClientWindow:
    start_s: float
    rate: float
    dist: str
    shape: float
    scale: float


# The least shape whose gaps floating point can draw: below it a Gamma draw underflows to 0
# almost always (X = Y * U ** (1 / shape)) and Gamma(1 + 1 / shape), a Weibull's mean,
# overflows, so a window would never fill. (Coefficients of variation of 100 and ~1e78.)
MIN_SHAPE = {"Gamma": 1e-4, "Weibull": 0.01}


def parse_client(text: str, source: str) -> list[ClientWindow]:
    rows: list[ClientWindow] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = line.strip().split(",")
        if len(cells) != 6:
            raise TraceError(source, f"expected 6 columns, got {len(cells)}", line_no)
        try:
            start, rate = float(cells[0]), float(cells[1])
        except ValueError:
            raise TraceError(
                source, f"window start / rate not numbers: {line!r}", line_no
            ) from None
        if start < 0 or rate < 0 or not math.isfinite(rate):
            raise TraceError(source, f"window start and rate must be >= 0: {line!r}", line_no)
        if rate == 0:
            rows.append(ClientWindow(start, 0.0, "", 0.0, 0.0))
            continue
        dist = cells[3]
        if dist not in ("Gamma", "Weibull"):
            raise TraceError(
                source, f"distribution must be Gamma or Weibull, got {dist!r}", line_no
            )
        try:
            shape, scale = float(cells[4]), float(cells[5])
        except ValueError:
            raise TraceError(
                source, f"distribution parameters not numbers: {line!r}", line_no
            ) from None
        if not (shape > 0 and scale > 0 and math.isfinite(shape) and math.isfinite(scale)):
            raise TraceError(
                source, f"distribution parameters must be finite and > 0: {line!r}", line_no
            )
        least = MIN_SHAPE[dist]
        if shape < least:
            raise TraceError(
                source,
                f"{dist} shape {shape:g} is below {least:g}: too bursty a gap law, its "
                "draws underflow to 0 (the published pools' least shape is 0.0067)",
                line_no,
            )
        rows.append(ClientWindow(start, rate, dist, shape, scale))
    return rows


def _load_pool_texts(spec: TraceSpec) -> tuple[str, dict[str, str]]:
    """(pool name, {client file as named in errors: text}) for the pool the spec selects."""
    path = Path(spec.path)
    texts: dict[tuple[str, str], dict[str, str]] = {}
    if path.is_file() and not path.name.endswith((".tar.gz", ".tgz", ".tar")):
        return spec.model or path.name.split("-trace")[0], {str(path): _read_text(path)}
    if path.is_dir():
        for f in sorted(path.rglob("chunk-*-trace.csv")):
            m = _MEMBER.search(f.as_posix())
            key = (m["category"], m["pool"]) if m else ("", f.parent.name)
            texts.setdefault(key, {})[str(f)] = _read_text(f)
    else:
        try:
            with tarfile.open(path, "r:*") as tar:
                for member in tar:
                    m = _MEMBER.search(member.name)
                    if not member.isfile() or not m:
                        continue
                    fh = tar.extractfile(member)
                    if fh is None:
                        continue
                    key = (m["category"], m["pool"])
                    source = f"{path}:{member.name}"
                    texts.setdefault(key, {})[source] = _decode(fh.read(), source)
        except (OSError, tarfile.TarError) as exc:
            raise TraceError(str(path), f"cannot read tarball: {exc}") from exc
    if not texts:
        raise TraceError(str(path), "no ServeGen chunk-<N>-trace.csv files found")
    wanted = spec.pool or spec.model
    pools = sorted(texts)
    if len(pools) > 1 or wanted:
        matches = [k for k in pools if wanted and wanted in (k[1], f"{k[0]}/{k[1]}")]
        if len(matches) != 1:
            # (a folder of client files outside the data/<category>/<pool> layout has no category)
            names = ", ".join(f"{c}/{p}" if c else p for c, p in pools)
            raise TraceError(
                str(path),
                f"pick one ServeGen pool with MODEL=PATH or PATH#POOL (pools: {names})"
                if not wanted
                else f"no ServeGen pool named {wanted!r} (pools: {names})",
            )
        pools = matches
    return pools[0][1], texts[pools[0]]


def _read_text(path: Path) -> str:
    """A client file's text, plain or gzipped (a byte-order mark dropped)."""
    try:
        with open_text(path) as fh:
            return fh.read()
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise read_error(path, exc) from exc


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise not_utf8(source, data) from None


def read_servegen(spec: TraceSpec, options: TraceOptions) -> FileTrace:
    pool, texts = _load_pool_texts(spec)
    clients = {name: parse_client(text, name) for name, text in texts.items()}
    clients = {k: v for k, v in clients.items() if v}
    if not clients:
        raise TraceError(spec.path, "the trace is empty: no windows in any client file")
    starts = sorted({w.start_s for rows in clients.values() for w in rows})
    pool_rate = {s: 0.0 for s in starts}
    for rows in clients.values():
        for w in rows:
            pool_rate[w.start_s] += w.rate
    median = float(np.median(list(pool_rate.values())))
    gaps = {s for s, r in pool_rate.items() if r < GAP_FRACTION * median}
    kept = [s for s in starts if s not in gaps]
    # Select the replay window (and the history before it) on the trace's own offsets, then
    # splice out the gaps.
    lo = options.start_s - history_span(options) if options.start_s is not None else -math.inf
    hi = options.end_s if options.end_s is not None else math.inf
    kept = [s for s in kept if s + WINDOW_S > lo and s < hi]
    new_start = {s: i * WINDOW_S for i, s in enumerate(kept)}
    _check_size(spec, pool, clients, new_start, options)
    # One generator per window, seeded by the seed and the window's place in the trace: a
    # window's arrivals are the same whichever window (and history) is replayed around it.
    by_start = [
        {w.start_s: w for w in clients[name] if w.rate > 0}
        for name in sorted(clients, key=_client_order)
    ]
    chunks: list[np.ndarray] = []
    for number, start in enumerate(starts):
        if start not in new_start:
            continue
        rng = np.random.default_rng([options.seed, number])
        for windows in by_start:
            window = windows.get(start)
            if window is not None:
                arrivals = synthesise_window(rng, window, options.rate_scale)
                chunks.append(new_start[start] + arrivals)
    arrivals = np.sort(np.concatenate(chunks)) if chunks else np.empty(0)
    # On the trace's own offsets from the first window read: read_trace cuts the replay
    # window (and its history) out of them, to the second.
    windowed = options.start_s is not None or options.end_s is not None
    origin = kept[0] if kept and windowed else 0.0
    arrivals = arrivals + origin
    if arrivals.size == 0:
        raise TraceError(spec.path, f"pool {pool!r}: no requests in the selected windows")
    model = spec.model or pool
    span = len(kept) * WINDOW_S + origin
    return FileTrace([ModelTrace(model, arrivals, source=spec.path)], absolute=False, span_s=span)


def _check_size(
    spec: TraceSpec,
    pool: str,
    clients: dict[str, list[ClientWindow]],
    selected: dict[float, float],
    options: TraceOptions,
) -> None:
    """Refuse, before synthesising, a replay that cannot fit in memory: a whole multi-day
    pool (m-mid: 2.2 billion requests over 14 days) would be killed by the OOM killer
    minutes in, with nothing said."""
    budget = options.max_requests if options.max_requests is not None else request_budget()
    expected = sum(
        w.rate * options.rate_scale * WINDOW_S
        for rows in clients.values()
        for w in rows
        if w.start_s in selected
    )
    if budget is None or expected <= budget:
        return
    hours = len(selected) * WINDOW_S / 3600
    limit = (
        f"the {_count(budget)} allowed"
        if options.max_requests is not None
        else f"the {_count(budget)} that fit in the memory available now "
        f"({BYTES_PER_REQUEST} bytes each)"
    )
    raise TraceError(
        spec.path,
        f"pool {pool!r}: the selected {hours:,.1f} h hold about {_count(expected)} requests "
        f"at --rate-scale {options.rate_scale:g}, more than {limit}; pick a window with "
        "--start/--end or lower --rate-scale",
    )


def _count(n: float) -> str:
    return f"{n / 1e6:,.1f} M" if n >= 1e6 else f"{n:,.0f}"


def _client_order(name: str) -> tuple[int, str]:
    m = re.search(r"chunk-(\d+)-trace", name)
    return (int(m.group(1)) if m else 0, name)


def synthesise_window(rng: np.random.Generator, w: ClientWindow, rate_scale: float) -> np.ndarray:
    """Arrival offsets within one window: a stationary renewal process with the fitted gap law
    whose mean gap is 1/(rate * rate_scale).

    Stationary, not ordinary: the window opens at a random point of the client's stream, not
    on an arrival, so its first arrival comes after a forward-recurrence time (a uniform
    fraction of a length-biased gap). Started on an arrival, a bursty client (cv > 1) would
    get about (cv^2 - 1) / 2 extra arrivals every window (+14 % at Gamma shape 0.02 and
    rate 1 req/s), since every window would begin in a burst."""
    rate = w.rate * rate_scale
    mean_gap = 1.0 / rate
    if w.dist == "Gamma":
        factor = mean_gap / w.shape  # the law's own scale set aside: only its shape is kept
        draw = lambda n: rng.gamma(w.shape, factor, n)  # noqa: E731
        # Length-biased Gamma(k, theta) is Gamma(k + 1, theta).
        straddling_gap = float(rng.gamma(w.shape + 1.0, factor))
    else:
        factor = mean_gap / math.gamma(1.0 + 1.0 / w.shape)
        draw = lambda n: rng.weibull(w.shape, n) * factor  # noqa: E731
        # Weibull X = (scale) * E^(1/k), E ~ Exp(1); length-biased, E ~ Gamma(1 + 1/k).
        straddling_gap = float(rng.gamma(1.0 + 1.0 / w.shape) ** (1.0 / w.shape)) * factor
    first = float(rng.uniform()) * straddling_gap
    if first >= WINDOW_S:
        return np.empty(0)
    expected = rate * WINDOW_S
    n = int(expected * 1.2 + 4 * math.sqrt(expected) + 16)
    times = first + np.concatenate([[0.0], np.cumsum(draw(n))])
    while times[-1] < WINDOW_S:
        if times.size > 64 * n:  # (a law parse_client admits cannot get here)
            raise ValueError(f"window at {w.start_s:g} s: the gap law draws no time")
        more = np.cumsum(draw(n)) + times[-1]
        times = np.concatenate([times, more])
    return times[: int(np.searchsorted(times, WINDOW_S))]
