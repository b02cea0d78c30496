"""The per-rank trace producer: three channels -> bounded queue -> processor thread -> store.

Channels (each can be switched off without affecting the others):

* ``"phases"`` (framework semantics, always on): timers around :meth:`Tracer.phase` blocks
  and :meth:`Tracer.collective` calls, plus one :class:`IterationSample` per
  :meth:`Tracer.step`: ``perf_counter_ns`` on the CPU, CUDA events on the compute and
  communication streams on a CUDA host (:mod:`causalkit.systems.tracing.device`; the processor
  thread resolves their durations). A collective's start is also taken on the
  wall clock (``time.time_ns``) so the processor and diagnosis can see who arrived last. On the
  CPU each phase also records the training thread's CPU time (``thread_time_ns``), so the
  diagnosis can tell a phase that did more work from one whose thread was not scheduled.
* ``"stacks"`` (CPU call stacks, always on): a daemon thread samples the training thread's
  Python stack every ``stack_interval_s`` from ``sys._current_frames()`` (the in-process
  stand-in for py-spy).
* ``"kernels"`` (duty-cycled): a ``torch.profiler`` window over ``profile_steps`` steps every
  ``profile_every`` steps. On CPU an aten op (or a gloo span) is the "kernel"; on a CUDA host
  the window adds CUDA kernel activity. CUPTI's ~1-2 %
  always-on cost is not reproducible on CPU, where an always-on profiler costs far more, hence
  the duty cycle; its cost is reported separately from the always-on channels.

Producers never block. The training thread appends each phase record, as a plain row tuple in
the store's column order (the fields of :class:`PhaseEvent` / :class:`IterationSample`), to a
per-tracer buffer, and hands the buffer over once per step (or every ``batch_size`` records)
by appending it to a deque. Nothing wakes the processor thread: it wakes by itself every
``flush_interval_s``, takes everything queued and commits it, so the training thread never pays
for a lock hand-off or a GIL switch to another thread (a blocking ``queue.Queue`` would
notify the processor on every put). At most ``queue_size`` records wait in the queue; a batch
that does not fit is dropped (and its records counted per channel), so memory stays bounded
when the processor falls behind. The processor thread writes batches into the rank's SQLite
file, compresses each profiler window (:func:`compress`) and optionally writes the raw window
as gzip Chrome-trace JSON. Internal failures are counted in ``errors_`` and reported as a
warning; they never propagate into the training loop.

Reference: Zhou et al. (2026), arXiv 2606.20374, section 4 (producer design: decoupled
enqueue-only callbacks, fixed-size buffers, bounded queues with explicit drop on backpressure).
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections import Counter, deque
from contextlib import nullcontext
from pathlib import Path

from causalkit._validation import check_positive_int
from causalkit.exceptions import CausalkitWarning
from causalkit.systems.tracing.device import Pending, device_clock, profiler_activities
from causalkit.systems.tracing.store import TraceStore

__all__ = ["Tracer", "route_group", "CHANNELS"]

CHANNELS = ("phases", "stacks", "kernels")
#: Parallel dimension whose group a phase is compared within (L2 routing); default "dp".
_ROUTING = {"moe_experts": "ep", "alltoall": "ep", "pp_send": "pp", "pp_recv": "pp",
            "pp_send_grad": "pp", "pp_recv_grad": "pp"}
_MAX_FRAMES = 48


def route_group(phase: str, groups: dict[str, str]) -> str:
    """The group tag a phase is compared within: ``groups[dimension of phase]``."""
    return groups.get(_ROUTING.get(phase, "dp"), groups.get("dp", "dp0"))


class _StepTimer:
    """Context manager of one :meth:`Tracer.step` (a class: cheaper than a generator)."""

    __slots__ = ("tracer", "step", "wall", "t0")

    def __init__(self, tracer: Tracer):
        self.tracer = tracer

    def __enter__(self) -> int:
        tr = self.tracer
        tr._step += 1
        self.step = step = tr._step
        if tr._window is None and tr._profiling and tr._recording and tr._active \
                and step % tr.profile_every == 0:
            tr._begin_window(step)
        self.wall, self.t0 = time.time_ns(), time.perf_counter_ns()
        return step

    def __exit__(self, *exc) -> bool:
        return self._finish(time.perf_counter_ns() - self.t0)

    def _finish(self, duration) -> bool:
        tr = self.tracer
        if tr._phases_on:
            tr._iteration_rows.append((tr.rank, self.step, self.wall, duration))
            tr._buffered += 1
            tr._hand_over()
        window = tr._window
        if window is not None and self.step - window.step + 1 >= tr.profile_steps:
            tr._end_window()
        return False


class _PhaseTimer:
    """Context manager of one :meth:`Tracer.phase`: one phase row in the step's buffer."""

    __slots__ = ("tracer", "name", "group", "nbytes", "wall", "t0", "c0")

    def __init__(self, tracer: Tracer, name: str, group: str | None, nbytes: int):
        self.tracer, self.name, self.group, self.nbytes = tracer, name, group, nbytes

    def __enter__(self) -> None:
        self.wall, self.t0, self.c0 = time.time_ns(), time.perf_counter_ns(), \
            time.thread_time_ns()

    def __exit__(self, *exc) -> bool:
        t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        return self._finish(t1 - self.t0, c1 - self.c0)

    def _finish(self, duration, cpu_ns: int | None = None) -> bool:
        tr, name, group = self.tracer, self.name, self.group
        if group is None:
            group = tr._group_of.get(name)
            if group is None:
                group = tr._group_of[name] = route_group(name, tr.groups)
        tr._phase_rows.append((tr.rank, tr._step, name, group, self.wall, duration,
                               int(self.nbytes), cpu_ns))
        tr._buffered += 1
        if tr._buffered >= tr.batch_size:
            tr._hand_over()
        return False


class _DeviceStepTimer(_StepTimer):
    """:class:`_StepTimer` timed by the tracer's device clock (duration resolved later)."""

    __slots__ = ()

    def __enter__(self) -> int:
        step = super().__enter__()
        self.t0 = self.tracer._clock.mark()
        return step

    def __exit__(self, *exc) -> bool:
        clock = self.tracer._clock
        return self._finish(Pending(clock, self.t0, clock.mark()))


class _DevicePhaseTimer(_PhaseTimer):
    """:class:`_PhaseTimer` timed by the tracer's device clock (duration resolved later)."""

    __slots__ = ()

    def __enter__(self) -> None:
        self.wall, self.t0 = time.time_ns(), self.tracer._clock.mark()

    def __exit__(self, *exc) -> bool:
        clock = self.tracer._clock
        return self._finish(Pending(clock, self.t0, clock.mark()))


_UNTIMED = nullcontext()
#: Position of the duration in a row of each buffered table.
_DURATION_AT = {"iterations": 3, "phases": 5}


def _resolved(rows: list, at: int) -> list:
    """Rows with each deferred device duration (:class:`Pending`) replaced by its value."""
    return [r[:at] + (r[at].resolve(),) + r[at + 1:] if isinstance(r[at], Pending) else r
            for r in rows]


class _Window:
    """A finished profiler window handed to the processor."""

    __slots__ = ("profiler", "step", "window_id", "main_tid")

    def __init__(self, profiler, step, window_id, main_tid):
        self.profiler, self.step = profiler, step
        self.window_id, self.main_tid = window_id, main_tid


class Tracer:
    """Always-on tracing of one rank of a training job.

    Parameters
    ----------
    store : str, Path or TraceStore
        Trace-store directory; this rank writes ``rank<rank>.sqlite`` there.
    rank, world_size : int
        This process's rank and the job size (``0 <= rank < world_size``).
    groups : dict, optional
        Parallel-group tags of this rank, e.g. ``{"dp": "dp0", "ep": "ep1"}``; phases are
        routed to them for the within-group comparison of diagnosis level 2.
    channels : sequence of str
        Subset of ``("phases", "stacks", "kernels")``.
    stack_interval_s : float
        Stack sampling period.
    profile_every, profile_steps : int
        Kernel channel duty cycle: profile ``profile_steps`` steps out of every
        ``profile_every`` (``profile_steps / profile_every`` of steps carry profiler cost).
    queue_size : int
        Most records waiting for the processor; a batch that would exceed it is dropped and
        its records counted.
    batch_size : int
        Most phase records buffered on the training thread before a hand-off (one hand-off
        per step otherwise); capped at ``queue_size``.
    raw_trace_dir : str or Path, optional
        If given, each profiler window is also written there as gzip Chrome-trace JSON.
    flush_interval_s : float
        How often the processor wakes, takes everything queued and commits it.
    job_id : str
        Stored in the metadata.
    compress_options : dict, optional
        Keyword arguments of :func:`cluster_durations`.
    device : {"auto", "cpu", "cuda"} or clock
        How phases are timed and what the kernel channel profiles
        (:func:`~causalkit.systems.tracing.device_clock`): ``"auto"`` uses CUDA events
        on the compute and communication streams and CUDA kernel activity when
        ``torch.cuda.is_available()``, ``perf_counter_ns`` and CPU ops otherwise.

    Attributes
    ----------
    emitted_, dropped_ : collections.Counter
        Records offered / dropped, per channel.
    written_ : collections.Counter
        Rows written by the processor, per table.
    errors_ : int
        Internal failures (caught, never raised into the training loop).

    Examples
    --------
    >>> with Tracer("traces", rank=0, world_size=1) as tr:     # doctest: +SKIP
    ...     for _ in range(100):
    ...         with tr.step():
    ...             with tr.phase("forward"):
    ...                 loss = model(x).sum()
    """

    def __init__(self, store, *, rank: int = 0, world_size: int = 1, groups=None,
                 channels=CHANNELS, stack_interval_s: float = 0.05, profile_every: int = 10,
                 profile_steps: int = 1, queue_size: int = 8192, batch_size: int = 256,
                 raw_trace_dir=None,
                 flush_interval_s: float = 0.25, job_id: str = "job", compress_options=None,
                 device="auto"):
        self.store = store if isinstance(store, TraceStore) else TraceStore(store)
        self.world_size = check_positive_int(world_size, "world_size")
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be an int in [0, world_size={self.world_size}); "
                             f"got {rank!r}")
        self.rank = rank
        self.groups = dict(groups or {"dp": "dp0"})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.groups.items()):
            raise TypeError("groups must map dimension names to group tags (str -> str)")
        channels = tuple(channels)
        unknown = sorted(set(channels) - set(CHANNELS))
        if unknown:
            raise ValueError(f"channels: unknown {unknown}; choose from {CHANNELS}")
        self.channels = channels
        if not stack_interval_s > 0:
            raise ValueError(f"stack_interval_s must be > 0; got {stack_interval_s!r}")
        self.stack_interval_s = float(stack_interval_s)
        self.profile_every = check_positive_int(profile_every, "profile_every")
        self.profile_steps = check_positive_int(profile_steps, "profile_steps")
        if self.profile_steps > self.profile_every:
            raise ValueError("profile_steps must not exceed profile_every")
        self.queue_size = check_positive_int(queue_size, "queue_size")
        self.batch_size = min(check_positive_int(batch_size, "batch_size"), self.queue_size)
        self.raw_trace_dir = None if raw_trace_dir is None else Path(raw_trace_dir)
        self.flush_interval_s = float(flush_interval_s)
        self.job_id = str(job_id)
        self.compress_options = dict(compress_options or {})
        self._clock = device_clock(device)
        self.device = self._clock.name
        self.emitted_: Counter = Counter()
        self.dropped_: Counter = Counter()
        self.written_: Counter = Counter()
        self.errors_ = 0
        self.last_error_ = None
        self._queue: deque = deque()     # bounded in records by _pending
        self._pending = 0
        self._pending_lock = threading.Lock()
        self._iteration_rows: list[tuple] = []
        self._phase_rows: list[tuple] = []
        self._buffered = 0
        self._phases_on = "phases" in channels
        self._recording = True              # False while paused
        self._profiling = "kernels" in channels
        self._group_of: dict[str, str] = {}
        self._frame_labels: dict = {}       # code object -> "dir/file.py:function"
        self._step = -1
        self._window = None
        self._window_id = 0
        self._stop = threading.Event()      # stops the stack sampler
        self._done = threading.Event()      # stops the processor after a last drain
        self._threads: list[threading.Thread] = []
        self._main_tid = None
        self._active = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Tracer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> Tracer:
        """Start the processor (and stack sampler) threads."""
        if self._active:
            return self
        self._main_tid = threading.get_ident()
        if "kernels" in self.channels:
            self._warm_profiler()
        self._stop.clear()
        self._done.clear()
        self._threads = [threading.Thread(target=self._process, name="trace-processor",
                                          daemon=True)]
        if "stacks" in self.channels:
            self._threads.append(threading.Thread(target=self._sample_stacks,
                                                  name="trace-stacks", daemon=True))
        for t in self._threads:
            t.start()
        self._active = True
        return self

    def close(self, timeout: float = 60.0) -> None:
        """Flush everything, write the counters, stop the threads."""
        if not self._active:
            return
        self._active = False
        self._end_window()
        self._hand_over()
        self._stop.set()
        for t in self._threads[1:]:          # the sampler first: nothing is queued after it
            t.join(timeout)
        self._done.set()
        for t in self._threads:
            t.join(timeout)
        if any(t.is_alive() for t in self._threads):
            self._error(RuntimeError("trace threads did not stop within the timeout"))
        if self.errors_:
            warnings.warn(f"tracer rank {self.rank}: {self.errors_} internal errors (last: "
                          f"{self.last_error_!r}); the traced run was not affected",
                          CausalkitWarning, stacklevel=2)

    def pause(self) -> None:
        """Stop recording without stopping the tracer: the phase timers become no-ops, the
        stack sampler skips its samples (it keeps its schedule) and no profiler window opens;
        an open window is closed and queued. Steps keep being counted, so step indices stay
        those of the training loop. Records already queued are still written."""
        self._recording = False
        self._phases_on = False
        self._end_window()
        self._hand_over()

    def resume(self) -> None:
        """Record again after :meth:`pause`."""
        self._recording = True
        self._phases_on = "phases" in self.channels

    @property
    def counters(self) -> dict:
        """Producer and processor counters (also stored in the rank's metadata)."""
        return {"emitted": dict(self.emitted_), "dropped": dict(self.dropped_),
                "written": dict(self.written_), "errors": self.errors_,
                "queue_size": self.queue_size}

    # ------------------------------------------------------------------ producer side
    def _error(self, exc: BaseException) -> None:
        self.errors_ += 1
        self.last_error_ = exc

    def _offer(self, channel: str, item, n: int = 1) -> None:
        """Queue ``item`` (holding ``n`` records of ``channel``) unless the records waiting
        would exceed ``queue_size``; then drop and count it."""
        self.emitted_[channel] += n
        with self._pending_lock:
            fits = self._pending + n <= self.queue_size
            if fits:
                self._pending += n
        if fits:
            self._queue.append((n, item))
        else:
            self.dropped_[channel] += n

    def _hand_over(self) -> None:
        """Pass the training thread's buffered phase records to the processor as one batch."""
        if self._buffered:
            rows = {"iterations": self._iteration_rows, "phases": self._phase_rows}
            n = self._buffered
            self._iteration_rows, self._phase_rows, self._buffered = [], [], 0
            self._offer("phases", rows, n)

    def step(self) -> _StepTimer:
        """Time one training iteration (and open/close profiler windows on the duty cycle);
        ``with tracer.step() as i`` gives the step index."""
        return _DeviceStepTimer(self) if self._clock.deferred else _StepTimer(self)

    def phase(self, name: str, group: str | None = None, nbytes: int = 0):
        """Time a framework phase (forward, backward, optimizer, mlp, ...) of the current step."""
        if not self._phases_on:
            return _UNTIMED
        if self._clock.deferred:
            return _DevicePhaseTimer(self, name, group, nbytes)
        return _PhaseTimer(self, name, group, nbytes)

    def collective(self, name: str, fn, *args, group: str | None = None, nbytes: int = 0,
                   **kwargs):
        """Run and time a collective ``fn(*args, **kwargs)`` as phase ``name``.

        If ``fn`` returns a work handle (``async_op=True``), it is waited on inside the timer, so
        the phase spans arrival to completion (the time gloo's worker thread takes, including the
        wait for the last peer). The call also appears in profiler windows as
        ``collective:<name>``. With CUDA it is issued and timed on the clock's communication
        stream (:meth:`CudaClock.comm <causalkit.systems.tracing.CudaClock.comm>`).
        """
        import torch

        with self._clock.comm(), self.phase(name, group=group, nbytes=nbytes), \
                torch.profiler.record_function(f"collective:{name}"):
            result = fn(*args, **kwargs)
            if hasattr(result, "wait") and callable(result.wait):
                result.wait()
        return result

    # ------------------------------------------------------------------ kernel channel
    def _warm_profiler(self) -> None:
        """Open and close one empty profiler session: the first one in a process initialises
        the profiling backend (about 1-2 s), which must not land inside a traced step."""
        try:
            from torch.profiler import profile

            with profile(activities=profiler_activities(self._clock)):
                pass
        except Exception as exc:  # noqa: BLE001
            self._error(exc)

    def _begin_window(self, step: int) -> None:
        try:
            from torch.profiler import profile

            prof = profile(activities=profiler_activities(self._clock))
            prof.__enter__()
            self._window = _Window(prof, step, self._window_id, threading.get_ident())
            self._window_id += 1
        except Exception as exc:  # noqa: BLE001 - tracing must never break training
            self._error(exc)
            self._window = None

    def _end_window(self) -> None:
        window, self._window = self._window, None
        if window is None:
            return
        try:
            window.profiler.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001
            self._error(exc)
            return
        self._offer("kernels", window)

    # ------------------------------------------------------------------ stack channel
    def _sample_stacks(self) -> None:
        # time.sleep, not Event.wait: a timed Event.wait costs about twice the CPU per wake-up
        # (a new lock and a Condition round trip each time); close() waits one interval at most
        while True:
            time.sleep(self.stack_interval_s)
            if self._stop.is_set():
                return
            if not self._recording:
                continue
            try:
                self._offer("stacks", {"stacks": [self._snapshot()]})
            except Exception as exc:  # noqa: BLE001
                self._error(exc)

    def _snapshot(self) -> tuple:
        """Stack-table row (rank, timestamp_ns, thread_id, frames) of the training thread's
        current Python stack (frames ``;``-joined, outermost first; a :class:`StackSnapshot`)."""
        main = self._main_tid if self._main_tid is not None else threading.get_ident()
        frame = sys._current_frames().get(main)
        labels, frames = self._frame_labels, []
        while frame is not None and len(frames) < _MAX_FRAMES:
            code = frame.f_code
            label = labels.get(code)
            if label is None:
                parts = code.co_filename.replace("\\", "/").rsplit("/", 3)
                label = labels[code] = f"{'/'.join(parts[-3:])}:{code.co_name}"
            frames.append(label)
            frame = frame.f_back
        del frame
        return (self.rank, time.time_ns(), main, ";".join(reversed(frames)))

    # ------------------------------------------------------------------ processor side
    def _process(self) -> None:
        writer = None
        try:
            writer = self.store.writer(self.rank)
            writer.set_meta({"job_id": self.job_id, "rank": self.rank,
                             "world_size": self.world_size, "groups": self.groups,
                             "channels": list(self.channels),
                             "profile_every": self.profile_every, "device": self.device,
                             "profile_steps": self.profile_steps})
        except Exception as exc:  # noqa: BLE001
            self._error(exc)
        batch: dict[str, list] = {"iterations": [], "phases": [], "stacks": []}
        done = False
        while not done:
            done = self._done.wait(self.flush_interval_s)
            while self._queue:
                n, payload = self._queue.popleft()
                with self._pending_lock:
                    self._pending -= n
                if isinstance(payload, _Window):
                    self._flush(writer, batch)
                    self._write_window(writer, payload)
                else:
                    for table, rows in payload.items():
                        batch[table].extend(rows)
            self._flush(writer, batch)
        try:
            if writer is not None:
                writer.set_meta({"counters": self.counters})
                writer.close()
        except Exception as exc:  # noqa: BLE001
            self._error(exc)

    def _flush(self, writer, batch: dict[str, list]) -> None:
        for table, rows in batch.items():
            if not rows:
                continue
            try:
                if writer is None:
                    raise RuntimeError("trace store writer unavailable")
                if self._clock.deferred and table in _DURATION_AT:
                    rows[:] = _resolved(rows, _DURATION_AT[table])
                writer.write(table, rows)
                self.written_[table] += len(rows)
            except Exception as exc:  # noqa: BLE001
                self._error(exc)
            rows.clear()

    def _write_window(self, writer, window: _Window) -> None:
        from causalkit.systems.tracing.compression import compress
        from causalkit.systems.tracing.profiling import profiler_events
        from causalkit.systems.tracing.tracefile import write_trace

        try:
            frame = profiler_events(window.profiler, rank=self.rank, step=window.step)
            if frame.empty:
                return
            summary = compress(frame, window_id=window.window_id, **self.compress_options)
            if writer is None:
                raise RuntimeError("trace store writer unavailable")
            writer.write("windows", [(self.rank, window.window_id, window.step, len(frame),
                                      summary.raw_bytes, summary.summary_bytes,
                                      summary.to_bytes())])
            self.written_["windows"] += 1
            if self.raw_trace_dir is not None:
                write_trace(self.raw_trace_dir / f"rank{self.rank}_window{window.window_id}"
                            f".json.gz", frame, {"rank": self.rank, "step": window.step,
                                                 "job_id": self.job_id})
        except Exception as exc:  # noqa: BLE001
            self._error(exc)
