"""Import ``torch.profiler`` Chrome/Kineto trace exports (``prof.export_chrome_trace(path)``).

A Kineto export is a Chrome-trace JSON document whose ``traceEvents`` mix several kinds of
events (torch 2.x, checked against real exports):

* host events on the Python process (``pid`` the process id, ``tid`` the thread id):
  ``cat`` ``"cpu_op"`` (aten ops), ``"user_annotation"`` (``record_function`` spans, including
  the ``ProfilerStep#N`` span of each ``prof.step()``), ``"cuda_runtime"`` / ``"cuda_driver"``
  (launch calls, with ``args.correlation``);
* device events (``pid`` the device index, ``tid`` the stream id, also in ``args.stream``):
  ``"kernel"``, ``"gpu_memcpy"``, ``"gpu_memset"``, ``"gpu_user_annotation"``, each with the
  ``args.correlation`` of the launch that enqueued it;
* bookkeeping with *string* process ids (``"Spans"``, ``"Traces"``, ``""``): the profiler's own
  span, iteration markers, flow arrows (``ph`` ``"s"``/``"f"``), metadata (``ph`` ``"M"``).

The rank is the top-level ``distributedInfo.rank`` (written when a process group is
initialised), else 0; a ``rank`` argument overrides both. Only complete events (``ph == "X"``)
of :data:`KINETO_CATEGORIES` become kernel events (name, stream, rank, step, start_ns,
duration_ns, plus ``category``); ``ts`` and ``dur`` are microseconds with nanosecond
decimals and are rounded to integer nanoseconds. Streams: a device event's stream is
``"gpu<device>:stream<id>"``; host threads follow :func:`profiling.thread_streams` (the thread
with the most events is ``"compute"``, the others ``"comm"``). An event's step is the
``ProfilerStep#N`` span that contains it (a device event: the span containing the launch with
its correlation id), else ``step``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from causalkit.systems.tracing.events import COLLECTIVE_PHASES, COMPUTE_PHASES, TraceFileError
from causalkit.systems.tracing.profiling import thread_streams

__all__ = ["KINETO_CATEGORIES", "DEVICE_CATEGORIES", "KinetoTrace", "is_kineto", "parse_kineto",
           "kineto_store"]

#: Event categories read as kernel events by default.
KINETO_CATEGORIES = frozenset({"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver",
                               "kernel", "gpu_memcpy", "gpu_memset"})
#: Categories whose events run on a device stream (``pid`` device, ``tid`` stream).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
_LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
_STEP_SPAN = re.compile(r"^ProfilerStep#(\d+)$")
#: Top-level keys that only Kineto writes (our own raw windows carry ``metadata`` instead).
_KINETO_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds",
                "traceName")
_COLUMNS = ["name", "stream", "rank", "step", "start_ns", "duration_ns", "category"]


@dataclass
class KinetoTrace:
    """One rank's Kineto export, split into the tables the tracer's channels would produce.

    Attributes
    ----------
    events : DataFrame
        Kernel events (name, stream, rank, step, start_ns relative to the first one,
        duration_ns, category).
    iterations : DataFrame
        One row per ``ProfilerStep#N`` span (rank, step, start_ns wall clock, duration_ns).
    phases : DataFrame
        Host ``record_function`` spans named after a phase (``forward``, ``allreduce``, ... or
        ``collective:<phase>``): rank, step, phase, grp (``"dp0"``), start_ns (wall clock),
        duration_ns, nbytes (0).
    meta : dict
        ``format`` (``"kineto"``), ``rank``, ``world_size``, ``t0_ns`` (wall-clock ns of
        ``start_ns`` 0), ``distributedInfo`` and ``deviceProperties`` as exported.
    """

    events: pd.DataFrame
    iterations: pd.DataFrame
    phases: pd.DataFrame
    meta: dict = field(default_factory=dict)


def is_kineto(doc) -> bool:
    """Whether a decoded Chrome-trace document is a Kineto export."""
    return isinstance(doc, dict) and any(k in doc for k in _KINETO_KEYS)


def _rank_of(doc: dict, rank, source: str) -> tuple[int, int]:
    info = doc.get("distributedInfo")
    world = 1
    found = 0
    if info is not None:
        try:
            found, world = int(info["rank"]), int(info.get("world_size", 1))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TraceFileError(f"trace file {source!r}: distributedInfo has no valid rank "
                                 f"({exc!r})") from exc
    if rank is not None:
        if not isinstance(rank, (int, np.integer)) or isinstance(rank, bool) or rank < 0:
            raise ValueError(f"rank must be a non-negative int; got {rank!r}")
        found = int(rank)
    return found, max(world, found + 1)


def _complete_events(doc: dict, source: str) -> pd.DataFrame:
    """Every ``ph == "X"`` event as (i, cat, name, pid, tid, ts_ns, dur_ns, correlation, stream)."""
    rows = []
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        try:
            args = ev.get("args") or {}
            ts, dur = float(ev["ts"]), float(ev["dur"])
            rows.append((i, str(ev.get("cat", "")), str(ev["name"]), ev.get("pid"),
                         ev.get("tid"), int(round(ts * 1e3)), int(round(dur * 1e3)),
                         args.get("correlation"), args.get("stream", ev.get("tid")),
                         args.get("device", ev.get("pid"))))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise TraceFileError(f"trace file {source!r}: event {i} is malformed "
                                 f"({exc!r})") from exc
        if not np.isfinite(dur) or dur < 0:
            raise TraceFileError(f"trace file {source!r}: event {i} has duration {dur}")
    return pd.DataFrame(rows, columns=["i", "cat", "name", "pid", "tid", "ts", "dur",
                                       "correlation", "stream", "device"])


def _step_of(ts: np.ndarray, spans: pd.DataFrame, default: int) -> np.ndarray:
    """Step of each timestamp: the ``ProfilerStep#N`` span [start, end) holding it."""
    out = np.full(ts.size, default, dtype=np.int64)
    if spans.empty:
        return out
    spans = spans.sort_values("ts")
    starts = spans["ts"].to_numpy()
    ends = starts + spans["dur"].to_numpy()
    k = np.searchsorted(starts, ts, side="right") - 1
    inside = (k >= 0) & (ts < ends[np.maximum(k, 0)])
    out[inside] = spans["step"].to_numpy()[k[inside]]
    return out


def parse_kineto(doc: dict, *, source: str = "<memory>", rank: int | None = None,
                 step: int = 0, categories=KINETO_CATEGORIES) -> KinetoTrace:
    """Split a decoded Kineto export into kernel events, iterations and phases.

    Parameters
    ----------
    doc : dict
        The decoded JSON document (``is_kineto(doc)``).
    source : str
        Name used in error messages (the file).
    rank : int, optional
        Rank of every event; default ``distributedInfo.rank``, else 0.
    step : int
        Step of events outside every ``ProfilerStep#N`` span.
    categories : collection of str
        Event categories kept as kernel events.

    Raises
    ------
    TraceFileError
        If an event lacks ``ts``/``dur``/``name`` or has a negative duration, or
        ``distributedInfo`` has no integer rank.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFileError(f"trace file {source!r} has no 'traceEvents' list")
    rank, world = _rank_of(doc, rank, source)
    ev = _complete_events(doc, source)
    try:
        base_ns = int(doc.get("baseTimeNanoseconds", 0))
    except (TypeError, ValueError) as exc:
        raise TraceFileError(f"trace file {source!r}: baseTimeNanoseconds is not an integer "
                             f"({exc!r})") from exc
    is_span = (ev["cat"] == "user_annotation") & ev["name"].str.match(_STEP_SPAN.pattern)
    spans = ev[is_span].assign(step=lambda f: f["name"].str.extract(_STEP_SPAN.pattern)[0]
                               .astype(np.int64))
    host_step = _step_of(ev["ts"].to_numpy(), spans, int(step))
    ev = ev.assign(step=host_step)
    device = ev["cat"].isin(DEVICE_CATEGORIES).to_numpy()
    launches = ev[ev["cat"].isin(_LAUNCH_CATEGORIES) & ev["correlation"].notna()]
    launch_step = ev["correlation"].map(dict(zip(launches["correlation"], launches["step"],
                                                 strict=True)))
    linked = device & launch_step.notna().to_numpy()
    ev.loc[linked, "step"] = launch_step[linked].astype(np.int64)
    keep = ev["cat"].isin(set(categories)).to_numpy() & ~is_span.to_numpy()
    kept = ev[keep]
    stream = np.empty(len(kept), dtype=object)
    dev = kept["cat"].isin(DEVICE_CATEGORIES).to_numpy()
    stream[dev] = [f"gpu{d}:stream{s}" for d, s in zip(kept["device"][dev], kept["stream"][dev],
                                                         strict=True)]
    if (~dev).any():
        stream[~dev] = thread_streams(kept["tid"][~dev].astype(str).to_numpy())
    t0 = int(kept["ts"].min()) if len(kept) else 0
    events = pd.DataFrame({"name": kept["name"].to_numpy(), "stream": stream, "rank": rank,
                           "step": kept["step"].to_numpy(dtype=np.int64),
                           "start_ns": kept["ts"].to_numpy(dtype=np.int64) - t0,
                           "duration_ns": kept["dur"].to_numpy(dtype=np.int64),
                           "category": kept["cat"].to_numpy()}, columns=_COLUMNS)
    iterations = pd.DataFrame({"rank": rank, "step": spans["step"].to_numpy(dtype=np.int64),
                               "start_ns": base_ns + spans["ts"].to_numpy(dtype=np.int64),
                               "duration_ns": spans["dur"].to_numpy(dtype=np.int64)},
                              columns=["rank", "step", "start_ns", "duration_ns"])
    phase = ev["name"].str.removeprefix("collective:")
    named = (ev["cat"] == "user_annotation") & phase.isin(COMPUTE_PHASES | COLLECTIVE_PHASES)
    ph = ev[named]
    phases = pd.DataFrame({"rank": rank, "step": ph["step"].to_numpy(dtype=np.int64),
                           "phase": phase[named].to_numpy(), "grp": "dp0",
                           "start_ns": base_ns + ph["ts"].to_numpy(dtype=np.int64),
                           "duration_ns": ph["dur"].to_numpy(dtype=np.int64), "nbytes": 0},
                          columns=["rank", "step", "phase", "grp", "start_ns", "duration_ns",
                                   "nbytes"])
    meta = {"format": "kineto", "rank": rank, "world_size": world, "t0_ns": base_ns + t0,
            "distributedInfo": doc.get("distributedInfo"),
            "deviceProperties": doc.get("deviceProperties", [])}
    return KinetoTrace(events, iterations, phases, meta)


def kineto_store(traces, **compress_options):
    """A :class:`~causalkit.systems.tracing.store.MemoryStore` of Kineto exports, one per rank.

    Each rank's events are compressed per step (one kernel summary per rank and step, the
    window the tracer would upload); its ``ProfilerStep#N`` spans become the iterations and its
    phase-named ``record_function`` spans the phases, so :func:`diagnose` runs on it. Every
    step of an export is profiled alike, so no step is set apart as perturbed by a profiler
    window (``profile_steps`` 0 in the store's metadata).

    Parameters
    ----------
    traces : iterable of KinetoTrace or path
        Paths are read with :func:`~causalkit.systems.tracing.read_kineto`.
    **compress_options
        Passed to :func:`~causalkit.systems.tracing.compress`.

    Raises
    ------
    ValueError
        If two traces have the same rank or no trace has a ``ProfilerStep#N`` span.
    """
    from causalkit.systems.tracing.compression import compress
    from causalkit.systems.tracing.store import MemoryStore
    from causalkit.systems.tracing.tracefile import read_kineto

    traces = [t if isinstance(t, KinetoTrace) else read_kineto(t) for t in traces]
    ranks = [t.meta["rank"] for t in traces]
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"traces: ranks {sorted(ranks)} repeat (pass rank= when reading)")
    iterations = pd.concat([t.iterations for t in traces], ignore_index=True)
    if iterations.empty:
        raise ValueError("traces: no ProfilerStep#N spans (profile with prof.step() per step)")
    summaries = []
    for t in traces:
        for k, (_, window) in enumerate(t.events.groupby("step", sort=True)):
            summaries.append(compress(window, window_id=k, **compress_options))
    meta = {t.meta["rank"]: {**t.meta, "profile_steps": 0} for t in traces}
    return MemoryStore(iterations, pd.concat([t.phases for t in traces], ignore_index=True),
                       summaries, meta=meta)
