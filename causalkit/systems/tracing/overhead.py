"""Tracing overhead on step time: untraced and traced steps paired in one process.

A single-process training loop (the data-parallel workload's transformer blocks, no
collectives) runs ``pairs`` pairs of arms per configuration. An arm is ``steps_per_arm`` steps
(one by default): the traced arm runs under a live :class:`Tracer`, the untraced arm runs the
same loop without tracer calls while that tracer is paused (:meth:`Tracer.pause`), and the two
arms of a pair run back to back in a random order. Step times on a shared host drift on a scale
of seconds (on the 2-core host of the study the autocorrelation of successive step times is
0.6 at lag 1 and 0.08 at lag 20), so pairing single adjacent steps cancels most of the drift
that pairing whole blocks leaves in, and keeping one tracer alive keeps the start-up of its
threads and store out of the comparison. Each arm gives two per-step costs:

* ``ms``: wall time (``perf_counter_ns`` around each step);
* ``thread_ms``: CPU time of the training thread (``thread_time_ns``): the in-line cost of the
  channels (timers, record construction, hand-off) plus what the tracer's threads take from it.

The tracer's own threads (processor, stack sampler) run concurrently, on otherwise idle cores
of a GPU host; their CPU time over the traced arms (``pthread_getcpuclockid`` clocks, read after
the processor has written every record) is charged to the traced steps as ``background_ms``,
and its wake-ups during untraced arms are charged there too, so the charge is an upper bound.

:func:`summarize_overhead` reports, per configuration,

* ``wall`` and ``thread_cpu``: ``100 (median_k r_k - 1)`` with ``r_k`` the traced / untraced
  cost in pair ``k``, and a percentile bootstrap 95 % CI (pairs resampled;
  ``scipy.stats.bootstrap``);
* ``background_cpu``: ``100 * background_ms / mean untraced thread_ms``;
* ``total_cpu = thread_cpu + background_cpu``: every CPU cycle the tracer adds, whichever core
  it runs on; it bounds the wall overhead of a host where the tracer's threads would stall the
  training thread for all of their time.

Configurations:

* ``off``: the A/A control, an untraced arm paired with an untraced arm (no tracer); its
  overhead must be 0 within its CI;
* ``always_on``: phase timers + stack sampler + queue + processor + SQLite (the channels ARGUS
  keeps on all the time);
* ``duty_cycled``: always_on plus one profiler step every ``profile_every`` traced steps (the
  kernel channel on CPU, reported separately);
* ``profiler_always``: always_on plus the profiler on every traced step (what an always-on
  torch.profiler costs here).

The processor's work on profiler windows overlaps the next arms, traced or not, so for the two
profiler configurations ``wall`` understates the cost and ``total_cpu`` is the measure to quote.

On a CUDA device (``device="cuda"``) the model and batch live on the GPU, the tracer times the
phases with CUDA events (``Tracer(device="auto")``) and its kernel channel records CUDA kernels,
and each timed step ends with ``torch.cuda.synchronize()`` so that its wall time holds the GPU's
work; the two arms then differ only by what the tracer adds to the step.

References: Zhou et al. (2026), arXiv 2606.20374 (the always-on channels' overhead target);
Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, chapter 13 (percentile
interval).
"""

from __future__ import annotations

import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int, check_random_state

__all__ = ["measure_overhead", "paired_ratios", "summarize_overhead", "channel_costs", "CONFIGS",
           "METRICS"]

CONFIGS = ("off", "always_on", "duty_cycled", "profiler_always")
#: Per-step cost columns of :func:`measure_overhead` compared between the arms of a pair, and
#: their labels.
METRICS = {"ms": "wall", "thread_ms": "thread_cpu"}


class _NoTracer:
    def step(self):
        return nullcontext()

    def phase(self, name):
        return nullcontext()


def _loop(tracer, layers, x, steps: int) -> np.ndarray:
    """(steps, 2) array: per step, wall and training-thread CPU milliseconds (a CUDA batch
    ``x``: each step ends with a device synchronisation)."""
    import torch

    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    out = np.empty((steps, 2))
    for i in range(steps):
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        with tracer.step():
            with tracer.phase("forward"):
                h = x
                for block in layers:
                    with tracer.phase("self_attention"):
                        h = block.attention(h)
                    with tracer.phase("mlp"):
                        h = block.mlp(h)
                loss = h.square().mean()
            with tracer.phase("backward"):
                loss.backward()
            with tracer.phase("optimizer"):
                for p in layers.parameters():
                    p.data.add_(p.grad, alpha=-1e-4)
                    p.grad = None
        sync()
        out[i] = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
    return out / 1e6


def _drain(tracer, timeout_s: float = 120.0) -> None:
    """Wait until the processor has written every record offered so far; raise if it fails or
    does not catch up within ``timeout_s`` (the background CPU would be undercounted)."""
    deadline = time.monotonic() + timeout_s
    while tracer.errors_ == 0:
        offered = sum(tracer.emitted_.values()) - sum(tracer.dropped_.values())
        if sum(tracer.written_.values()) >= offered:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the tracer's processor did not write its records within "
                               f"{timeout_s} s")
        time.sleep(0.005)
    raise RuntimeError(f"the tracer failed during the measurement: {tracer.last_error_!r}")


def _tracer(config: str, store: Path, profile_every: int, device: str):
    from causalkit.systems.tracing.tracer import CHANNELS, Tracer

    clock = "auto" if device == "cuda" else "cpu"   # CUDA events on a GPU
    if config == "off":
        return None
    if config == "always_on":
        return Tracer(store, channels=("phases", "stacks"), device=clock)
    return Tracer(store, channels=CHANNELS, device=clock,
                  profile_every=profile_every if config == "duty_cycled" else 1)


def _thread_cpu_ns(tracer) -> int:
    """CPU time so far of the tracer's processor and sampler threads."""
    return sum(time.clock_gettime_ns(time.pthread_getcpuclockid(t.ident))
               for t in tracer._threads)


def _pairs(config: str, model, x, pairs: int, steps: int, store: Path, profile_every: int,
           rng) -> list[dict]:
    """The ``pairs`` pairs of one configuration, one row per arm."""
    untraced = _NoTracer()
    tracer = _tracer(config, store, profile_every, x.device.type)
    traced = tracer or untraced
    rows, background = [], 0.0
    with tracer or nullcontext():
        _loop(traced, model, x, 3)             # tracer start-up (first window, store), caches
        if tracer is not None:
            _drain(tracer)
            cpu0 = _thread_cpu_ns(tracer)
        for k in range(pairs):
            arms = ("untraced", "traced") if rng.random() < 0.5 else ("traced", "untraced")
            for arm in arms:
                if tracer is not None and arm == "traced":
                    tracer.resume()
                elif tracer is not None:
                    tracer.pause()
                times = _loop(traced if arm == "traced" else untraced, model, x, steps)
                rows.append({"config": config, "pair": k, "arm": arm, "steps": steps,
                             "ms": times[:, 0].mean(), "thread_ms": times[:, 1].mean()})
        if tracer is not None:
            _drain(tracer)
            background = (_thread_cpu_ns(tracer) - cpu0) / 1e6 / (pairs * steps)
    for row in rows:
        row["background_ms"] = background if row["arm"] == "traced" else 0.0
    return rows


def measure_overhead(pairs: int = 800, steps_per_arm: int = 1, profile_every: int = 10,
                     layers: int = 4, d_model: int = 64, hidden: int = 256, batch: int = 16,
                     seq: int = 32, configs=CONFIGS, seed=0, device: str = "cpu") -> pd.DataFrame:
    """Per-arm costs of paired untraced / traced steps (see the module docstring).

    Parameters
    ----------
    pairs : int
        Pairs per configuration.
    steps_per_arm : int
        Timed steps per arm.
    profile_every : int
        Duty cycle of ``duty_cycled`` (one profiled step per ``profile_every`` traced steps).
    layers, d_model, hidden, batch, seq : int
        Workload size (transformer blocks of the data-parallel workload, one thread).
    configs : sequence of str
        Subset of :data:`CONFIGS` (``off`` is the A/A control); each runs its pairs under one
        tracer, the configurations in a random order.
    seed : int or Generator
        Order of the configurations and of the arms within each pair.
    device : {"cpu", "cuda"}
        Where the workload runs (``"cuda"``: see the module docstring).

    Returns
    -------
    DataFrame
        One row per arm: ``config``, ``pair``, ``arm`` (``traced``/``untraced``), ``steps``,
        mean per-step ``ms`` (wall) and ``thread_ms`` (training-thread CPU), and
        ``background_ms`` (the tracer threads' CPU time per traced step, 0 on untraced arms).
        Use :func:`summarize_overhead`.
    """
    import torch

    from causalkit.systems.tracing.workload import _build

    pairs = check_positive_int(pairs, "pairs")
    steps_per_arm = check_positive_int(steps_per_arm, "steps_per_arm")
    profile_every = check_positive_int(profile_every, "profile_every")
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown or not configs:
        raise ValueError(f"configs: unknown {unknown}; choose one or more of {CONFIGS}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda'; got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but CUDA is not available")
    torch.set_num_threads(1)
    rng = check_random_state(seed)
    model = _build({"seed": 0, "d_model": d_model, "hidden": hidden,
                    "layers": layers}).to(device)
    x = torch.randn(batch, seq, d_model, device=device)
    rows = []
    with tempfile.TemporaryDirectory(prefix="argus-overhead-") as tmp:
        _loop(_NoTracer(), model, x, 10)                      # warm-up
        for config in rng.permutation([c for c in CONFIGS if c in set(configs)]):
            rows += _pairs(str(config), model, x, pairs, steps_per_arm, Path(tmp) / config,
                           profile_every, rng)
    return pd.DataFrame(rows)


def paired_ratios(arms: pd.DataFrame, metric: str = "ms") -> pd.DataFrame:
    """pair x configuration: per-step cost of the traced arm / of the untraced arm."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}; got {metric!r}")
    wide = arms.pivot_table(index="pair", columns=["config", "arm"], values=metric)
    configs = [c for c in CONFIGS if c in set(arms["config"])]
    return pd.DataFrame({c: wide[(c, "traced")] / wide[(c, "untraced")] for c in configs})


def summarize_overhead(arms: pd.DataFrame, confidence_level: float = 0.95,
                       n_resamples: int = 4999, seed=0) -> pd.DataFrame:
    """Per configuration: median paired overheads with bootstrap CIs, and the CPU of the
    tracer's threads (formulas in the module docstring).

    Returns
    -------
    DataFrame indexed by configuration, columns: ``pairs``; ``mean_ms`` and
    ``mean_thread_ms`` of the untraced and ``traced_ms`` of the traced arms; per metric label
    (``wall``, ``thread_cpu``) ``<label>_pct``, ``<label>_ci_lo``, ``<label>_ci_hi``;
    ``background_cpu_pct``; ``total_cpu_pct`` with ``total_cpu_ci_lo``/``_hi`` (the
    thread-CPU interval shifted by the background share, which is measured, not sampled).
    """
    from scipy.stats import bootstrap

    rng = check_random_state(seed)
    present = [c for c in CONFIGS if c in set(arms["config"])]
    out = pd.DataFrame(index=pd.Index(present, name="config"))
    by_arm = arms.groupby(["config", "arm"])
    out["pairs"] = arms.groupby("config")["pair"].nunique()
    out["mean_ms"] = by_arm["ms"].mean().xs("untraced", level="arm")
    out["mean_thread_ms"] = by_arm["thread_ms"].mean().xs("untraced", level="arm")
    out["traced_ms"] = by_arm["ms"].mean().xs("traced", level="arm")
    for metric, label in METRICS.items():
        ratios = paired_ratios(arms, metric)
        for config in present:
            r = ratios[config].dropna().to_numpy()
            point = float(np.median(r))
            if r.size >= 2 and np.ptp(r) > 0:
                ci = bootstrap((r,), np.median, confidence_level=confidence_level,
                               n_resamples=n_resamples, method="percentile",
                               random_state=rng).confidence_interval
                lo, hi = float(ci.low), float(ci.high)
            else:
                lo = hi = point
            out.loc[config, [f"{label}_pct", f"{label}_ci_lo", f"{label}_ci_hi"]] = \
                [100 * (point - 1), 100 * (lo - 1), 100 * (hi - 1)]
    background = by_arm["background_ms"].mean().xs("traced", level="arm")
    out["background_cpu_pct"] = 100 * background / out["mean_thread_ms"]
    for part in ("pct", "ci_lo", "ci_hi"):
        out[f"total_cpu_{part}"] = out[f"thread_cpu_{part}"] + out["background_cpu_pct"]
    return out


def channel_costs(n: int = 20000) -> dict:
    """CPU cost of the always-on channels, measured in isolation (process CPU time, so the
    processor thread counts): ``record_us`` per phase record (timer, enqueue, dequeue, batch,
    SQLite insert), ``inline_us`` the part of it on the training thread (thread CPU time) and
    ``stack_us`` per stack snapshot, in microseconds."""
    from causalkit.systems.tracing.tracer import Tracer

    n = check_positive_int(n, "n")
    with tempfile.TemporaryDirectory(prefix="argus-cost-") as tmp:
        tr = Tracer(Path(tmp) / "s", channels=("phases",), queue_size=n + 10,
                    flush_interval_s=0.05, device="cpu")
        with tr:
            with tr.step():
                c0, t0 = time.process_time_ns(), time.thread_time_ns()
                for _ in range(n):
                    with tr.phase("mlp"):
                        pass
                inline = time.thread_time_ns() - t0
            while tr.written_["phases"] < n and tr.errors_ == 0:
                time.sleep(0.01)
            total = time.process_time_ns() - c0
            c1 = time.process_time_ns()
            for _ in range(n // 10):
                tr._snapshot()
            stacks = time.process_time_ns() - c1
    return {"record_us": total / n / 1e3, "inline_us": inline / n / 1e3,
            "stack_us": stacks / (n // 10) / 1e3}
