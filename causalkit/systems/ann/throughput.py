"""Interleaved single-thread throughput and the confidence interval of a QPS ratio.

On a shared machine the load drifts between two measurements taken one after the other, so a
QPS ratio read from two separate timings carries that drift. Here the compared searches run in
rounds: every round times each search once, back to back (order rotated between rounds), so a
load change hits all of them alike and cancels in the within-round ratio. The ratio of design
``a`` to design ``b`` is the geometric mean of the per-round ratios, with a paired Student-t
interval on their logarithms:

.. math:: \\bar r = \\frac1R\\sum_{j=1}^R \\log\\frac{q_{a,j}}{q_{b,j}},\\qquad
          \\exp\\bigl(\\bar r \\pm t_{R-1,1-\\alpha/2}\\, s_r/\\sqrt R\\bigr).

Reference: the paired design for benchmark comparisons, e.g. Kalibera & Jones (2013), "Rigorous
benchmarking in reasonable time", ISMM.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from causalkit.systems.ann.metrics import single_thread


def interleaved_qps(search_fns, xq: np.ndarray, k: int, rounds: int = 5,
                    min_seconds: float = 0.2, clock: str = "thread") -> np.ndarray:
    """QPS of each ``search_fn(xq, k)`` in each of ``rounds`` interleaved rounds (one thread).

    Returns an array of shape ``(len(search_fns), rounds)``. Round ``j`` starts with search
    ``j mod len(search_fns)`` so no search always runs first; within a round each search
    repeats the whole query batch until ``min_seconds`` have passed (so a time slice lost to
    another process is a small share of the measurement). One untimed warm-up call each.
    ``clock="thread"`` times with the calling thread's CPU clock (faiss on one OpenMP thread
    runs in that thread): equal to wall-clock QPS on an idle core and not lowered by the time
    the process waits for a core on a shared machine; ``clock="wall"`` uses
    ``time.perf_counter``.
    """
    if clock not in ("thread", "wall"):
        raise ValueError(f"clock must be 'thread' or 'wall'; got {clock!r}")
    now = time.thread_time if clock == "thread" else time.perf_counter
    fns = list(search_fns)
    if not fns:
        raise ValueError("search_fns must hold at least one search function")
    if int(rounds) < 2:
        raise ValueError(f"rounds must be >= 2 (a CI needs two rounds); got {rounds!r}")
    out = np.empty((len(fns), int(rounds)))
    with single_thread():
        for fn in fns:
            fn(xq[: min(len(xq), 32)], k)
        for j in range(int(rounds)):
            for i in np.roll(np.arange(len(fns)), -j):
                calls, t0 = 0, now()
                while True:
                    fns[i](xq, k)
                    calls += 1
                    elapsed = now() - t0
                    if elapsed >= min_seconds:
                        break
                out[i, j] = calls * len(xq) / max(elapsed, 1e-9)
    return out


@dataclass(frozen=True)
class RatioCI:
    """Geometric-mean ratio ``a / b`` of paired per-round QPS and its confidence interval."""

    ratio: float
    lower: float
    upper: float
    rounds: int

    def clears(self, min_gain: float) -> bool:
        """Whether the whole interval lies above ``1 + min_gain``."""
        return self.lower >= 1.0 + min_gain


def ratio_ci(qa: np.ndarray, qb: np.ndarray, level: float = 0.95) -> RatioCI:
    """Paired log-ratio t interval of ``qa / qb`` (see the module docstring)."""
    from scipy import stats

    qa, qb = np.asarray(qa, dtype=float), np.asarray(qb, dtype=float)
    if qa.shape != qb.shape or qa.ndim != 1 or len(qa) < 2:
        raise ValueError("qa and qb must be 1-d arrays of the same length >= 2")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level!r}")
    r = np.log(qa) - np.log(qb)
    half = stats.t.ppf(0.5 + level / 2, len(r) - 1) * r.std(ddof=1) / np.sqrt(len(r))
    m = r.mean()
    return RatioCI(float(np.exp(m)), float(np.exp(m - half)), float(np.exp(m + half)), len(r))


def compare_qps(fn_a, fn_b, xq: np.ndarray, k: int, rounds: int = 5, level: float = 0.95,
                **kwargs) -> tuple[RatioCI, np.ndarray]:
    """Interleave two searches; return the ratio CI of ``a / b`` and the ``(2, rounds)`` QPS
    (``kwargs`` go to :func:`interleaved_qps`)."""
    q = interleaved_qps((fn_a, fn_b), xq, k, rounds, **kwargs)
    return ratio_ci(q[0], q[1], level), q


def index_bytes_per_vector(index, n: int) -> float:
    """Serialized size of a faiss index divided by its number of vectors (codes, ids, graph,
    centroids, re-rank vectors: everything the index keeps)."""
    import faiss
    return float(len(faiss.serialize_index(index))) / max(int(n), 1)
