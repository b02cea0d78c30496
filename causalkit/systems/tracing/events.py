"""Trace records of the three collection channels and their wire checks.

The field set follows the ARGUS event schema (Zhou et al., 2026, arXiv 2606.20374, section 4):
kernel activity, framework phases, CPU stack snapshots and per-rank iteration samples. All times
are integers in nanoseconds. On CPU the "kernel" channel is the torch.profiler op stream (an aten
op or a gloo span plays the part of a CUDA kernel); the phase channel uses
``time.perf_counter_ns`` durations (CUDA-event durations on a CUDA host) and ``time.time_ns``
wall-clock starts (comparable across processes on one host).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "KernelEvent",
    "PhaseEvent",
    "StackSnapshot",
    "IterationSample",
    "COMPUTE_PHASES",
    "COLLECTIVE_PHASES",
    "TraceFileError",
]

#: Phases that contain compute only (no collective inside); L2 reads a slowdown there as compute.
COMPUTE_PHASES = frozenset({"forward", "backward", "optimizer", "self_attention", "mlp",
                            "moe_experts", "stage_forward", "stage_backward"})
#: Phases that are a collective (their length includes waiting for the last peer to arrive).
COLLECTIVE_PHASES = frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "broadcast",
                               "pp_send", "pp_recv", "pp_send_grad", "pp_recv_grad",
                               "barrier"})


class TraceFileError(ValueError):
    """A trace file or store is corrupt, truncated or not a trace at all."""


@dataclass(frozen=True, slots=True)
class KernelEvent:
    """One kernel (on CPU: one profiler op) execution.

    Attributes
    ----------
    name : str
        Kernel name, e.g. ``"aten::addmm"`` or ``"gloo:all_reduce"``.
    stream : str
        Execution stream; on CPU ``"compute"`` (the training thread) or ``"comm"`` (gloo's worker
        threads and other threads).
    start_ns, duration_ns : int
        Start (relative to the profiler window) and duration, nanoseconds (duration >= 0).
    rank, step : int
        Producing rank and the training step of the window.
    """

    name: str
    stream: str
    start_ns: int
    duration_ns: int
    rank: int
    step: int


@dataclass(frozen=True, slots=True)
class PhaseEvent:
    """One framework phase (forward, backward, optimizer, a collective, ...) on one rank.

    ``start_ns`` is wall-clock (``time.time_ns``) so that arrival order at a collective can be
    compared across ranks on one host; ``duration_ns`` comes from ``perf_counter_ns``.
    ``group`` is the parallel-group tag used for L2 routing (e.g. ``"dp0"``, ``"ep1"``,
    ``"pp2"``); ``nbytes`` is the payload of a collective (0 for compute phases); ``cpu_ns``
    is the CPU time the training thread spent in the phase (``thread_time_ns``; None where it
    is not measured, as on a device clock).
    """

    phase: str
    rank: int
    step: int
    start_ns: int
    duration_ns: int
    group: str = "dp0"
    nbytes: int = 0
    cpu_ns: int | None = None


@dataclass(frozen=True, slots=True)
class StackSnapshot:
    """A sampled Python call stack of one thread; ``frames`` run outermost first."""

    rank: int
    timestamp_ns: int
    thread_id: int
    frames: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class IterationSample:
    """Duration of one training iteration on one rank (``start_ns`` is wall-clock)."""

    rank: int
    step: int
    start_ns: int
    duration_ns: int
