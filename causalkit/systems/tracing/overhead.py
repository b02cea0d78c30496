"""Tracing overhead on step time: paired blocks of untraced and traced steps in one process.

A single-process training loop (the data-parallel workload's transformer blocks, no
collectives) runs in rounds. In every round each traced configuration is paired with an
untraced (``off``) block: the two blocks of ``block_steps`` steps run back to back, in a random
order, so that drift in the host's load hits both members of a pair alike. Each block gives
three per-step costs, taken outside the tracer:

* ``ms``: wall time (``perf_counter_ns`` around each step);
* ``thread_ms``: CPU time of the training thread (``thread_time_ns``): the in-line cost of the
  channels (timers, record construction, enqueue), insensitive to time lost to other processes;
* ``cpu_ms``: CPU time of the whole process (``process_time_ns``) until the processor has
  written the block's records, so the tracer's processor and stack-sampler threads count too
  (on a GPU host they run on otherwise idle cores).

In one pair the overhead of a configuration is the ratio of its block's mean per-step cost to
that of the paired off block; :func:`summarize_overhead` reports the median of these paired
ratios over rounds with a percentile bootstrap 95 % confidence interval (rounds resampled;
``scipy.stats.bootstrap``).

Configurations:

* ``off``: no tracer;
* ``always_on``: phase timers + stack sampler + queue + processor + SQLite (the channels ARGUS
  keeps on all the time);
* ``duty_cycled``: always_on plus one profiler step every ``profile_every`` steps (the kernel
  channel on CPU, reported separately);
* ``profiler_always``: always_on plus the profiler on every step (what an always-on
  torch.profiler costs here).

References: Zhou et al. (2026), arXiv 2606.20374 (the always-on channels' overhead target);
Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, chapter 13 (percentile
interval).
"""

from __future__ import annotations

import tempfile
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int, check_random_state

__all__ = ["measure_overhead", "paired_ratios", "summarize_overhead", "channel_costs", "CONFIGS",
           "METRICS"]

CONFIGS = ("off", "always_on", "duty_cycled", "profiler_always")
#: Per-step cost columns of :func:`measure_overhead` and their labels.
METRICS = {"ms": "wall", "thread_ms": "thread_cpu", "cpu_ms": "process_cpu"}


class _NoTracer:
    def step(self):
        return nullcontext()

    def phase(self, name):
        return nullcontext()


def _loop(tracer, layers, x, steps: int) -> np.ndarray:
    """(steps, 2) array: per step, wall and training-thread CPU milliseconds."""
    import time

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
        out[i] = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
    return out / 1e6


def _drain(tracer, timeout_s: float = 10.0) -> None:
    """Wait until the processor has written every record offered so far (or the timeout)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and tracer.errors_ == 0:
        offered = sum(tracer.emitted_.values()) - sum(tracer.dropped_.values())
        if tracer.written_["iterations"] + tracer.written_["phases"] + \
                tracer.written_["stacks"] + tracer.written_["windows"] >= offered:
            return
        time.sleep(0.005)


def _block(config: str, model, x, steps: int, store: Path, profile_every: int) -> dict:
    """One block: 3 untimed steps (tracer start-up), then ``steps`` timed ones.

    The process CPU time of a traced block runs until the processor has written the block's
    records, so that work left in the queue when the timed steps end is charged to the block
    (records of the untimed steps are written before the block starts).
    """
    import time

    from causalkit.systems.tracing.tracer import CHANNELS, Tracer

    if config == "off":
        _loop(_NoTracer(), model, x, 3)
        p0 = time.process_time_ns()
        times = _loop(_NoTracer(), model, x, steps)
        cpu = (time.process_time_ns() - p0) / 1e6
    else:
        if config == "always_on":
            tracer = Tracer(store, channels=("phases", "stacks"))
        else:
            tracer = Tracer(store, channels=CHANNELS,
                            profile_every=profile_every if config == "duty_cycled" else 1)
        with tracer as tr:
            _loop(tr, model, x, 3)
            _drain(tr)
            p0 = time.process_time_ns()
            times = _loop(tr, model, x, steps)
            _drain(tr)
            cpu = (time.process_time_ns() - p0) / 1e6
    return {"steps": steps, "ms": times[:, 0].mean(), "median_ms": float(np.median(times[:, 0])),
            "thread_ms": times[:, 1].mean(), "cpu_ms": cpu / steps}


def measure_overhead(rounds: int = 40, block_steps: int = 20, profile_every: int = 10,
                     layers: int = 4, d_model: int = 64, hidden: int = 256, batch: int = 16,
                     seq: int = 32, configs=CONFIGS, seed=0) -> pd.DataFrame:
    """Per-block costs of paired untraced / traced blocks.

    Parameters
    ----------
    rounds : int
        Rounds; each holds one (off, config) pair per traced configuration, the order of the
        pairs and of the two blocks within a pair shuffled.
    block_steps : int
        Timed steps per block.
    profile_every : int
        Duty cycle of ``duty_cycled`` (one profiled step per ``profile_every``).
    layers, d_model, hidden, batch, seq : int
        Workload size (transformer blocks of the data-parallel workload, one thread).
    configs : sequence of str
        Subset of :data:`CONFIGS`; ``off`` is always measured (it is every pair's reference).
    seed : int or Generator
        Order of pairs and blocks.

    Returns
    -------
    DataFrame
        One row per block: ``config``, ``round``, ``pair`` (the traced configuration of the
        pair), ``steps``, mean per-step ``ms`` (wall), ``median_ms`` (wall), ``thread_ms``
        (training-thread CPU) and ``cpu_ms`` (process CPU, the processor's writing of the
        block's records included). Use :func:`summarize_overhead`.
    """
    import torch

    from causalkit.systems.tracing.workload import _build

    rounds = check_positive_int(rounds, "rounds")
    block_steps = check_positive_int(block_steps, "block_steps")
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        raise ValueError(f"configs: unknown {unknown}; choose from {CONFIGS}")
    traced = [c for c in CONFIGS if c in set(configs) and c != "off"]
    if not traced:
        raise ValueError("configs must include at least one traced configuration")
    torch.set_num_threads(1)
    rng = check_random_state(seed)
    model = _build({"seed": 0, "d_model": d_model, "hidden": hidden, "layers": layers})
    x = torch.randn(batch, seq, d_model)
    rows = []
    with tempfile.TemporaryDirectory(prefix="argus-overhead-") as tmp:
        _loop(_NoTracer(), model, x, 10)                      # warm-up
        for r in range(rounds):
            for pair in rng.permutation(traced):
                order = ["off", pair] if rng.random() < 0.5 else [pair, "off"]
                for config in order:
                    block = _block(config, model, x, block_steps,
                                   Path(tmp) / f"{pair}-{r}-{config}", profile_every)
                    rows.append({"config": config, "round": r, "pair": str(pair), **block})
    return pd.DataFrame(rows)


def paired_ratios(blocks: pd.DataFrame, metric: str = "ms") -> pd.DataFrame:
    """round x traced configuration: per-step cost of the traced block / of its off block."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}; got {metric!r}")
    wide = blocks.pivot_table(index=["pair", "round"], columns="config", values=metric)
    ratios = {}
    for pair, sub in wide.groupby(level="pair"):
        sub = sub.droplevel("pair")
        ratios[pair] = sub[pair] / sub["off"]
    return pd.DataFrame(ratios)


def summarize_overhead(blocks: pd.DataFrame, confidence_level: float = 0.95,
                       n_resamples: int = 4999, seed=0) -> pd.DataFrame:
    """Per traced configuration and metric: the median paired overhead with a bootstrap CI.

    For round ``k`` the paired ratio is ``r_k = c_k(traced) / c_k(off)``, with ``c`` the mean
    per-step cost of a block (so intermittent costs such as profiled steps, stack samples and
    processor flushes count at their amortised rate). The overhead is ``100 (median_k r_k - 1)``
    percent, with a percentile bootstrap interval for the median over rounds
    (``scipy.stats.bootstrap``, rounds resampled with replacement).

    Returns
    -------
    DataFrame indexed by configuration (``off`` first, overhead 0), columns: ``rounds``, the
    median over blocks of ``ms``, ``thread_ms`` and ``cpu_ms`` (as ``mean_ms``,
    ``mean_thread_ms``, ``mean_cpu_ms``: per-step means of a block), and per metric label
    (``wall``, ``thread_cpu``, ``process_cpu``) ``<label>_pct``, ``<label>_ci_lo``,
    ``<label>_ci_hi``.
    """
    from scipy.stats import bootstrap

    rng = check_random_state(seed)
    present = [c for c in CONFIGS if c in set(blocks["config"])]
    out = pd.DataFrame(index=pd.Index(present, name="config"))
    out["rounds"] = [blocks.loc[blocks["config"] == c, "round"].nunique() for c in present]
    for metric in METRICS:
        out[f"mean_{metric}"] = blocks.groupby("config")[metric].median()
    for metric, label in METRICS.items():
        ratios = paired_ratios(blocks, metric)
        cols = [f"{label}_pct", f"{label}_ci_lo", f"{label}_ci_hi"]
        for col in cols:
            out[col] = 0.0 if "off" in present else np.nan
        for config in ratios.columns:
            r = ratios[config].dropna().to_numpy()
            point = float(np.median(r))
            if r.size >= 2 and np.ptp(r) > 0:
                ci = bootstrap((r,), np.median, confidence_level=confidence_level,
                               n_resamples=n_resamples, method="percentile",
                               random_state=rng).confidence_interval
                lo, hi = float(ci.low), float(ci.high)
            else:
                lo = hi = point
            out.loc[config, cols] = [100 * (point - 1), 100 * (lo - 1), 100 * (hi - 1)]
    return out


def channel_costs(n: int = 20000) -> dict:
    """CPU cost of the always-on channels, measured in isolation (process CPU time, so the
    processor thread counts): ``record_us`` per phase record (timer, enqueue, dequeue, batch,
    SQLite insert), ``inline_us`` the part of it on the training thread (thread CPU time) and
    ``stack_us`` per stack snapshot, in microseconds."""
    import time

    from causalkit.systems.tracing.tracer import Tracer

    n = check_positive_int(n, "n")
    with tempfile.TemporaryDirectory(prefix="argus-cost-") as tmp:
        tr = Tracer(Path(tmp) / "s", channels=("phases",), queue_size=n + 10,
                    flush_interval_s=0.05)
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
