"""Trace readers: every format from small files written here, plain and gzipped, and the
errors that must name the file, the line and the problem."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from controlplane.simulator.traces import TraceError, TraceOptions, TraceSpec, read_trace


def _write(path: Path, text: str, gz: bool = False) -> Path:
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:17:03.9799600,4808,10\n"
    "2023-11-16 18:17:04.0319600,3180,8\n"
    "2023-11-16 18:17:06.5000000,100,200\n"
)


@pytest.mark.parametrize("gz", [False, True])
def test_azure_csv_as_published(tmp_path: Path, gz: bool) -> None:
    path = _write(tmp_path / ("code.csv.gz" if gz else "code.csv"), AZURE, gz)
    trace = read_trace([TraceSpec.parse(str(path))])
    m = trace.models["code"]
    np.testing.assert_allclose(m.arrivals, [0.0, 0.052, 2.52004], atol=1e-6)
    assert m.input_tokens is not None and m.output_tokens is not None
    assert m.input_tokens.tolist() == [4808, 3180, 100]
    assert m.output_tokens.tolist() == [10, 8, 200]
    assert m.service_s is None
    assert trace.requests == 3


def test_two_absolute_files_align_on_the_earliest_arrival(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.csv", AZURE)
    b = _write(
        tmp_path / "b.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:01.9799600,1,1\n",
    )
    trace = read_trace([TraceSpec.parse(f"code={a}"), TraceSpec.parse(f"conv={b}")])
    assert trace.models["conv"].arrivals.tolist() == [0.0]
    assert trace.models["code"].arrivals[0] == pytest.approx(2.0)
    assert trace.requests == 4


def test_generic_csv_seconds_tokens_and_service(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "mix.csv",
        "timestamp,model,input_tokens,output_tokens,service_s\n"
        "0.5,a,100,10,\n"
        "0.0,b,,,2.5\n"
        "1.5,,200,20,\n",
    )
    trace = read_trace([TraceSpec.parse(f"dflt={path}")])
    assert sorted(trace.models) == ["a", "b", "dflt"]
    assert trace.models["b"].service_s is not None
    assert trace.models["b"].service_s.tolist() == [2.5]
    assert trace.models["a"].service_s is None
    assert trace.models["dflt"].arrivals.tolist() == [1.5]


def test_generic_csv_iso_timestamps_sorted(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "iso.csv.gz",
        "timestamp,service_s\n2024-01-01T00:00:10Z,1\n2024-01-01T00:00:00Z,2\n",
        gz=True,
    )
    m = read_trace([TraceSpec.parse(f"x={path}")]).models["x"]
    assert m.arrivals.tolist() == [0.0, 10.0]
    assert m.service_s is not None and m.service_s.tolist() == [2.0, 1.0]


def test_mooncake_jsonl_ms(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "mc.jsonl",
        '{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [1]}\n'
        "\n"
        '{"timestamp": 2500, "input_length": 10, "output_length": 5}\n',
    )
    m = read_trace([TraceSpec.parse(f"kimi={path}")]).models["kimi"]
    assert m.arrivals.tolist() == [0.0, 2.5]
    assert m.input_tokens is not None and m.input_tokens.tolist() == [6955, 10]


def test_window_selects_and_rebases(tmp_path: Path) -> None:
    path = _write(tmp_path / "g.csv", "timestamp,service_s\n0,1\n10,1\n20,1\n30,1\n")
    trace = read_trace([TraceSpec.parse(str(path))], TraceOptions(start_s=10, end_s=30))
    assert trace.models["g"].arrivals.tolist() == [0.0, 10.0]
    assert trace.end_s == pytest.approx(20.0)
    assert trace.history_s == 0.0


@pytest.mark.parametrize(
    ("start", "history", "arrivals", "held", "measured"),
    [
        (20.0, 15.0, [-10.0, 0.0, 10.0], 15.0, 2),  # the requests of [5, 20) come before 0
        (10.0, 100.0, [-10.0, 0.0, 10.0, 20.0], 10.0, 3),  # no further back than the trace
        (None, 50.0, [0.0, 10.0, 20.0, 30.0], 0.0, 4),  # no window start: nothing before it
    ],
)
def test_a_window_comes_with_the_history_before_it(
    tmp_path: Path,
    start: float | None,
    history: float,
    arrivals: list[float],
    held: float,
    measured: int,
) -> None:
    path = _write(tmp_path / "g.csv", "timestamp,service_s\n0,1\n10,1\n20,1\n30,1\n40,2\n")
    options = TraceOptions(start_s=start, end_s=40, history_s=history)
    trace = read_trace([TraceSpec.parse(str(path))], options)
    assert trace.models["g"].arrivals.tolist() == arrivals
    assert trace.history_s == held
    assert trace.requests == measured  # the window's requests, not its history
    assert trace.end_s == pytest.approx(40.0 - (start or 0.0))


def test_a_window_with_only_history_is_empty(tmp_path: Path) -> None:
    path = _write(tmp_path / "g.csv", "timestamp,service_s\n0,1\n10,1\n")
    with pytest.raises(TraceError, match="no requests"):
        read_trace([TraceSpec.parse(str(path))], TraceOptions(start_s=15, end_s=30, history_s=60))


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (AZURE + "2023-11-16 18:17:07.0,abc,1\n", 5, "ContextTokens: not a number"),
        (AZURE + "2023-11-16 18:17:07.0,1\n", 5, "expected 3 columns"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", 2, "timestamp"),
        ("timestamp,service_s\n1,-3\n", 2, "service_s: must be a finite number >= 0"),
        ("timestamp,service_s\n0,1\nnan,1\n", 3, "timestamp: seconds must be finite"),
        ("timestamp,service_s\n0,1\ninf,1\n", 3, "timestamp: seconds must be finite"),
        ("timestamp,service_s\n0,1\n-1,1\n", 3, "timestamp: seconds must be finite and >= 0"),
        ("timestamp,model,input_tokens,output_tokens,service_s\n1,a,,,\n", 2, "needs input"),
        # past these bounds a value is a unit or typing mistake, not a request
        ("timestamp,service_s\n0,1\n1e18,1\n", 3, "over ten years from the start"),
        ("timestamp,input_tokens,output_tokens\n1,1e30,1\n", 2, "is over 100,000,000"),
        ("timestamp,service_s,timestamp\n1,1,1\n", 1, "a column is named twice"),
        # the header may follow blank lines; the line numbers stay the file's
        ("\n\ntimestamp,service_s\n0,1\nx,1\n", 5, "neither seconds nor ISO 8601"),
    ],
)
def test_malformed_line_names_file_line_and_problem(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = _write(tmp_path / "bad.csv", text)
    with pytest.raises(TraceError) as err:
        read_trace([TraceSpec.parse(str(path))])
    assert err.value.line == line
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert fragment in str(err.value)


def test_bad_jsonl_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "m.jsonl", '{"timestamp": 1, "input_length": 1, "output_length": 1}\n{x\n'
    )
    with pytest.raises(TraceError, match=r"m\.jsonl:2: invalid JSON"):
        read_trace([TraceSpec.parse(str(path))])


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "the trace is empty"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "header but no requests"),
        ("a,b,c\n1,2,3\n", "unrecognised trace format"),
    ],
)
def test_empty_or_unknown_is_an_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = _write(tmp_path / "t.csv", text)
    with pytest.raises(TraceError, match=fragment):
        read_trace([TraceSpec.parse(str(path))])


def test_missing_file_and_not_gzip(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        read_trace([TraceSpec.parse(str(tmp_path / "nope.csv"))])
    bad = tmp_path / "x.csv.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(TraceError, match="cannot read"):
        read_trace([TraceSpec.parse(str(bad))])


_ROWS = "".join(
    f"2023-11-16 18:{m:02d}:{sec:02d}.0,10,10\n" for m in range(50) for sec in range(60)
)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        # far past the decoder's first buffer: its own position would not give the line
        (AZURE + _ROWS + "2023-11-16 19:00:00.0,10,10 caf\xe9\n", 3005),
        ("timestamp,model,service_s\n0,a,1\n1,caf\xe9,1\n", 3),
        ('{"timestamp": 1, "input_length": 1, "output_length": 1}\n{"m": "caf\xe9"}\n', 2),
        ("TIMESTAMP,ContextTok\xe9ns,GeneratedTokens\n", 1),
    ],
    ids=["azure", "generic", "jsonl", "header"],
)
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_file_that_is_not_utf8_is_named_at_its_line(
    tmp_path: Path, text: str, line: int, gz: bool
) -> None:
    data = text.encode("latin-1")
    path = tmp_path / ("t.csv.gz" if gz else "t.csv")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(TraceError, match=rf"t\.csv(\.gz)?:{line}: not UTF-8 text \(byte 0xe9\)"):
        read_trace([TraceSpec.parse(str(path))])


def test_any_column_order_bom_and_blank_lines_read_alike(tmp_path: Path) -> None:
    plain = _write(tmp_path / "a.csv", "timestamp,model,service_s\n0,x,1\n5,y,2\n")
    shuffled = _write(tmp_path / "b.csv", "\ufeff\n\nservice_s,model,timestamp\n2,y,5\n1,x,0\n")
    jsonl = _write(
        tmp_path / "m.jsonl", '\ufeff\n{"timestamp": 1000, "input_length": 1, "output_length": 2}\n'
    )
    a, b = (read_trace([TraceSpec.parse(str(p))]) for p in (plain, shuffled))
    for name in ("x", "y"):
        assert np.array_equal(a.models[name].arrivals, b.models[name].arrivals)
        assert a.models[name].service_s.tolist() == b.models[name].service_s.tolist()  # type: ignore[union-attr]
    assert read_trace([TraceSpec.parse(str(jsonl))]).models["m"].arrivals.tolist() == [1.0]


def test_one_file_given_twice_as_the_same_model_is_refused(tmp_path: Path) -> None:
    # one file given twice as the same model would double its load
    one = _write(tmp_path / "one.csv", "timestamp,service_s\n0,1\n")
    with pytest.raises(TraceError, match="given twice"):
        read_trace([TraceSpec.parse(f"m={one}"), TraceSpec.parse(f"m={one}")])
    # as two models it is two deployments with the same traffic
    two = read_trace([TraceSpec.parse(f"m={one}"), TraceSpec.parse(f"n={one}")])
    assert sorted(two.models) == ["m", "n"]


def test_spec_parsing() -> None:
    assert TraceSpec.parse("m=/a/b.csv") == TraceSpec("/a/b.csv", "m", None)
    assert TraceSpec.parse("meta/llama-8b=/a/b.csv") == TraceSpec("/a/b.csv", "meta/llama-8b")
    with pytest.raises(TraceError, match="empty model name"):
        TraceSpec.parse("=/a/b.csv")
    assert TraceSpec.parse("/a/b.csv") == TraceSpec("/a/b.csv", None, None)
    assert TraceSpec.parse("/a/t.tar.gz#m-large") == TraceSpec("/a/t.tar.gz", None, "m-large")
