"""Queue stability of a simulated run: a queue-length trend test after a warm-up.

A FIFO cluster offered more work than its policy can serve has a queue that grows linearly in
time; its average JCT then grows with the trace length and is no steady-state quantity. The
check uses a fixed horizon ``T`` (the last arrival: set by the trace, the same for every policy
run on it), discards the warm-up ``[0, w T)``, cuts the window ``[w T, T]`` into ``B`` equal
batches and regresses the time-average queue length ``Q_b`` of each batch on its mid-time
``t_b`` (ordinary least squares on batch means)::

    Q_b = a + beta t_b + e_b,    SE(beta) = s / sqrt(sum_b (t_b - tbar)^2),
    CI = beta -+ t_{B-2, (1+level)/2} SE(beta),    s^2 = sum_b e_b^2 / (B - 2)

(batch means: Law, *Simulation Modeling and Analysis*, 5th ed., sec. 9.5.3). A run is
**unstable** when the interval lies above zero *and* the fitted rise over the window,
``beta (1 - w) T``, is at least ``min_rise`` queued jobs (a growing queue, not a wiggle).
Secondary statistic: the mean queueing delay of the jobs arriving in the last quarter of the
window over that of the first quarter (about 1 when stable, large when the queue grows).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["queue_trend", "post_warmup", "time_average"]


def _check_fraction(value, name):
    if not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1); got {value!r}")
    return float(value)


def time_average(times, values, edges) -> np.ndarray:
    """Time averages of a piecewise-constant signal over the intervals between ``edges``.

    ``values[i]`` holds on ``[times[i], times[i+1])`` (the last one to infinity), 0 before
    ``times[0]``; ``times`` must be non-decreasing and ``edges`` increasing.
    """
    t = np.asarray(times, float)
    v = np.asarray(values, float)
    e = np.asarray(edges, float)
    cum = np.r_[0.0, np.cumsum(v[:-1] * np.diff(t))]            # area from t[0] to t[i]
    i = np.searchsorted(t, e, side="right") - 1
    area = np.where(i < 0, 0.0, cum[np.maximum(i, 0)] + v[np.maximum(i, 0)]
                    * (e - t[np.maximum(i, 0)]))
    return np.diff(area) / np.diff(e)


def post_warmup(jobs: pd.DataFrame, warmup: float = 0.25) -> pd.DataFrame:
    """The jobs arriving after the warm-up ``w T`` (``T`` = last arrival)."""
    warmup = _check_fraction(warmup, "warmup")
    arr = jobs["arrival"].to_numpy(float)
    return jobs[arr >= warmup * arr.max()]


def queue_trend(timeline: pd.DataFrame, jobs: pd.DataFrame, *, warmup: float = 0.25,
                batches: int = 10, min_rise: float = 1.0, level: float = 0.95) -> dict:
    """Queue-length trend over the post-warm-up horizon, and the stability verdict.

    Parameters
    ----------
    timeline : DataFrame
        ``time`` and ``queued`` after every event (``Result.timeline``).
    jobs : DataFrame
        ``arrival`` and ``jwt`` per job (``Result.jobs``).
    warmup : float
        Share of the horizon discarded, in [0, 1).
    batches : int
        Batches of the window (>= 3).
    min_rise : float
        Smallest fitted queue growth over the window (jobs) that counts as unstable.
    level : float
        Confidence level of the slope interval.

    Returns
    -------
    dict
        ``stable`` (bool), ``queue_slope_per_h`` and its interval ``queue_slope_ci_lower/upper``
        (queued jobs per hour), ``queue_rise`` (fitted growth over the window, jobs),
        ``queue_first``/``queue_last`` (mean queue length in the first/last quarter of the
        window), ``jwt_last_over_first`` and ``horizon_s``.
    """
    warmup = _check_fraction(warmup, "warmup")
    if not isinstance(batches, (int, np.integer)) or batches < 3:
        raise ValueError(f"batches must be an integer >= 3; got {batches!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"level must be in (0, 1); got {level!r}")
    horizon = float(jobs["arrival"].max())
    t0 = warmup * horizon
    if horizon <= t0:
        raise ValueError("the trace has no arrivals after the warm-up (all jobs arrive at once)")
    edges = np.linspace(t0, horizon, batches + 1)
    q = time_average(timeline["time"], timeline["queued"], edges)
    mid = 0.5 * (edges[1:] + edges[:-1]) / 3600.0
    dm = mid - mid.mean()
    slope = float((dm * (q - q.mean())).sum() / (dm ** 2).sum())
    resid = q - q.mean() - slope * dm
    se = math.sqrt((resid ** 2).sum() / (batches - 2) / (dm ** 2).sum())
    half = stats.t.ppf(0.5 + level / 2, batches - 2) * se
    rise = slope * (horizon - t0) / 3600.0
    quarter = np.linspace(t0, horizon, 5)
    first_q, last_q = time_average(timeline["time"], timeline["queued"], quarter)[[0, 3]]
    arr = jobs["arrival"].to_numpy(float)
    jwt = jobs["jwt"].to_numpy(float)
    jf = jwt[(arr >= quarter[0]) & (arr < quarter[1])]
    jl = jwt[(arr >= quarter[3]) & (arr <= quarter[4])]
    ratio = float(jl.mean() / jf.mean()) if jf.size and jl.size and jf.mean() > 0 else \
        (1.0 if jf.size and jl.size and jl.mean() == 0 else float("inf"))
    return {"stable": not (slope - half > 0 and rise >= min_rise),
            "queue_slope_per_h": slope, "queue_slope_ci_lower": slope - half,
            "queue_slope_ci_upper": slope + half, "queue_rise": rise,
            "queue_first": float(first_q), "queue_last": float(last_q),
            "jwt_last_over_first": ratio, "horizon_s": horizon}
