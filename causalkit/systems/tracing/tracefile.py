"""Raw kernel-window trace files: Chrome-trace JSON (gzip), the format Perfetto's UI opens.

Each kernel event becomes one complete event ``{"ph": "X", "name", "pid": rank, "tid": stream,
"ts": start_us, "dur": duration_us, "args": {"step"}}``. These files are the "cold" tier; the
metrics store keeps only the compressed summaries. :func:`read_trace` validates everything it
reads and raises :class:`~causalkit.systems.tracing.events.TraceFileError` naming the file for
corrupt, truncated or foreign input. It also reads ``torch.profiler`` Chrome/Kineto exports
(``prof.export_chrome_trace(path)``, plain or gzip) through
:mod:`causalkit.systems.tracing.kineto`; :func:`read_kineto` gives the iterations and phases of
such an export as well.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.systems.tracing.events import TraceFileError

__all__ = ["encode_events", "encoded_size", "write_trace", "read_trace", "read_kineto"]
_DOC_OPEN, _META_KEY = '{"traceEvents":[', '],"metadata":'
_EVENT_FIXED = len('{"ph":"X","cat":"kernel","name":,"pid":,"tid":,"ts":,"dur":,"args":{"step":}}')


def _records(frame: pd.DataFrame) -> list[dict]:
    start = frame["start_ns"].to_numpy(dtype=np.int64)
    dur = frame["duration_ns"].to_numpy(dtype=np.int64)
    return [{"ph": "X", "cat": "kernel", "name": n, "pid": int(r), "tid": s,
             "ts": int(t0) / 1e3, "dur": int(d) / 1e3, "args": {"step": int(k)}}
            for n, s, r, k, t0, d in zip(frame["name"], frame["stream"], frame["rank"],
                                         frame["step"], start, dur, strict=True)]


def encode_events(frame: pd.DataFrame, metadata: dict | None = None) -> bytes:
    """Chrome-trace JSON bytes of a kernel-event frame (see :func:`compression.events_frame`)."""
    doc = {"traceEvents": _records(frame), "metadata": dict(metadata or {})}
    return json.dumps(doc, separators=(",", ":")).encode()


def _str_len(values: np.ndarray) -> np.ndarray:
    return np.char.str_len(values.astype(str))


def encoded_size(frame: pd.DataFrame, metadata: dict | None = None) -> int:
    """``len(encode_events(frame, metadata))`` computed without building the JSON (vectorised
    lengths of the numbers' shortest representations; names encoded once per distinct name)."""
    n = len(frame)
    names, name_codes = np.unique(frame["name"].astype(str).to_numpy(), return_inverse=True)
    streams, stream_codes = np.unique(frame["stream"].astype(str).to_numpy(), return_inverse=True)
    name_len = np.array([len(json.dumps(v)) for v in names])[name_codes]
    stream_len = np.array([len(json.dumps(v)) for v in streams])[stream_codes]
    ts = frame["start_ns"].to_numpy(dtype=np.int64) / 1e3
    dur = frame["duration_ns"].to_numpy(dtype=np.int64) / 1e3
    numbers = (_str_len(frame["rank"].to_numpy(dtype=np.int64))
               + _str_len(frame["step"].to_numpy(dtype=np.int64))
               + _str_len(ts) + _str_len(dur))
    body = int(np.sum(_EVENT_FIXED + name_len + stream_len + numbers)) + max(n - 1, 0)
    meta = len(json.dumps(dict(metadata or {}), separators=(",", ":")))
    return len(_DOC_OPEN) + body + len(_META_KEY) + meta + 1


def write_trace(path, frame: pd.DataFrame, metadata: dict | None = None) -> Path:
    """Write a kernel-event frame as gzip Chrome-trace JSON; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb", compresslevel=3) as fh:
        fh.write(encode_events(frame, metadata))
    return path


def _load(path) -> tuple[Path, dict]:
    """Decode a plain or gzip JSON trace file into a dict with a ``traceEvents`` list."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trace file {str(path)!r} does not exist")
    raw = path.read_bytes()
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceFileError(f"trace file {str(path)!r} is corrupt or truncated: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFileError(f"trace file {str(path)!r} has no 'traceEvents' list")
    return path, doc


def read_kineto(path, *, rank: int | None = None, step: int = 0):
    """Read a ``torch.profiler`` Chrome/Kineto export (plain or gzip JSON).

    Returns
    -------
    KinetoTrace
        Kernel events, iterations (``ProfilerStep#N`` spans), phases and metadata; see
        ``causalkit.systems.tracing.kineto.parse_kineto`` for ``rank`` and ``step``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    TraceFileError
        If the file is truncated, not JSON, not a Kineto export, or an event is malformed.
    """
    from causalkit.systems.tracing.kineto import is_kineto, parse_kineto

    path, doc = _load(path)
    if not is_kineto(doc):
        raise TraceFileError(f"trace file {str(path)!r} is not a torch.profiler (Kineto) export")
    return parse_kineto(doc, source=str(path), rank=rank, step=step)


def read_trace(path, *, rank: int | None = None) -> tuple[pd.DataFrame, dict]:
    """Read a trace written by :func:`write_trace` or exported by ``torch.profiler`` (plain or
    gzip JSON).

    Parameters
    ----------
    path : str or Path
    rank : int, optional
        For a Kineto export, the rank of its events (default: its ``distributedInfo.rank``,
        else 0); ignored for our own files, whose events carry their rank.

    Returns
    -------
    (frame, metadata) : kernel events (name, stream, rank, step, start_ns, duration_ns; a Kineto
        export adds ``category``), metadata.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    TraceFileError
        If the file is truncated, not JSON, or its events lack required fields.
    """
    from causalkit.systems.tracing.kineto import is_kineto, parse_kineto

    path, doc = _load(path)
    if is_kineto(doc):
        trace = parse_kineto(doc, source=str(path), rank=rank)
        return trace.events, trace.meta
    rows = []
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        try:
            dur = float(ev["dur"])
            rows.append((str(ev["name"]), str(ev.get("tid", "compute")), int(ev["pid"]),
                         int(ev.get("args", {}).get("step", 0)), int(round(float(ev["ts"]) * 1e3)),
                         int(round(dur * 1e3))))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TraceFileError(f"trace file {str(path)!r}: event {i} is malformed "
                                 f"({exc!r})") from exc
        if not np.isfinite(dur) or dur < 0:
            raise TraceFileError(f"trace file {str(path)!r}: event {i} has duration {dur}")
    frame = pd.DataFrame(rows, columns=["name", "stream", "rank", "step", "start_ns",
                                        "duration_ns"])
    meta = doc.get("metadata", {})
    return frame, meta if isinstance(meta, dict) else {}
