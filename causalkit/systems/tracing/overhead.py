"""Tracing overhead on step time: off vs always-on channels vs duty-cycled vs always-on profiler.

A single-process training loop (the data-parallel workload's transformer blocks, no
collectives) runs in interleaved blocks of ``block_steps`` steps per configuration, in a
shuffled order each round, so that machine-load drift hits all configurations alike. Step
times are taken outside the tracer (``perf_counter_ns`` around each step); the overhead of a
configuration is the ratio of its median step time to the untraced median, minus one. The
process CPU time per step (all threads, so the tracer's processor and sampler count) is
recorded too: on a shared, loaded host it is far less noisy than wall time.

Configurations:

* ``off``: no tracer;
* ``always_on``: phase timers + stack sampler + queue + processor + SQLite (the channels ARGUS
  keeps on all the time);
* ``duty_cycled``: always_on plus one profiler step every ``profile_every`` steps (the kernel
  channel on CPU, reported separately);
* ``profiler_always``: always_on plus the profiler on every step (what an always-on
  torch.profiler costs here).
"""

from __future__ import annotations

import tempfile
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int, check_random_state

__all__ = ["measure_overhead", "summarize_overhead", "channel_costs", "CONFIGS"]

CONFIGS = ("off", "always_on", "duty_cycled", "profiler_always")


class _NoTracer:
    def step(self):
        return nullcontext()

    def phase(self, name):
        return nullcontext()


def _loop(tracer, layers, x, steps: int) -> np.ndarray:
    import time

    out = np.empty((steps, 2))
    for i in range(steps):
        t0, c0 = time.perf_counter_ns(), time.process_time_ns()
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
        out[i] = (time.perf_counter_ns() - t0) / 1e6, (time.process_time_ns() - c0) / 1e6
    return out


def measure_overhead(rounds: int = 8, block_steps: int = 50, profile_every: int = 10,
                     layers: int = 4, d_model: int = 64, hidden: int = 256, batch: int = 16,
                     seq: int = 32, configs=CONFIGS, seed=0) -> pd.DataFrame:
    """Per-step times of each configuration, tidy: config, round, step, ms (wall), cpu_ms
    (CPU time of the whole process during the step, tracer threads included).

    Use :func:`summarize_overhead` for the medians and ratios.
    """
    import torch

    from causalkit.systems.tracing.tracer import Tracer
    from causalkit.systems.tracing.workload import _build

    rounds = check_positive_int(rounds, "rounds")
    block_steps = check_positive_int(block_steps, "block_steps")
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        raise ValueError(f"configs: unknown {unknown}; choose from {CONFIGS}")
    torch.set_num_threads(1)
    rng = check_random_state(seed)
    model = _build({"seed": 0, "d_model": d_model, "hidden": hidden, "layers": layers})
    x = torch.randn(batch, seq, d_model)
    frames = []
    with tempfile.TemporaryDirectory(prefix="argus-overhead-") as tmp:
        _loop(_NoTracer(), model, x, 10)                      # warm-up
        for r in range(rounds):
            for config in rng.permutation(list(configs)):
                if config == "off":
                    _loop(_NoTracer(), model, x, 3)
                    times = _loop(_NoTracer(), model, x, block_steps)
                else:
                    every = {"always_on": block_steps + 1, "duty_cycled": profile_every,
                             "profiler_always": 1}[config]
                    channels = ("phases", "stacks") if config == "always_on" else \
                        ("phases", "stacks", "kernels")
                    with Tracer(Path(tmp) / f"{config}-{r}", channels=channels,
                                profile_every=every) as tr:
                        _loop(tr, model, x, 3)            # untimed: tracer start-up settles
                        times = _loop(tr, model, x, block_steps)
                frames.append(pd.DataFrame({"config": config, "round": r,
                                            "step": np.arange(block_steps), "ms": times[:, 0],
                                            "cpu_ms": times[:, 1]}))
    return pd.concat(frames, ignore_index=True)


def summarize_overhead(times: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: median wall and CPU step time, and the overhead vs ``off`` in percent
    as the median over rounds of the ratio of per-round medians (with the min-max over rounds),
    for wall time and for process CPU time (which includes the tracer's own threads)."""
    out = {}
    for col, label in (("ms", "wall"), ("cpu_ms", "cpu")):
        med = times.groupby(["config", "round"])[col].median().unstack("round")
        ratio = med / med.loc["off"]
        out[f"median_{col}"] = times.groupby("config")[col].median()
        out[f"{label}_overhead_pct"] = (ratio.median(axis=1) - 1) * 100
        out[f"{label}_overhead_pct_min"] = (ratio.min(axis=1) - 1) * 100
        out[f"{label}_overhead_pct_max"] = (ratio.max(axis=1) - 1) * 100
    order = [c for c in CONFIGS if c in set(times["config"])]
    return pd.DataFrame(out).loc[order]


def channel_costs(n: int = 20000) -> dict:
    """CPU cost of the always-on channels, measured in isolation (process CPU time, so the
    processor thread counts): ``record_us`` per phase record (timer, enqueue, dequeue, batch,
    SQLite insert) and ``stack_us`` per stack snapshot, in microseconds."""
    import time

    from causalkit.systems.tracing.tracer import Tracer

    n = check_positive_int(n, "n")
    with tempfile.TemporaryDirectory(prefix="argus-cost-") as tmp:
        tr = Tracer(Path(tmp) / "s", channels=("phases",), queue_size=n + 10,
                    flush_interval_s=0.05)
        with tr:
            with tr.step():
                c0 = time.process_time_ns()
                for _ in range(n):
                    with tr.phase("mlp"):
                        pass
            while tr.written_["phases"] < n and tr.errors_ == 0:
                time.sleep(0.01)
            total = time.process_time_ns() - c0
            c1 = time.process_time_ns()
            for _ in range(n // 10):
                tr._snapshot()
            stacks = time.process_time_ns() - c1
    return {"record_us": total / n / 1e3, "stack_us": stacks / (n // 10) / 1e3}
