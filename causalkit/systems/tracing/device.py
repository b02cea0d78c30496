"""The device seam of the tracer: how phase boundaries are timed and what the kernel channel
profiles.

* :class:`HostClock` (CPU): ``perf_counter_ns`` marks, durations known at once; the kernel
  channel profiles CPU ops.
* :class:`CudaClock` (CUDA): a ``torch.cuda.Event(enable_timing=True)`` recorded on the stream
  at each phase boundary, so a duration is GPU execution time, not launch time; compute phases
  are recorded on the current (compute) stream and collectives on a communication stream
  (:meth:`CudaClock.comm`; ARGUS records comm-phase events on the NCCL stream because on the
  compute stream an all-reduce looks instant). Durations are deferred: the processor thread
  resolves them (``end.synchronize()``, ``start.elapsed_time(end)``), never the training thread.
  The kernel channel adds ``ProfilerActivity.CUDA`` (CUPTI kernels, memcpys, memsets).

:func:`device_clock` picks one (``"auto"``: CUDA when ``torch.cuda.is_available()``). The CUDA
calls go through the ``cuda`` object given to :class:`CudaClock` (default ``torch.cuda``), so
the selection and the CUDA code path run on a CPU host with a stand-in object.

Reference: Zhou et al. (2026), arXiv 2606.20374, section 4 (framework-semantics channel).
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext

__all__ = ["HostClock", "CudaClock", "Pending", "device_clock", "profiler_activities"]


class Pending:
    """A duration still on the device: resolved by :meth:`resolve` (blocks until ``end`` ran)."""

    __slots__ = ("clock", "start", "end")

    def __init__(self, clock, start, end):
        self.clock, self.start, self.end = clock, start, end

    def resolve(self) -> int:
        """Duration in nanoseconds."""
        return self.clock.elapsed_ns(self.start, self.end)


class HostClock:
    """Phase timing on the host: ``time.perf_counter_ns`` (durations known immediately)."""

    name = "cpu"
    deferred = False
    activities = ("CPU",)

    @staticmethod
    def mark() -> int:
        return time.perf_counter_ns()

    @staticmethod
    def elapsed_ns(start: int, end: int) -> int:
        return end - start

    @staticmethod
    def comm():
        """Context of a collective: nothing to switch on the host."""
        return nullcontext()


class CudaClock:
    """Phase timing with CUDA events on the compute and communication streams.

    Parameters
    ----------
    cuda : module-like, optional
        Provides ``Event(enable_timing=True)``, ``Stream()``, ``current_stream()`` and
        ``stream(s)`` as ``torch.cuda`` does (the default).
    comm_stream : stream, optional
        Stream collectives are issued and timed on; default a new ``cuda.Stream()``.
    """

    name = "cuda"
    deferred = True
    activities = ("CPU", "CUDA")

    def __init__(self, cuda=None, comm_stream=None):
        if cuda is None:
            import torch

            cuda = torch.cuda
        self.cuda = cuda
        self.comm_stream = cuda.Stream() if comm_stream is None else comm_stream

    def mark(self):
        """A timing event recorded on the current stream."""
        event = self.cuda.Event(enable_timing=True)
        event.record()
        return event

    @staticmethod
    def elapsed_ns(start, end) -> int:
        """GPU time between two recorded events (waits for ``end`` to complete)."""
        end.synchronize()
        return int(round(start.elapsed_time(end) * 1e6))     # elapsed_time is in ms

    @contextmanager
    def comm(self):
        """Run the block on the communication stream: it first waits for the compute stream
        (the collective's inputs), and the compute stream waits for it afterwards."""
        compute = self.cuda.current_stream()
        self.comm_stream.wait_stream(compute)
        with self.cuda.stream(self.comm_stream):
            yield self.comm_stream
        compute.wait_stream(self.comm_stream)


def device_clock(device="auto", cuda=None):
    """The tracer's clock for ``device``.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda"} or clock
        ``"auto"``: :class:`CudaClock` when ``cuda.is_available()``, else :class:`HostClock`.
        An object with ``mark``, ``elapsed_ns``, ``comm``, ``deferred`` and ``activities`` is
        returned as is.
    cuda : module-like, optional
        Stand-in for ``torch.cuda`` (default: ``torch.cuda`` if torch imports).

    Raises
    ------
    ValueError
        For an unknown ``device`` string, or ``"cuda"`` when CUDA is not available.
    """
    if not isinstance(device, str):
        needed = ("mark", "elapsed_ns", "comm", "deferred", "activities")
        missing = [a for a in needed if not hasattr(device, a)]
        if missing:
            raise TypeError(f"device must be 'auto', 'cpu', 'cuda' or a clock; "
                            f"{type(device).__name__} lacks {missing}")
        return device
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda'; got {device!r}")
    if device == "cpu":
        return HostClock()
    if cuda is None:
        try:
            import torch

            cuda = torch.cuda
        except ImportError:
            cuda = None
    available = cuda is not None and bool(cuda.is_available())
    if device == "cuda" and not available:
        raise ValueError("device='cuda' but CUDA is not available")
    return CudaClock(cuda) if available else HostClock()


def profiler_activities(clock) -> list:
    """``torch.profiler.ProfilerActivity`` members of the clock's kernel channel."""
    from torch.profiler import ProfilerActivity

    return [getattr(ProfilerActivity, a) for a in clock.activities]
