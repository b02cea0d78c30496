"""The statistics of the automatic diagnosis levels, on plain arrays (no store access).

* L1 iteration level: sliding-window jitter gate and mean-shift change point.
* L2 phase level: leave-one-out robust excess of each rank within its parallel group.
* L3 kernel level: Wasserstein-1 distance between reconstructed duration distributions, mean
  distance of each rank to all others in O(G N log N), IQR fence and block (half) rule.

Reference: Zhou et al. (2026), arXiv 2606.20374, section 6; constants are the public
reimplementation's defaults (W = 8, theta = 2; ratio 1.5 with relative sd <= 0.35; CV 0.15,
z 2; IQR fence 1.5 with score >= 2x median; block rule 3x).
"""

from __future__ import annotations

import numpy as np

from causalkit.systems.tracing.compression import KernelGroupSummary, cdf

__all__ = ["jitter_windows", "change_point", "robust_excess", "mean_w1_scores", "w1_matrix",
           "cdf_matrix", "fence_outliers", "block_outliers"]

_MAD = 1.4826          # MAD -> sd under normality
_SE_MEDIAN = 1.2533    # sd(median) / sd(mean) under normality


def jitter_windows(series, window: int = 8, ratio: float = 2.0) -> list[tuple[int, int, float]]:
    """Merged runs of sliding windows with max/min >= ratio.

    Returns
    -------
    list of (lo, hi, max_ratio) index ranges [lo, hi) into ``series``.
    """
    x = np.asarray(series, dtype=float)
    if x.size < window:
        return []
    from numpy.lib.stride_tricks import sliding_window_view

    view = sliding_window_view(x, window)
    r = view.max(axis=1) / np.maximum(view.min(axis=1), 1e-300)
    flagged = np.flatnonzero(r >= ratio)
    runs: list[tuple[int, int, float]] = []
    for start in flagged:
        if runs and start <= runs[-1][1]:
            lo, hi, best = runs[-1]
            runs[-1] = (lo, start + window, max(best, r[start]))
        else:
            runs.append((int(start), int(start + window), float(r[start])))
    return [(lo, min(hi, x.size), best) for lo, hi, best in runs]


def change_point(series, min_side: int = 5, ratio: float = 1.5,
                 max_rel_sd: float = 0.35) -> tuple[int, float] | None:
    """Best mean-shift split t (steps[:t] vs steps[t:]) with mean ratio >= ``ratio``.

    A split qualifies if both sides have relative sd <= ``max_rel_sd``; the one with the largest
    ratio wins. Returns (t, ratio) or None.
    """
    x = np.asarray(series, dtype=float)
    n = x.size
    if n < 2 * min_side:
        return None
    t = np.arange(min_side, n - min_side + 1)
    c1, c2 = np.concatenate([[0], np.cumsum(x)]), np.concatenate([[0], np.cumsum(x * x)])
    nl, nr = t, n - t
    ml, mr = c1[t] / nl, (c1[n] - c1[t]) / nr
    vl = np.maximum(c2[t] / nl - ml ** 2, 0) * nl / np.maximum(nl - 1, 1)
    vr = np.maximum((c2[n] - c2[t]) / nr - mr ** 2, 0) * nr / np.maximum(nr - 1, 1)
    r = mr / np.maximum(ml, 1e-300)
    ok = (r >= ratio) & (np.sqrt(vl) / ml <= max_rel_sd) & (np.sqrt(vr) / mr <= max_rel_sd)
    if not ok.any():
        return None
    best = np.flatnonzero(ok)[np.argmax(r[ok])]
    return int(t[best]), float(r[best])


def _loo_median(m: np.ndarray) -> np.ndarray:
    """median_{j != i} m_j for every i (from the sorted values; O(k log k))."""
    k = m.size
    order = np.argsort(m)
    s = m[order]
    pos = np.empty(k, dtype=int)
    pos[order] = np.arange(k)

    def kth(j):  # j-th smallest of the values without position pos
        return np.where(j < pos, s[np.minimum(j, k - 1)], s[np.minimum(j + 1, k - 1)])

    rest = k - 1
    if rest % 2:
        return kth(np.full(k, rest // 2))
    return 0.5 * (kth(np.full(k, rest // 2 - 1)) + kth(np.full(k, rest // 2)))


def _difference_noise(row: np.ndarray) -> float:
    """sigma = 1.4826 median |x_t - x_{t-1}| / sqrt(2) over the non-missing steps in order."""
    values = row[~np.isnan(row)]
    if values.size < 2:
        return 0.0
    return float(_MAD * np.median(np.abs(np.diff(values))) / np.sqrt(2.0))


def robust_excess(per_step: np.ndarray) -> dict[str, np.ndarray]:
    """Leave-one-out excess of each rank's typical phase time within a group.

    Parameters
    ----------
    per_step : array (n_ranks, n_steps)
        Per-step phase durations (NaN where missing); at least two ranks.

    Returns
    -------
    dict with per-rank arrays ``median`` (m_i), ``baseline`` (b_i = median_{j != i} m_j),
    ``rel`` (m_i / b_i - 1), ``z`` ((m_i - b_i) / s_i with
    s_i^2 = se_i^2 + median_j se_j^2 + (1.4826 MAD_j m_j)^2, the MAD term only for groups of
    three or more), ``noise`` (sigma_i, below), ``vote`` (share of steps in which rank i is
    slower than every other rank) and the group's ``cv`` (sd / mean of m across ranks).

    Notes
    -----
    Across-rank z-scores alone are degenerate for small groups (with two ranks they are always
    +-0.71), so the within-rank step-to-step noise enters the scale; the between-rank MAD term
    takes over in large groups. ``se_i = 1.2533 sigma_i / sqrt(n_i)`` is the standard error of
    a median of ``n_i`` steps, with the step-to-step noise estimated from successive
    differences, ``sigma_i = 1.4826 median_t |x_{i,t} - x_{i,t-1}| / sqrt(2)``. Unlike the MAD
    around the median, this estimate is not inflated by a level shift inside the window (a
    fault that starts mid-window contributes one large difference, not a bimodal spread), so
    the z-score of a rank that turned slow is not capped by its own onset. The difference-based
    MAD is a standard noise scale in change-point analysis (Fryzlewicz 2014, Ann. Statist. 42,
    section 3).
    """
    x = np.asarray(per_step, dtype=float)
    k = x.shape[0]
    if k < 2:
        raise ValueError("robust_excess needs at least two ranks")
    m = np.nanmedian(x, axis=1)
    noise = np.array([_difference_noise(row) for row in x])
    counts = np.maximum(np.sum(~np.isnan(x), axis=1), 1)
    se = _SE_MEDIAN * noise / np.sqrt(counts)
    base = _loo_median(m)
    between = _MAD * np.median(np.abs(m - np.median(m))) if k >= 3 else 0.0
    scale = np.sqrt(se ** 2 + np.median(se) ** 2 + between ** 2)
    filled = np.where(np.isnan(x), -np.inf, x)
    top2 = np.sort(filled, axis=0)[-2:] if k >= 2 else filled
    others_max = np.where(filled >= top2[1][None, :], top2[0][None, :], top2[1][None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = m / base - 1.0
        z = (m - base) / np.maximum(scale, 1e-12 * np.maximum(np.abs(base), 1e-300))
        vote = np.mean(filled > others_max, axis=1)
    cv = float(np.std(m) / np.mean(m)) if np.mean(m) > 0 else 0.0
    return {"median": m, "baseline": base, "rel": rel, "z": z, "noise": noise, "vote": vote,
            "cv": cv}


def cdf_matrix(groups: list[list[KernelGroupSummary]], grid: np.ndarray) -> np.ndarray:
    """Rows: each rank's reconstructed CDF on ``grid``; a rank's summaries from several windows
    are pooled as a count-weighted mixture."""
    rows = []
    for parts in groups:
        total = sum(g.samples for g in parts)
        rows.append(sum((g.samples / total) * cdf(g, grid) for g in parts))
    return np.vstack(rows)


def _mean_abs_diff_to_others(v: np.ndarray) -> np.ndarray:
    """For every column, mean_j |v_i - v_j| over j != i (sort + prefix sums); v: (N, G)."""
    n = v.shape[0]
    order = np.argsort(v, axis=0)
    s = np.take_along_axis(v, order, axis=0)
    prefix = np.cumsum(s, axis=0)
    k = np.arange(n)[:, None]
    below = prefix - s                   # sum of values before position k
    above = prefix[-1][None, :] - prefix  # sum of values after position k
    sorted_mad = (s * k - below + above - s * (n - 1 - k)) / max(n - 1, 1)
    out = np.empty_like(v)
    np.put_along_axis(out, order, sorted_mad, axis=0)
    return out


def mean_w1_scores(F: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Mean Wasserstein-1 distance of each row's CDF to all other rows.

    W1(F_i, F_j) = integral |F_i(t) - F_j(t)| dt (trapezoid rule on ``grid``), so the mean over
    j is the integral of the mean absolute difference, computed without the N x N matrix.
    """
    if F.shape[0] < 2:
        return np.zeros(F.shape[0])
    return np.trapezoid(_mean_abs_diff_to_others(F), grid, axis=1)


def w1_matrix(F: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Pairwise W1 matrix (for small N: block structure, validation)."""
    return np.trapezoid(np.abs(F[:, None, :] - F[None, :, :]), grid, axis=2)


def fence_outliers(scores: np.ndarray, k: float = 1.5, min_ratio: float = 2.0) -> np.ndarray:
    """Boolean mask: score > Q3 + k IQR and score >= ``min_ratio`` x median score (N >= 4)."""
    s = np.asarray(scores, dtype=float)
    if s.size < 4:
        return np.zeros(s.size, dtype=bool)
    q1, med, q3 = np.percentile(s, [25, 50, 75])
    return (s > q3 + k * (q3 - q1)) & (s >= min_ratio * med)


def block_outliers(p50: np.ndarray, factor: float = 3.0) -> np.ndarray:
    """Boolean mask: p50 >= ``factor`` x the median p50 of the faster half of the ranks.

    Handles a whole degraded group (half the ranks), where mean-W1 scores become symmetric and
    the IQR fence fails.
    """
    p = np.asarray(p50, dtype=float)
    if p.size < 2:
        return np.zeros(p.size, dtype=bool)
    healthy = np.sort(p)[: max(1, p.size // 2)]
    return p >= factor * np.median(healthy)
