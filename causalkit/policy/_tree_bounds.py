"""Bounds that let the exact depth-2 tree search skip root splits and child features.

Each row's rewards are shifted by their row maximum, :math:`\\Gamma'_{rk} = \\Gamma_{rk} -
\\max_m \\Gamma_{rm} \\le 0`; every tree's total changes by the same constant
:math:`\\sum_r \\max_m \\Gamma_{rm}`, so the best tree is unchanged. As every row now adds at most
0, the best depth-1 total :math:`v(S)` of a row set can only fall when rows join it:
:math:`S \\subseteq S'` gives :math:`v(S') \\le v(S)`. A root split after row :math:`i` of the
root feature's order, with row :math:`i` in the root bin :math:`g` (bins of the feature's sorted
distinct values, about :math:`n/G` rows each), therefore has children bounded by the bins alone:

.. math::

    v(L_{\\le g}) \\le v(L(i)) \\le v(L_{<g}), \\qquad v(R_{\\ge g}) \\le v(R(i)) \\le v(R_{>g}).

On a child feature cut into :math:`B` bins, :math:`v(S)` is bounded above by letting the rows of
the bin that holds the threshold take their best arm (each adds at most 0):
:math:`\\max_{b}\\big(\\max_a P_a(<b) + \\max_c Q_c(>b)\\big)` with :math:`P`/:math:`Q` the
per-arm sums of :math:`\\Gamma'` over the set's rows in the bins before/after :math:`b`; and
bounded below by the best split at a bin boundary that keeps ``min_samples_leaf`` rows on each
side (a tree that exists). The lower bounds of one root split at a bin boundary give an attained
total :math:`V_*`; a root bin whose upper bound :math:`\\max_l v^{+}_l(L_{<g}) + \\max_l
v^{+}_l(R_{>g})` is below :math:`V_*` holds no best root split, and a child feature whose upper
bound on a side is below another feature's lower bound cannot give that side's best split
(branch and bound, Land & Doig 1960). Nothing is approximated: the search returns the tree of the
search without bounds. How much is skipped depends on the data: with a clear best split most
root bins and child features fall; with pure noise little does, and the search costs what it
costs without bounds plus the histograms.
"""

from __future__ import annotations

import numpy as np

try:
    from numba import njit
except ImportError:  # pragma: no cover - same kernel, interpreted
    def njit(**_):
        return lambda f: f

#: Rows of the bounds arrays: upper bound of v(L_<g), upper bound of v(R_>g), lower bound of
#: v(L_<=g), lower bound of v(R_>=g), lower bound of v(R_>g).
UB_LEFT, UB_RIGHT, LB_LEFT, LB_RIGHT, LB_RIGHT_EXCL = range(5)


@njit(cache=True, error_model="numpy")
def _side_max(pre, total, K):
    """(max_k pre[k], max_k total[k] - pre[k]) over the K arms."""
    left, right = -np.inf, -np.inf
    for k in range(K):
        left = max(left, pre[k])
        right = max(right, total[k] - pre[k])
    return left, right


@njit(cache=True, error_model="numpy")
def _set_value(C, tot, g, s, b, k):
    """Arm ``k`` sum (or, for k = K, the row count) over the rows of child bin ``b`` in set
    ``s`` of root bin ``g``: L_<g, L_<=g, R_>=g, R_>g, from the cumulative histogram ``C``."""
    if s == 0:
        return C[g - 1, b, k] if g > 0 else 0.0
    if s == 1:
        return C[g, b, k]
    if s == 2:
        return tot[b, k] - (C[g - 1, b, k] if g > 0 else 0.0)
    return tot[b, k] - C[g, b, k]


@njit(cache=True, error_model="numpy")
def _root_bin_bounds(C, tot, totals, min_leaf, pre, out, ell, g):
    """The five bounds of root bin ``g`` and child feature ``ell`` into ``out[:, ell, g]``.

    ``C`` (G, B, K + 1): per root bin and child bin, the arm sums and row count of the rows in
    root bins <= g; ``tot`` its last row; ``totals`` (4, K + 1) the sums over the child bins of
    L_<g, L_<=g, R_>=g and R_>g; ``pre`` (4, K + 1) scratch."""
    K = C.shape[2] - 1
    # L_<=g and R_>=g bound every child set of the bin from below only through splits that keep
    # min_leaf rows on each side after the bin's rows leave; R_>g is a child set itself.
    in_bin = totals[1, K] - totals[0, K]
    leaf = np.array([0.0, min_leaf + in_bin, min_leaf + in_bin, float(min_leaf)])
    upper = np.full(4, -np.inf)
    lower = np.full(4, -np.inf)
    for s in range(4):
        upper[s] = lower[s] = totals[s, :K].max()
    pre[:] = 0.0
    for b in range(C.shape[1]):
        for s in (0, 3):  # upper bounds: the rows of bin b take their best arm (each adds <= 0)
            before, after = -np.inf, -np.inf
            for k in range(K):
                before = max(before, pre[s, k])
                after = max(after, totals[s, k] - pre[s, k] - _set_value(C, tot, g, s, b, k))
            upper[s] = max(upper[s], before + after)
        for s in range(4):
            for k in range(K + 1):
                pre[s, k] += _set_value(C, tot, g, s, b, k)
        for s in (1, 2, 3):  # lower bounds: a split after bin b that keeps enough rows
            if pre[s, K] >= leaf[s] and totals[s, K] - pre[s, K] >= leaf[s]:
                left, right = _side_max(pre[s], totals[s], K)
                lower[s] = max(lower[s], left + right)
    out[UB_LEFT, ell, g] = upper[0]
    out[LB_LEFT, ell, g] = lower[1]
    out[LB_RIGHT, ell, g] = lower[2]
    out[UB_RIGHT, ell, g] = upper[3]
    out[LB_RIGHT_EXCL, ell, g] = lower[3]


@njit(cache=True, nogil=True, error_model="numpy")
def bin_bounds(root_bin, child_bin, shifted, n_bins, min_leaf, children, roots):
    """Bounds (5, p, n_bins) of the children of the root bins ``roots`` (bool) of one root
    feature (-inf elsewhere).

    ``root_bin`` (n,) and ``child_bin`` (p, n) are the rows' bins (``n_bins`` per feature),
    ``shifted`` the (n, K) rewards minus their row maximum, ``children`` the child features to
    bound (the others are left at -inf)."""
    n, K = shifted.shape
    p = child_bin.shape[0]
    out = np.full((5, p, n_bins), -np.inf)
    C = np.zeros((n_bins, n_bins, K + 1))
    up_to = np.zeros((n_bins, K + 1))  # per root bin: sums over the rows in root bins <= g
    totals = np.zeros((4, K + 1))
    pre = np.zeros((4, K + 1))
    last = n_bins - 1
    while last > 0 and not roots[last]:
        last -= 1
    for ell in range(p):
        if not children[ell]:
            continue
        C[:] = 0.0
        up_to[:] = 0.0
        for r in range(n):
            g, b = root_bin[r], child_bin[ell, r]
            for k in range(K):
                C[g, b, k] += shifted[r, k]
                up_to[g, k] += shifted[r, k]
            C[g, b, K] += 1.0
            up_to[g, K] += 1.0
        for g in range(1, n_bins):  # cumulative over the root bins
            up_to[g] += up_to[g - 1]
            if g <= last:
                C[g] += C[g - 1]
        tot = C[last].copy()  # rows of root bins after the last one bounded add to R only
        for g in range(last + 1, n_bins):
            tot += C[g]
        for g in range(n_bins):
            if not roots[g]:
                continue
            for k in range(K + 1):
                totals[0, k] = up_to[g - 1, k] if g > 0 else 0.0
                totals[1, k] = up_to[g, k]
                totals[2, k] = up_to[n_bins - 1, k] - totals[0, k]
                totals[3, k] = up_to[n_bins - 1, k] - totals[1, k]
            _root_bin_bounds(C, tot, totals, min_leaf, pre, out, ell, g)
    return out


def attained_total(bounds, rows_up_to, n, min_leaf):
    """Largest lower bound of a tree whose root splits at a bin boundary (after bin g), or -inf.
    ``rows_up_to[g]`` counts the rows in root bins <= g."""
    total = bounds[LB_LEFT].max(axis=0) + bounds[LB_RIGHT_EXCL].max(axis=0)
    ok = (rows_up_to >= min_leaf) & (n - rows_up_to >= min_leaf)
    return float(total[ok].max()) if ok.any() else -np.inf


def needed(bounds, candidates, best, tol):
    """Root bins that may hold the best root split, and the child features each side needs.

    Parameters
    ----------
    bounds : ndarray (5, p, G)
        From :func:`bin_bounds`.
    candidates : ndarray of bool (2, p, G)
        Child features still possible on each side (left, right) of each root bin.
    best : float
        An attained total (shifted rewards).
    tol : float
        Rounding allowance: a bound within ``tol`` of what it is compared with is kept.

    Returns
    -------
    (alive, need) : ndarray of bool (G,), ndarray of bool (2, p, G)
    """
    upper = np.stack([np.where(candidates[0], bounds[UB_LEFT], -np.inf),
                      np.where(candidates[1], bounds[UB_RIGHT], -np.inf)])
    side_upper = upper.max(axis=1)
    alive = side_upper.sum(axis=0) >= best - tol
    side_lower = np.stack([bounds[LB_LEFT].max(axis=0), bounds[LB_RIGHT].max(axis=0)])
    need = candidates & alive & (upper >= side_lower[:, None, :] - tol)
    return alive, need
