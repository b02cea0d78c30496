"""SIMULATED cluster-scale traces: per-rank phase timelines and kernel streams for 1,000+ ranks.

This host cannot run thousands of ranks, so :class:`SyntheticCluster` generates what their
tracers would record and feeds it to the *same* compression (:func:`cluster_durations`) and
diagnosis (:func:`diagnose`) code. Every output is labelled ``simulated=True``.

Model, per step and rank i (all durations log-normal around the calibrated medians):

* compute: self_attention, mlp (times ``severity`` on a compute straggler from ``fault_step``),
  backward = 2 x (self_attention + mlp), then the rank *arrives* at its expert-group
  ``alltoall``;
* a collective completes when the last member has arrived plus its transfer time (times
  ``severity`` in a degraded expert group), so each member's measured collective time is
  completion - own arrival: the culprit-victim masking emerges rather than being imposed;
* ``allreduce`` over all ranks likewise, then ``optimizer``; the iteration ends there.

Kernel streams (one profiler window per rank) are mixtures of log-normal modes, per kernel
``(count per step, median ns, log-sd)``; :meth:`SyntheticCluster.from_summaries` calibrates them
on compressed real windows (each cluster becomes a mode: count, p50, (ln p99 - ln p50) / 2.326).
A compute straggler's matmul-like kernels and a degraded group's ``collective:alltoall`` are
scaled by ``severity``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int, check_random_state
from causalkit.systems.tracing.compression import (
    KernelGroupSummary,
    KernelSummary,
    cluster_durations,
    compress,
    round_trip_errors,
)
from causalkit.systems.tracing.diagnosis import diagnose
from causalkit.systems.tracing.store import MemoryStore

__all__ = ["SyntheticCluster", "DEFAULT_KERNELS", "cupti_scale_window"]

#: kernel -> (stream, [(count per step, median ns, log-sd), ...]); a generic transformer-step mix.
DEFAULT_KERNELS = {
    "aten::addmm": ("compute", [(24, 40e3, 0.15), (8, 400e3, 0.2)]),
    "aten::mm": ("compute", [(16, 60e3, 0.2)]),
    "aten::_softmax": ("compute", [(4, 25e3, 0.1)]),
    "aten::native_layer_norm": ("compute", [(4, 15e3, 0.1)]),
    "aten::copy_": ("compute", [(20, 5e3, 0.4), (4, 80e3, 0.3)]),
    "collective:alltoall": ("compute", [(4, 300e3, 0.2)]),
    "collective:allreduce": ("compute", [(1, 2e6, 0.2)]),
}
_PHASE_MEDIANS_MS = {"self_attention": 1.0, "mlp": 0.8, "optimizer": 0.5, "alltoall": 0.3,
                     "allreduce": 2.0}
_FAULTS = (None, "compute_straggler", "link_degradation")


def _slow_kernel(name: str) -> bool:
    return "mm" in name and not name.startswith("collective:")


class SyntheticCluster:
    """A simulated N-rank data/expert-parallel job traced by ARGUS channels.

    Parameters
    ----------
    n_ranks : int
        Ranks (>= 2; multiples of ``ep_size`` form the expert groups).
    steps : int
        Steps per rank.
    fault : {None, "compute_straggler", "link_degradation"}
    faulty_rank : int, optional
        Straggler rank, or a member of the degraded expert group (default: the last rank).
    severity : float
        Slowdown factor of the faulty compute or link.
    fault_step : int, optional
        Onset (default ``steps // 3``).
    ep_size : int
        Expert-group size.
    kernels : dict, optional
        Kernel modes (see ``causalkit.systems.tracing.synthetic.DEFAULT_KERNELS``).
    noise : float
        Log-sd of the phase durations.
    seed : int or Generator
    """

    def __init__(self, n_ranks: int = 1000, steps: int = 32, fault=None, faulty_rank=None,
                 severity: float = 3.0, fault_step=None, ep_size: int = 8, kernels=None,
                 noise: float = 0.05, seed=0):
        self.n_ranks = check_positive_int(n_ranks, "n_ranks", minimum=2)
        self.steps = check_positive_int(steps, "steps", minimum=16)
        if fault not in _FAULTS:
            raise ValueError(f"fault must be one of {_FAULTS}; got {fault!r}")
        self.fault = fault
        self.faulty_rank = self.n_ranks - 1 if faulty_rank is None else int(faulty_rank)
        if not 0 <= self.faulty_rank < self.n_ranks:
            raise ValueError(f"faulty_rank must be in [0, {self.n_ranks}); got {faulty_rank!r}")
        if not severity >= 1:
            raise ValueError(f"severity must be >= 1; got {severity!r}")
        self.severity = float(severity)
        self.fault_step = self.steps // 3 if fault_step is None else int(fault_step)
        self.ep_size = check_positive_int(ep_size, "ep_size", minimum=2)
        if self.n_ranks % self.ep_size:
            raise ValueError(f"n_ranks ({n_ranks}) must be a multiple of ep_size ({ep_size})")
        self.kernels = dict(DEFAULT_KERNELS if kernels is None else kernels)
        self.noise = float(noise)
        self.seed = seed

    @classmethod
    def from_summaries(cls, summaries, rank: int = 0, steps_per_window: int = 1, **kwargs):
        """Calibrate the kernel modes on real compressed windows of ``rank``."""
        groups = [g for s in summaries for g in s.groups if g.rank == rank]
        if not groups:
            raise ValueError(f"no kernel summaries of rank {rank} to calibrate on")
        n_windows = len({s.window_id for s in summaries if any(g.rank == rank
                                                                for g in s.groups)})
        kernels: dict[str, tuple[str, list]] = {}
        for g in groups:
            modes = kernels.setdefault(g.kernel, (g.stream, []))[1]
            modes.extend((c.count / (n_windows * steps_per_window), c.p50, c.sigma)
                         for c in g.clusters)
        return cls(kernels=kernels, **kwargs)

    @property
    def true_ranks(self) -> set[int]:
        if self.fault is None:
            return set()
        if self.fault == "link_degradation":
            first = self.ep_size * (self.faulty_rank // self.ep_size)
            return set(range(first, first + self.ep_size))
        return {self.faulty_rank}

    def _phases(self, rng: np.random.Generator):
        n, steps = self.n_ranks, self.steps
        group = np.arange(n) // self.ep_size
        slow = np.zeros(n, dtype=bool)
        slow[sorted(self.true_ranks)] = True

        def draw(name, size=n):
            return _PHASE_MEDIANS_MS[name] * 1e6 * np.exp(self.noise * rng.standard_normal(size))

        rows, iters = [], []
        t = np.zeros(n)
        for step in range(steps):
            active = step >= self.fault_step
            start = t.copy()
            attn, mlp = draw("self_attention"), draw("mlp")
            if self.fault == "compute_straggler" and active:
                mlp = np.where(slow, mlp * self.severity, mlp)
            backward = 2 * (attn + mlp) * np.exp(self.noise * rng.standard_normal(n))
            arrive = start + attn + mlp + backward
            transfer = draw("alltoall", n // self.ep_size)
            if self.fault == "link_degradation" and active:
                transfer[self.faulty_rank // self.ep_size] *= self.severity
            done_a2a = pd.Series(arrive).groupby(group).max().to_numpy() + transfer
            a2a = done_a2a[group] - arrive
            ar_arrive = done_a2a[group]
            ar = ar_arrive.max() + draw("allreduce", 1)[0] - ar_arrive
            opt = draw("optimizer")
            end = ar_arrive + ar + opt
            fwd_start = start
            for phase, s0, dur in (("self_attention", fwd_start, attn),
                                   ("mlp", fwd_start + attn, mlp),
                                   ("forward", fwd_start, attn + mlp),
                                   ("backward", fwd_start + attn + mlp, backward),
                                   ("alltoall", arrive, a2a), ("allreduce", ar_arrive, ar),
                                   ("optimizer", ar_arrive + ar, opt)):
                rows.append(pd.DataFrame({"rank": np.arange(n), "step": step, "phase": phase,
                                          "grp": ([f"ep{g}" for g in group]
                                                  if phase == "alltoall" else "dp0"),
                                          "start_ns": s0.astype(np.int64),
                                          "duration_ns": dur.astype(np.int64), "nbytes": 0}))
            iters.append(pd.DataFrame({"rank": np.arange(n), "step": step,
                                       "start_ns": start.astype(np.int64),
                                       "duration_ns": (end - start).astype(np.int64)}))
            t = end
        return pd.concat(iters, ignore_index=True), pd.concat(rows, ignore_index=True)

    def _kernels(self, rng: np.random.Generator, step: int) -> list[KernelSummary]:
        """One compressed window per rank (compression: the processor's clustering)."""
        slow = self.true_ranks if step >= self.fault_step else set()
        out = []
        for rank in range(self.n_ranks):
            groups = []
            for name, (stream, modes) in self.kernels.items():
                parts = []
                for count, median, sigma in modes:
                    k = rng.poisson(count) if count < 1 else int(round(count))
                    parts.append(median * np.exp(sigma * rng.standard_normal(k)))
                d = np.concatenate(parts)
                if d.size == 0:
                    continue
                if rank in slow and ((self.fault == "compute_straggler" and _slow_kernel(name))
                                     or (self.fault == "link_degradation"
                                         and name == "collective:alltoall")):
                    d = d * self.severity
                groups.append(KernelGroupSummary(name, stream, rank, cluster_durations(d)))
            out.append(KernelSummary(tuple(groups), window_id=0, step=step))
        return out

    def generate(self) -> MemoryStore:
        """Simulate the job: a :class:`MemoryStore` diagnosable with :func:`diagnose`."""
        rng = check_random_state(self.seed)
        iterations, phases = self._phases(rng)
        window_step = self.steps - 2
        summaries = self._kernels(rng, window_step)
        meta = {r: {"profile_steps": 1, "simulated": True} for r in range(self.n_ranks)}
        return MemoryStore(iterations, phases, summaries, meta=meta)

    def run(self) -> pd.DataFrame:
        """Generate, diagnose and score; one row (``simulated=True``)."""
        t0 = time.perf_counter()
        store = self.generate()
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = diagnose(store)
        diag_s = time.perf_counter() - t0
        kinds = {"compute_straggler": ("compute_straggler",),
                 "link_degradation": ("link_degradation", "communication")}.get(self.fault, ())
        flagged = {f.rank for f in report.culprits}
        hits = {f.rank for f in report.culprits if f.kind in kinds} & self.true_ranks
        truth = self.true_ranks
        return pd.DataFrame([{
            "n_ranks": self.n_ranks, "fault": self.fault or "none", "severity": self.severity,
            "simulated": True, "n_flagged": len(flagged),
            "precision": len(hits) / len(flagged) if flagged else float(not truth),
            "recall": len(hits) / len(truth) if truth else np.nan,
            "generate_s": gen_s, "diagnose_s": diag_s}])


def cupti_scale_window(n_events: int = 100_000, kernels=None, seed=0) -> dict:
    """SIMULATED compression at CUPTI volumes: one rank-step of ``n_events`` kernel events.

    Event counts are split over the kernels in proportion to their per-step counts; the raw
    size is the Chrome-trace JSON of the events. Returns raw bytes, summary bytes, ratio,
    clusters and the largest relative p50 / p99 round-trip errors over the kernels
    (:func:`~causalkit.systems.tracing.round_trip_errors`).
    """
    rng = check_random_state(seed)
    kernels = dict(DEFAULT_KERNELS if kernels is None else kernels)
    modes = [(name, stream, count, median, sigma) for name, (stream, ms) in kernels.items()
             for count, median, sigma in ms]
    weights = np.array([m[2] for m in modes], dtype=float)
    counts = rng.multinomial(check_positive_int(n_events, "n_events"), weights / weights.sum())
    names, streams, durations = [], [], []
    for (name, stream, _, median, sigma), k in zip(modes, counts, strict=True):
        names += [name] * k
        streams += [stream] * k
        durations.append(median * np.exp(sigma * rng.standard_normal(k)))
    dur = np.concatenate(durations).astype(np.int64)
    frame = pd.DataFrame({"name": names, "stream": streams, "rank": 0, "step": 0,
                          "start_ns": np.cumsum(dur) - dur, "duration_ns": dur})
    summary = compress(frame)
    errors = round_trip_errors(frame, summary)
    return {"n_events": int(n_events), "raw_bytes": summary.raw_bytes,
            "summary_bytes": summary.summary_bytes,
            "ratio": summary.raw_bytes / summary.summary_bytes,
            "n_clusters": summary.n_clusters, "p50_err_max": float(errors["p50_err"].max()),
            "p99_err_max": float(errors["p99_err"].max()), "simulated": True}
