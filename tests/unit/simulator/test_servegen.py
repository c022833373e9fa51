"""ServeGen per-client rate files: arrival synthesis (rate, seed, fitted law), collection
gaps skipped, pools picked from a folder or the tarball, bad rows named."""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from controlplane.simulator.traces import TraceError, TraceOptions, TraceSpec, read_trace


def _client(rows: list[str]) -> str:
    return "\n".join(rows) + "\n"


def _pool(root: Path, category: str, pool: str, clients: dict[int, list[str]]) -> Path:
    folder = root / "data" / category / pool
    folder.mkdir(parents=True)
    for n, rows in clients.items():
        (folder / f"chunk-{n}-trace.csv").write_text(_client(rows))
    return folder


STEADY = [
    "0,2.0,1.0,Gamma,1.0,0.5",
    "600,2.0,0.9,Weibull,1.1,0.52",
    "1200,1.0,1.2,Gamma,0.7,1.43",
]


def test_rates_follow_the_windows(tmp_path: Path) -> None:
    folder = _pool(
        tmp_path,
        "language",
        "m-x",
        {0: STEADY, 1: ["0,0,0,,0,0", "600,1.0,1.0,Gamma,1.0,1.0", "1200,0,0,,0,0"]},
    )
    trace = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=3))
    m = trace.models["m-x"]
    counts = np.histogram(m.arrivals, bins=[0, 600, 1200, 1800])[0]
    expected = np.array([2.0, 3.0, 1.0]) * 600
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))  # within 5 sigma
    assert trace.end_s == pytest.approx(1800.0)
    assert bool(np.all(np.diff(m.arrivals) >= 0))


def test_same_seed_same_arrivals_other_seed_differs(tmp_path: Path) -> None:
    folder = _pool(tmp_path, "reason", "r1", {0: STEADY})
    a = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=7)).models["r1"].arrivals
    b = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=7)).models["r1"].arrivals
    c = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=8)).models["r1"].arrivals
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize(
    ("start", "end", "history"), [(600, 1200, 0), (600, 1800, 600), (300, 900, 0)]
)
def test_a_window_replays_the_arrivals_of_the_whole_trace(
    tmp_path: Path, start: float, end: float, history: float
) -> None:
    """Each window has its own generator: the requests of [start, end) are those of the whole
    trace, whatever is read around them, and a window that starts inside a rate window
    gets that window's arrivals from there on."""
    folder = _pool(tmp_path, "reason", "r1", {0: STEADY, 1: STEADY[1:]})
    whole = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=4)).models["r1"]
    options = TraceOptions(seed=4, start_s=start, end_s=end, history_s=history)
    part = read_trace([TraceSpec.parse(str(folder))], options)
    expected = whole.arrivals[(whole.arrivals >= start - history) & (whole.arrivals < end)]
    assert part.models["r1"].arrivals.size > 500
    assert np.allclose(part.models["r1"].arrivals, expected - start, rtol=0, atol=1e-9)
    assert part.history_s == history
    assert part.end_s == pytest.approx(end - start)


def test_a_bursty_client_keeps_its_rate_from_the_start_of_every_window(tmp_path: Path) -> None:
    """A window opens mid-stream (a stationary renewal process). Started on an arrival, a
    client with Gamma shape 0.02 (cv^2 = 50) would get ~24.5 extra arrivals per window (+20 %
    at 0.2 req/s), most of them in a burst at the window's start."""
    rows = [f"{600 * i},0.2,7.07,Gamma,0.02,250" for i in range(1000)]
    folder = _pool(tmp_path, "language", "m-x", {0: rows})
    arrivals = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=5)).models["m-x"]
    expected = 0.2 * 600 * 1000
    # Standard error ~ sqrt(0.2 * 600 * 50 * 1000) = 2,450 (2 %): 6 % is three of them.
    assert abs(arrivals.arrivals.size / expected - 1) < 0.06
    head = np.count_nonzero(arrivals.arrivals % 600 < 100)
    assert abs(head / (expected / 6) - 1) < 0.15  # the first 100 s of a window: 1/6 of them


def test_rate_scale_multiplies_arrivals(tmp_path: Path) -> None:
    folder = _pool(tmp_path, "reason", "r1", {0: STEADY})
    one = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=1)).requests
    four = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=1, rate_scale=4)).requests
    assert 3.6 < four / one < 4.4


def test_collection_gaps_are_skipped(tmp_path: Path) -> None:
    # Window 600 carries ~0 for every client while its neighbours carry load: a data gap.
    rows = ["0,5.0,1.0,Gamma,1.0,0.2", "600,0.01,1.0,Gamma,1.0,100", "1200,5.0,1.0,Gamma,1.0,0.2"]
    folder = _pool(tmp_path, "language", "m-mid", {0: rows, 1: rows})
    trace = read_trace([TraceSpec.parse(str(folder))], TraceOptions(seed=2))
    arr = trace.models["m-mid"].arrivals
    assert trace.end_s == pytest.approx(1200.0)  # two windows kept, spliced together
    counts = np.histogram(arr, bins=[0, 600, 1200])[0]
    assert counts.min() > 0.8 * 6000  # no empty stretch where the gap was


def test_tarball_needs_a_pool_and_finds_it_by_model(tmp_path: Path) -> None:
    root = tmp_path / "src"
    _pool(root, "language", "m-large", {0: STEADY})
    _pool(root, "reason", "deepseek-r1", {3: STEADY})
    tar_path = tmp_path / "servegen_client_traces.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(root / "data", arcname="data")
    with pytest.raises(TraceError, match="pick one ServeGen pool"):
        read_trace([TraceSpec.parse(str(tar_path))])
    by_model = read_trace([TraceSpec.parse(f"deepseek-r1={tar_path}")])
    assert list(by_model.models) == ["deepseek-r1"]
    by_pool = read_trace([TraceSpec.parse(f"r1={tar_path}#reason/deepseek-r1")])
    assert list(by_pool.models) == ["r1"]
    assert np.array_equal(by_model.models["deepseek-r1"].arrivals, by_pool.models["r1"].arrivals)
    with pytest.raises(TraceError, match="no ServeGen pool named 'm-tiny'"):
        read_trace([TraceSpec.parse(f"{tar_path}#m-tiny")])


def test_a_client_file_that_is_not_utf8_is_named_at_its_line(tmp_path: Path) -> None:
    root = tmp_path / "src"
    folder = _pool(root, "language", "m-x", {0: STEADY})
    (folder / "chunk-1-trace.csv").write_bytes(
        _client([*STEADY, "1800,1.0,1.0,G\xe9"]).encode("latin-1")
    )
    with pytest.raises(TraceError, match=r"chunk-1-trace\.csv:4: not UTF-8 text \(byte 0xe9\)"):
        read_trace([TraceSpec.parse(str(folder))])
    tar_path = tmp_path / "clients.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(root / "data", arcname="data")
    with pytest.raises(TraceError, match=r"chunk-1-trace\.csv:4: not UTF-8 text \(byte 0xe9\)"):
        read_trace([TraceSpec.parse(f"m-x={tar_path}")])


def test_client_files_outside_the_layout_are_named_by_their_folder(tmp_path: Path) -> None:
    _pool(tmp_path, "language", "m-large", {0: STEADY})
    (tmp_path / "chunk-7-trace.csv").write_text(_client(STEADY))  # a stray copy beside data/
    with pytest.raises(TraceError, match=rf"pools: {tmp_path.name}, language/m-large\)"):
        read_trace([TraceSpec.parse(str(tmp_path))])


def test_single_client_file_detected_without_header(tmp_path: Path) -> None:
    path = tmp_path / "chunk-9-trace.csv"
    path.write_text(_client(STEADY))
    trace = read_trace([TraceSpec.parse(f"solo={path}")], TraceOptions(seed=1))
    assert list(trace.models) == ["solo"]
    assert trace.requests > 2000


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: gzip.compress(text.encode()),
        lambda text: b"\xef\xbb\xbf" + text.encode(),  # a byte-order mark
    ],
    ids=["gzip", "bom"],
)
def test_a_client_file_gzipped_or_with_a_bom_reads_as_the_plain_one(
    tmp_path: Path, encode: Callable[[str], bytes]
) -> None:
    plain = tmp_path / "chunk-9-trace.csv"
    plain.write_text(_client(STEADY))
    other = tmp_path / "other" / "chunk-9-trace.csv.gz"
    other.parent.mkdir()
    other.write_bytes(encode(_client(STEADY)))
    a = read_trace([TraceSpec.parse(f"solo={plain}")], TraceOptions(seed=1))
    b = read_trace([TraceSpec.parse(f"solo={other}")], TraceOptions(seed=1))
    assert np.array_equal(a.models["solo"].arrivals, b.models["solo"].arrivals)


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        # a shape whose gaps underflow to 0: the window would never fill
        ("1800,1.0,1.0,Gamma,1e-300,1.0", "Gamma shape 1e-300 is below 0.0001"),
        ("1800,1.0,1.0,Weibull,0.001,1.0", "Weibull shape 0.001 is below 0.01"),
        ("1800,1.0,1.0,Gamma,1.0,inf", "distribution parameters must be finite and > 0"),
    ],
)
def test_a_gap_law_that_cannot_be_drawn_names_the_line(
    tmp_path: Path, row: str, fragment: str
) -> None:
    folder = _pool(tmp_path, "language", "m-x", {0: [*STEADY, row]})
    with pytest.raises(TraceError, match=rf"chunk-0-trace\.csv:4: {fragment}"):
        read_trace([TraceSpec.parse(str(folder))])


def test_bad_row_names_the_line(tmp_path: Path) -> None:
    folder = _pool(tmp_path, "language", "m-x", {0: [*STEADY, "1800,1.0,1.0,Pareto,1.0,1.0"]})
    with pytest.raises(
        TraceError, match=r"chunk-0-trace\.csv:4: distribution must be Gamma or Weibull"
    ):
        read_trace([TraceSpec.parse(str(folder))])


def test_all_idle_is_empty(tmp_path: Path) -> None:
    folder = _pool(tmp_path, "language", "m-x", {0: ["0,0,0,,0,0", "600,0,0,,0,0"]})
    with pytest.raises(TraceError, match="no requests"):
        read_trace([TraceSpec.parse(str(folder))])


def test_a_replay_too_large_for_memory_is_refused_before_synthesis(tmp_path: Path) -> None:
    # STEADY holds (2 + 2 + 1) x 600 = 3,000 requests; x10 would be 30,000.
    folder = _pool(tmp_path, "language", "m-x", {0: STEADY})
    spec = TraceSpec.parse(str(folder))
    assert read_trace([spec], TraceOptions(max_requests=3_500)).requests > 0
    with pytest.raises(TraceError) as err:
        read_trace([spec], TraceOptions(rate_scale=10, max_requests=3_500))
    text = str(err.value)
    assert "pool 'm-x'" in text and "about 0.0 M requests" not in text
    assert "--start/--end" in text and "--rate-scale" in text
    # The window picks what is counted: the first window alone (2,400 at x2) fits.
    one = read_trace([spec], TraceOptions(rate_scale=2, end_s=600, max_requests=3_500))
    assert 2_100 < one.requests < 2_700
