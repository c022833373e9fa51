"""Request traces for the simulator: the formats it reads as published, detected by their
header, plain or gzipped, and how several files combine into one replay.

Formats (``read_trace`` picks by content, never by file name):
- Azure LLM inference CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``), absolute timestamps;
- generic CSV with header ``timestamp,model,input_tokens,output_tokens,service_s`` (any order;
  ``model`` optional; the token columns or ``service_s`` filled); timestamp in seconds from the
  start or ISO 8601;
- Mooncake-style JSONL (``timestamp`` in ms, ``input_length``, ``output_length``);
- ServeGen per-client rate files (see ``controlplane.simulator.servegen``).

Every problem names the file, the line and what is wrong (:class:`TraceError`); an empty
trace is an error, not a replay of nothing.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
# Bounds on what one trace can hold, past which a value is a unit or typing mistake: a
# replay of at most ten years (the clock keeps sub-microsecond steps there), and at most
# 100 M tokens per request (a hundred times the longest context windows served today).
MAX_SPAN_S = 10 * 365 * 86400.0
MAX_TOKENS = 100_000_000
_over_span = "over ten years from the start (are these milliseconds or nanoseconds?)"
GENERIC_COLUMNS = ("timestamp", "model", "input_tokens", "output_tokens", "service_s")


class TraceError(Exception):
    """A trace that cannot be replayed: which file, which line (when known) and why."""

    def __init__(self, file: str, problem: str, line: int | None = None) -> None:
        self.file, self.problem, self.line = file, problem, line
        where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {problem}")


@dataclass
class ModelTrace:
    """One model's requests, sorted by arrival (seconds). Token or service arrays are None
    when the source does not carry them."""

    model: str
    arrivals: np.ndarray
    input_tokens: np.ndarray | None = None
    output_tokens: np.ndarray | None = None
    service_s: np.ndarray | None = None
    source: str = ""

    def __len__(self) -> int:
        return int(self.arrivals.size)

    @property
    def measured(self) -> int:
        """Requests from time 0 on (before it: history read for the warm-up)."""
        return int(self.arrivals.size - np.searchsorted(self.arrivals, 0.0, "left"))

    def sorted(self) -> ModelTrace:
        if self.arrivals.size < 2 or bool(np.all(np.diff(self.arrivals) >= 0)):
            return self
        return self.select(np.argsort(self.arrivals, kind="stable"))

    def select(self, index: np.ndarray | slice, shift: float = 0.0) -> ModelTrace:
        """The requests at ``index`` (a mask, indices or a slice), every column alike,
        their arrivals moved by ``shift``."""
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return ModelTrace(
            self.model,
            self.arrivals[index] + shift,
            pick(self.input_tokens),
            pick(self.output_tokens),
            pick(self.service_s),
            self.source,
        )


@dataclass
class FileTrace:
    """What one file yields: per-model requests, and whether times are absolute (epoch
    seconds, to be aligned with other absolute files) or already relative to the start."""

    models: list[ModelTrace]
    absolute: bool
    span_s: float | None = None  # declared length (rate files), else None: last arrival


@dataclass
class Trace:
    """The combined replay: every model on one clock, 0 at the start of the replayed window.
    ``history_s`` seconds of the trace before the window come with it (arrivals in
    [-history_s, 0)): its real preceding traffic, for the warm-up, never measured."""

    models: dict[str, ModelTrace]
    end_s: float
    label: str
    sources: list[str] = field(default_factory=list)
    history_s: float = 0.0

    @property
    def requests(self) -> int:
        """Requests in the replayed window (the history not counted)."""
        return sum(m.measured for m in self.models.values())


@dataclass(frozen=True)
class TraceOptions:
    """How to synthesise arrivals from rate files and which part of a trace to replay."""

    seed: int = 0
    rate_scale: float = 1.0  # rate files only: multiply every client's rate
    start_s: float | None = None  # replay window, in the trace's own offsets
    end_s: float | None = None
    # With start_s: also read up to this many seconds before it (no further back than the
    # trace's own start), the real traffic a warm-up replays before the window.
    history_s: float = 0.0
    # Rate files only: the most requests to synthesise (None: what the memory available
    # now holds, ``request_budget``). Above it the read stops before allocating anything.
    max_requests: int | None = None


# What a replay holds per request, arrival synthesis included: the one-day three-pool scale
# check of docs/benchmarks.md peaks at 4,233 MB for 26.6 M requests (159 bytes each).
BYTES_PER_REQUEST = 160


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), else None (no limit is known)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def request_budget() -> int | None:
    free = available_bytes()
    return None if free is None else free // BYTES_PER_REQUEST


@dataclass(frozen=True)
class TraceSpec:
    """One ``--trace [MODEL=]PATH[#POOL]`` argument."""

    path: str
    model: str | None = None
    pool: str | None = None  # which ServeGen pool of a tarball / data folder

    @staticmethod
    def parse(text: str) -> TraceSpec:
        """``MODEL=PATH`` splits at the first ``=`` (a model name may hold ``/``, as in
        ``meta/llama-8b``) unless the whole text is a path that exists."""
        model: str | None = None
        path = text
        if "=" in text and not Path(text).exists():
            model, path = text.split("=", 1)
            if not model.strip():
                raise TraceError(text, "empty model name before '='")
            if not path:
                raise TraceError(text, f"no path after {model}=")
        pool: str | None = None
        if "#" in path and not Path(path).exists():
            path, pool = path.split("#", 1)
        return TraceSpec(path=path, model=model or None, pool=pool or None)


def read_trace(specs: list[TraceSpec], options: TraceOptions = TraceOptions()) -> Trace:
    """Read and combine traces. Absolute-time files are aligned on the earliest arrival among
    them; relative files keep their own offsets. A model in several files gets the requests
    of all of them (one file given twice is refused: it would double the load unnoticed)."""
    if not specs:
        raise TraceError("<none>", "no trace given")
    seen: set[tuple[str, str | None, str | None]] = set()
    for spec in specs:
        key = (str(Path(spec.path).resolve()), spec.model, spec.pool)
        if key in seen:
            raise TraceError(spec.path, "given twice (as the same model): its load would double")
        seen.add(key)
    files = [(spec, read_file(spec, options)) for spec in specs]
    t0_abs = min(
        (float(m.arrivals[0]) for _, f in files if f.absolute for m in f.models if len(m)),
        default=0.0,
    )
    merged: dict[str, list[ModelTrace]] = {}
    end = 0.0
    for _, f in files:
        for m in f.models:
            shift = t0_abs if f.absolute else 0.0
            m.arrivals = m.arrivals - shift
            merged.setdefault(m.model, []).append(m)
            if len(m):
                end = max(end, float(m.arrivals[-1]))
        if f.span_s is not None:
            end = max(end, f.span_s)
    models = {name: _window(_concat(name, parts), options) for name, parts in merged.items()}
    if options.start_s is not None:
        end -= options.start_s
    if options.end_s is not None:
        end = min(end, options.end_s - (options.start_s or 0.0))
    models = {k: v for k, v in models.items() if len(v)}
    span = max((float(m.arrivals[-1] - m.arrivals[0]) for m in models.values()), default=0.0)
    if max(span, end) > MAX_SPAN_S:
        where = ", ".join(s.path for s in specs)
        raise TraceError(where, f"the replay ends {max(span, end):,.0f} s, {_over_span}")
    if not any(m.measured for m in models.values()):
        where = ", ".join(s.path for s in specs)
        raise TraceError(where, "the trace has no requests (in the selected window)")
    end = max(end, max(float(m.arrivals[-1]) for m in models.values()))
    label = " + ".join(_label(s) for s in specs)
    return Trace(
        models=models,
        end_s=end,
        label=label,
        sources=[s.path for s in specs],
        history_s=history_span(options),
    )


def history_span(options: TraceOptions) -> float:
    """Seconds of history read before the window: ``history_s``, back to the trace's start
    (offset 0; for wall-clock traces, their earliest arrival) at the furthest."""
    if options.start_s is None:
        return 0.0
    return max(0.0, min(options.history_s, options.start_s))


def _label(spec: TraceSpec) -> str:
    name = Path(spec.path).name
    base = f"{spec.model}={name}" if spec.model else name
    return f"{base}#{spec.pool}" if spec.pool else base


def _concat(name: str, parts: list[ModelTrace]) -> ModelTrace:
    if len(parts) == 1:
        return parts[0].sorted()

    def join(attr: str) -> np.ndarray | None:
        arrays = [getattr(p, attr) for p in parts]
        if any(a is None for a in arrays):
            return None
        return np.concatenate(arrays)

    joined = ModelTrace(
        name,
        np.concatenate([p.arrivals for p in parts]),
        join("input_tokens"),
        join("output_tokens"),
        join("service_s"),
        " + ".join(p.source for p in parts),
    )
    if any(p.service_s is None for p in parts) and any(p.service_s is not None for p in parts):
        raise TraceError(joined.source, f"model {name!r}: some files give service_s, some not")
    return joined.sorted()


def _window(m: ModelTrace, options: TraceOptions) -> ModelTrace:
    """The window's requests on its own clock (0 at ``start_s``), its history before 0."""
    lo = options.start_s if options.start_s is not None else -math.inf
    hi = options.end_s if options.end_s is not None else math.inf
    if lo == -math.inf and hi == math.inf:
        return m
    keep = (m.arrivals >= lo - history_span(options)) & (m.arrivals < hi)
    return m.select(keep, shift=0.0 if lo == -math.inf else -lo)


# --------------------------------------------------------------------------- detection


def read_file(spec: TraceSpec, options: TraceOptions = TraceOptions()) -> FileTrace:
    from controlplane.simulator import servegen  # rate files: a module of their own

    path = Path(spec.path)
    name = str(path)
    if not path.exists():
        raise TraceError(name, "no such file or directory")
    if path.is_dir() or _is_tarball(path):
        return servegen.read_servegen(spec, options)
    head, line = "", 0
    try:
        with open_text(path) as fh:
            for text in fh:  # (blank lines before it are skipped)
                line += 1
                head = text.strip()
                if head:
                    break
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise read_error(path, exc) from exc
    if not head:
        raise TraceError(name, "the trace is empty", max(line, 1))
    model = spec.model or _stem(path)
    cells = tuple(c.strip() for c in head.split(","))
    if cells == AZURE_HEADER:
        return _read_azure(path, model)
    if "timestamp" in cells and set(cells) <= set(GENERIC_COLUMNS):
        if len(set(cells)) < len(cells):
            raise TraceError(name, f"a column is named twice in the header {head!r}", line)
        return _read_generic(path, cells, spec.model)
    if head.startswith("{"):
        return _read_jsonl(path, model)
    if servegen.looks_like_rate_row(head):
        return servegen.read_servegen(spec, options)
    raise TraceError(
        name,
        f"unrecognised trace format: header {head[:80]!r} is not the Azure LLM CSV "
        f"({','.join(AZURE_HEADER)}), the generic CSV ({','.join(GENERIC_COLUMNS)}), "
        "Mooncake JSONL or a ServeGen rate file",
        1,
    )


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv", ".jsonl", ".json", ".txt"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def _is_tarball(path: Path) -> bool:
    return path.name.endswith((".tar.gz", ".tgz", ".tar")) and tarfile.is_tarfile(path)


def open_text(path: Path) -> io.TextIOBase:
    """A trace file's text, plain or gzipped (by its magic bytes), a byte-order mark dropped."""
    with open(path, "rb") as raw:
        magic = raw.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115


def read_error(path: Path, exc: Exception) -> TraceError:
    """A read failure as a TraceError; a file that is not UTF-8 is named at its first bad line
    (the decoder's own position is within a buffer, not the file)."""
    if not isinstance(exc, UnicodeDecodeError):
        return TraceError(str(path), f"cannot read: {exc}")
    return not_utf8(str(path), path)


def not_utf8(source: str, data: Path | bytes) -> TraceError:
    line_no, byte = _undecodable_line(data)
    where = f" (byte 0x{byte:02x})" if byte is not None else ""
    return TraceError(source, f"not UTF-8 text{where}; save the trace as UTF-8", line_no)


def _undecodable_line(source: Path | bytes) -> tuple[int | None, int | None]:
    """The 1-based line of the first byte sequence that is not UTF-8, and its first byte."""
    try:
        if isinstance(source, bytes):
            lines: Iterator[bytes] = iter(source.splitlines(keepends=True))
            return _first_bad(lines)
        with open(source, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
        with gzip.open(source, "rb") if gzipped else open(source, "rb") as fh:
            return _first_bad(iter(fh))
    except (OSError, EOFError, gzip.BadGzipFile):
        return None, None


def _first_bad(lines: Iterator[bytes]) -> tuple[int | None, int | None]:
    for line_no, line in enumerate(lines, start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return line_no, line[exc.start]
    return None, None


def _rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """CSV rows after the header with their 1-based line numbers; read errors name the line."""
    try:
        with open_text(path) as fh:
            reader = csv.reader(fh)
            for row in reader:  # the header: the first row that is not blank
                if any(c.strip() for c in row):
                    break
            for row in reader:
                if row and any(c.strip() for c in row):
                    yield reader.line_num, row
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile, csv.Error) as exc:
        raise read_error(path, exc) from exc


def _number(file: str, line: int, column: str, text: str, integer: bool = False) -> float:
    """A finite number >= 0; with ``integer``, a token count (a whole number, at most
    ``MAX_TOKENS``)."""
    try:
        value = float(text)
    except ValueError:
        raise TraceError(file, f"{column}: not a number: {text!r}", line) from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(file, f"{column}: must be a finite number >= 0, got {text!r}", line)
    if integer and value != int(value):
        raise TraceError(file, f"{column}: must be a whole number, got {text!r}", line)
    if integer and value > MAX_TOKENS:
        raise TraceError(file, f"{column}: {text} tokens is over {MAX_TOKENS:,}", line)
    return value


def _timestamp(file: str, line: int, text: str) -> tuple[float, bool]:
    """Seconds, and whether they are absolute (ISO 8601) rather than from the start."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:  # ("nan" and "inf" parse as floats, and a replay cannot start before 0)
        if not math.isfinite(seconds) or seconds < 0:
            raise TraceError(file, f"timestamp: seconds must be finite and >= 0: {text!r}", line)
        if seconds > MAX_SPAN_S:
            raise TraceError(file, f"timestamp: {text} s is {_over_span}", line)
        return seconds, False
    iso = text
    if "." in iso:  # Azure writes 7 fractional digits; datetime takes at most 6
        head, frac = iso.split(".", 1)
        digits = "".join(c for c in frac if c.isdigit())
        rest = frac[len(digits) :]
        iso = f"{head}.{digits[:6]}{rest}"
    try:
        dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        raise TraceError(file, f"timestamp: neither seconds nor ISO 8601: {text!r}", line) from None
    if dt.tzinfo is None:  # naive times are read as UTC so that files align consistently
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp(), True


def _no_requests(path: Path) -> TraceError:
    return TraceError(str(path), "the trace has a header but no requests")


# ------------------------------------------------------------------------------ readers


def _read_azure(path: Path, model: str) -> FileTrace:
    name = str(path)
    t: list[float] = []
    inp: list[float] = []
    out: list[float] = []
    for line, row in _rows(path):
        if len(row) != 3:
            raise TraceError(name, f"expected 3 columns, got {len(row)}", line)
        ts, absolute = _timestamp(name, line, row[0])
        if not absolute:
            raise TraceError(name, f"TIMESTAMP: expected a date and time, got {row[0]!r}", line)
        t.append(ts)
        inp.append(_number(name, line, "ContextTokens", row[1], integer=True))
        out.append(_number(name, line, "GeneratedTokens", row[2], integer=True))
    if not t:
        raise _no_requests(path)
    trace = ModelTrace(model, np.array(t), np.array(inp), np.array(out), None, name)
    return FileTrace([trace.sorted()], absolute=True)


def _read_generic(path: Path, header: tuple[str, ...], model: str | None) -> FileTrace:
    name = str(path)
    col = {c: i for i, c in enumerate(header)}
    has_tokens = "input_tokens" in col and "output_tokens" in col
    if ("input_tokens" in col) != ("output_tokens" in col):
        raise TraceError(name, "input_tokens and output_tokens go together", 1)
    if not has_tokens and "service_s" not in col:
        raise TraceError(name, "needs input_tokens+output_tokens or service_s columns", 1)
    default_model = model or _stem(path)
    per: dict[str, tuple[list[float], list[float], list[float], list[float]]] = {}
    kinds: set[bool] = set()
    for line, row in _rows(path):
        if len(row) != len(header):
            raise TraceError(name, f"expected {len(header)} columns, got {len(row)}", line)
        ts, absolute = _timestamp(name, line, row[col["timestamp"]])
        kinds.add(absolute)
        if len(kinds) > 1:
            raise TraceError(name, "timestamp: mixes seconds and ISO 8601 dates", line)
        m = row[col["model"]].strip() if "model" in col else ""
        lists = per.setdefault(m or default_model, ([], [], [], []))
        lists[0].append(ts)
        svc_text = row[col["service_s"]].strip() if "service_s" in col else ""
        tok_in = row[col["input_tokens"]].strip() if has_tokens else ""
        tok_out = row[col["output_tokens"]].strip() if has_tokens else ""
        if svc_text:
            lists[3].append(_number(name, line, "service_s", svc_text))
        elif tok_in and tok_out:
            lists[3].append(math.nan)  # from the fleet's token model
        else:
            raise TraceError(name, "needs input_tokens+output_tokens or service_s", line)
        lists[1].append(_number(name, line, "input_tokens", tok_in, True) if tok_in else 0.0)
        lists[2].append(_number(name, line, "output_tokens", tok_out, True) if tok_out else 0.0)
    if not per:
        raise _no_requests(path)
    models = []
    for m, (t, i, o, s) in per.items():
        svc = np.array(s)
        service = None if bool(np.all(np.isnan(svc))) else svc
        tokens = has_tokens
        models.append(
            ModelTrace(
                m,
                np.array(t),
                np.array(i) if tokens else None,
                np.array(o) if tokens else None,
                service,
                name,
            ).sorted()
        )
    return FileTrace(models, absolute=kinds == {True})


def _read_jsonl(path: Path, model: str) -> FileTrace:
    name = str(path)
    t: list[float] = []
    inp: list[float] = []
    out: list[float] = []
    try:
        with open_text(path) as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TraceError(name, f"invalid JSON: {exc.msg}", line_no) from None
                if not isinstance(obj, dict):
                    raise TraceError(name, "expected a JSON object per line", line_no)
                for key in ("timestamp", "input_length", "output_length"):
                    if key not in obj:
                        raise TraceError(name, f"missing field {key!r}", line_no)
                t.append(_number(name, line_no, "timestamp", str(obj["timestamp"])) / 1000.0)
                inp.append(_number(name, line_no, "input_length", str(obj["input_length"]), True))
                out.append(_number(name, line_no, "output_length", str(obj["output_length"]), True))
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise read_error(path, exc) from exc
    if not t:
        raise _no_requests(path)
    trace = ModelTrace(model, np.array(t), np.array(inp), np.array(out), None, name)
    return FileTrace([trace.sorted()], absolute=False)
