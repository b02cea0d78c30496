"""Turn a finished torch.profiler window into kernel events.

On a CPU build every aten op, every ``record_function`` span (e.g. ``collective:allreduce``) and
every ``gloo:*`` span on gloo's worker threads is one event. The thread with the most events is
the training thread (stream ``"compute"``); all other threads are stream ``"comm"``. With
``ProfilerActivity.CUDA`` the window also holds device events (CUDA kernels, memcpys, memsets);
their stream is ``"gpu<device>:stream<id>"``, as in the Kineto importer
(:mod:`causalkit.systems.tracing.kineto`). Times are re-based to the window's first event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["profiler_events", "thread_streams"]


def thread_streams(threads: np.ndarray) -> np.ndarray:
    """Stream of each event from its thread id: ``"compute"`` for the thread with the most
    events (the training thread), ``"comm"`` for every other thread."""
    values, counts = np.unique(threads, return_counts=True)
    return np.where(threads == values[np.argmax(counts)], "compute", "comm")


def _device_stream(e) -> str | None:
    """``"gpu<index>:stream<id>"`` for an event on a CUDA device, None for a host event."""
    kind = e.device_type()
    if getattr(kind, "name", str(kind).rsplit(".", 1)[-1]) != "CUDA":
        return None
    return f"gpu{e.device_index()}:stream{e.device_resource_id()}"


def _raw_events(prof) -> list[tuple[str, int, str | None, int, int]]:
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is not None:
        return [(e.name(), e.start_thread_id(), _device_stream(e), e.start_ns(), e.duration_ns())
                for e in results.events()]
    return [(e.name, e.thread, None, int(e.time_range.start * 1e3),
             int((e.time_range.end - e.time_range.start) * 1e3)) for e in prof.events()]


def profiler_events(prof, *, rank: int, step: int) -> pd.DataFrame:
    """Kernel-event frame (name, stream, rank, step, start_ns, duration_ns) of a profiler window."""
    rows = _raw_events(prof)
    columns = ["name", "stream", "rank", "step", "start_ns", "duration_ns"]
    if not rows:
        return pd.DataFrame(columns=columns)
    names, threads, device, start, dur = zip(*rows, strict=True)
    device = np.asarray(device, dtype=object)
    host = np.array([d is None for d in device], dtype=bool)
    stream = device.copy()
    if host.any():
        stream[host] = thread_streams(np.asarray(threads)[host])
    start = np.asarray(start, dtype=np.int64)
    frame = pd.DataFrame({"name": names, "stream": stream,
                          "rank": rank, "step": step, "start_ns": start - start.min(),
                          "duration_ns": np.maximum(np.asarray(dur, dtype=np.int64), 0)})
    return frame[columns]
