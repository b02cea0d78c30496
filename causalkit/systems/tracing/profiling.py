"""Turn a finished torch.profiler CPU window into kernel events.

On a CPU build every aten op, every ``record_function`` span (e.g. ``collective:allreduce``) and
every ``gloo:*`` span on gloo's worker threads is one event. The thread with the most events is
the training thread (stream ``"compute"``); all other threads are stream ``"comm"``. Times are
re-based to the window's first event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["profiler_events"]


def _raw_events(prof) -> list[tuple[str, int, int, int]]:
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is not None:
        return [(e.name(), e.start_thread_id(), e.start_ns(), e.duration_ns())
                for e in results.events()]
    return [(e.name, e.thread, int(e.time_range.start * 1e3),
             int((e.time_range.end - e.time_range.start) * 1e3)) for e in prof.events()]


def profiler_events(prof, *, rank: int, step: int) -> pd.DataFrame:
    """Kernel-event frame (name, stream, rank, step, start_ns, duration_ns) of a profiler window."""
    rows = _raw_events(prof)
    columns = ["name", "stream", "rank", "step", "start_ns", "duration_ns"]
    if not rows:
        return pd.DataFrame(columns=columns)
    names, threads, start, dur = zip(*rows, strict=True)
    threads = np.asarray(threads)
    values, counts = np.unique(threads, return_counts=True)
    main = values[np.argmax(counts)]
    start = np.asarray(start, dtype=np.int64)
    frame = pd.DataFrame({"name": names, "stream": np.where(threads == main, "compute", "comm"),
                          "rank": rank, "step": step, "start_ns": start - start.min(),
                          "duration_ns": np.maximum(np.asarray(dur, dtype=np.int64), 0)})
    return frame[columns]
