"""Bounds that let the exact depth-2 tree search skip root splits and child features.

Each row's rewards are shifted by their row maximum, :math:`\\Gamma'_{rk} = \\Gamma_{rk} -
\\max_m \\Gamma_{rm} \\le 0`; every tree's total changes by the same constant
:math:`\\sum_r \\max_m \\Gamma_{rm}`, so the best tree is unchanged. As every row now adds at most
0, the best depth-1 total :math:`v^{+}(S)` of a row set, any leaf size allowed, can only fall
when rows join it: :math:`S \\subseteq S'` gives :math:`v^{+}(S') \\le v^{+}(S)`. A root split
after row :math:`i` of the root feature's order, with row :math:`i` in the root bin :math:`g`
(bins of the feature's sorted distinct values, about :math:`n/G` rows each), has children
:math:`L_{<g} \\subseteq L(i) \\subseteq L_{\\le g}` and :math:`R_{>g} \\subseteq R(i) \\subseteq
R_{\\ge g}`, so the best allowed depth-1 totals (leaves of at least ``min_samples_leaf`` rows)
satisfy :math:`v(L(i)) \\le v^{+}(L_{<g})` and :math:`v(R(i)) \\le v^{+}(R_{>g})`. From below,
a split of :math:`L_{\\le g}` (or :math:`R_{\\ge g}`) that keeps ``min_samples_leaf`` plus the
bin's row count on each side stays allowed, and does not fall, when the bin's rows leave, so
its total bounds :math:`v(L(i))` (:math:`v(R(i))`) for every :math:`i` in the bin.

On a child feature cut into :math:`B` bins, :math:`v^{+}(S)` is bounded above by letting the
rows of the bin that holds the threshold take their best arm (each adds at most 0):
:math:`\\max_{b}\\big(\\max_a P_a(<b) + \\max_c Q_c(>b)\\big)` with :math:`P`/:math:`Q` the
per-arm sums of :math:`\\Gamma'` over the set's rows in the bins before/after :math:`b`; it is
bounded below by the best split at a bin boundary with the leaf sizes above (a tree that
exists). The lower bounds of one root split at a bin boundary give an attained total
:math:`V_*`; a root bin whose upper bound :math:`\\max_l v^{+}_l(L_{<g}) + \\max_l
v^{+}_l(R_{>g})` is below :math:`V_*` holds no best root split, and a child feature whose upper
bound on a side is below another feature's lower bound cannot give that side's best split
(branch and bound, Land & Doig 1960). Nothing is approximated: the search returns the tree of the
search without bounds. How much is skipped depends on the data: with a clear best split nearly
all root bins and child features fall; with rewards that are pure noise fewer do, and the worst
case is the search without bounds plus the histograms.
"""

from __future__ import annotations

import numpy as np
from joblib import delayed
from numba import njit

#: Rows of the bounds arrays: upper bound of v(L_<g), upper bound of v(R_>g), lower bound of
#: v(L_<=g), lower bound of v(R_>=g), lower bound of v(R_>g).
UB_LEFT, UB_RIGHT, LB_LEFT, LB_RIGHT, LB_RIGHT_EXCL = range(5)


@njit(cache=True, error_model="numpy")
def _root_bin_bounds(F, min_leaf, out, ell, g, W):
    """The five bounds of root bin ``g`` and child feature ``ell`` into ``out[:, ell, g]``.

    ``F`` (K + 1, G + 1, B + 1): ``F[k, g, b]`` holds arm k's sum (k = K: the row count) over
    the rows in root bins < g and child bins < b. The child sets of the bin are L_<g (root bins
    [0, g)), L_<=g ([0, g + 1)), R_>=g ([g, G)) and R_>g ([g + 1, G)). For a set whose sums
    over child bins < b are :math:`H_k(b)`, the best arm total left of child boundary b is
    :math:`u(b) = \\max_k H_k(b)` and right of it :math:`v(b) = \\max_k (H_k(B) - H_k(b))`: a
    split at boundary b is worth :math:`u(b) + v(b)`, a split inside child bin b at most
    :math:`u(b) + v(b + 1)` (the bin's rows take their best arm, each adding at most 0), and the
    leaf :math:`u(B)`. ``W`` (8, B + 1) is work space: u and v of the four sets, filled one arm
    at a time along contiguous rows."""
    K, G, top = F.shape[0] - 1, F.shape[1] - 1, F.shape[2] - 1
    W[:] = -np.inf
    for k in range(K):
        first, before, after, last = F[k, 0], F[k, g], F[k, g + 1], F[k, G]
        t0, t1 = before[top] - first[top], after[top] - first[top]
        t2, t3 = last[top] - before[top], last[top] - after[top]
        for b in range(top + 1):
            h0, h1 = before[b] - first[b], after[b] - first[b]
            h2, h3 = last[b] - before[b], last[b] - after[b]
            W[0, b], W[1, b] = max(W[0, b], h0), max(W[1, b], h1)
            W[2, b], W[3, b] = max(W[2, b], h2), max(W[3, b], h3)
            W[4, b], W[5, b] = max(W[4, b], t0 - h0), max(W[5, b], t1 - h1)
            W[6, b], W[7, b] = max(W[6, b], t2 - h2), max(W[7, b], t3 - h3)
    first, before, after, last = F[K, 0], F[K, g], F[K, g + 1], F[K, G]
    rows_left, rows_right = after[top] - first[top], last[top] - before[top]
    rows_excl = last[top] - after[top]
    # L_<=g and R_>=g bound every child set of the bin from below only through splits that keep
    # min_leaf rows on each side after the bin's rows leave; R_>g is a child set itself.
    keep = min_leaf + after[top] - before[top]
    upper_left, upper_right = W[0, top], W[3, top]
    lower_left, lower_right, lower_excl = W[1, top], W[2, top], W[3, top]
    for b in range(top):
        upper_left = max(upper_left, W[0, b] + W[4, b + 1])
        upper_right = max(upper_right, W[3, b] + W[7, b + 1])
    for b in range(1, top + 1):
        rows = after[b] - first[b]
        if min(rows, rows_left - rows) >= keep:
            lower_left = max(lower_left, W[1, b] + W[5, b])
        rows = last[b] - before[b]
        if min(rows, rows_right - rows) >= keep:
            lower_right = max(lower_right, W[2, b] + W[6, b])
        rows = last[b] - after[b]
        if min(rows, rows_excl - rows) >= min_leaf:
            lower_excl = max(lower_excl, W[3, b] + W[7, b])
    out[UB_LEFT, ell, g] = upper_left
    out[LB_LEFT, ell, g] = lower_left
    out[LB_RIGHT, ell, g] = lower_right
    out[UB_RIGHT, ell, g] = upper_right
    out[LB_RIGHT_EXCL, ell, g] = lower_excl


@njit(cache=True, error_model="numpy")
def _pair_histogram(root_bin, child_bin, shifted, F):
    """Fill ``F`` (K + 1, G + 1, B + 1) with arm k's sum (k = K: the row count) over the rows in
    root bins < g and child bins < b at ``F[k, g, b]``: one plane per arm, so that the bounds
    read contiguous rows."""
    n, K = shifted.shape
    F[:] = 0.0
    for r in range(n):
        g, b = root_bin[r] + 1, child_bin[r] + 1
        for k in range(K):
            F[k, g, b] += shifted[r, k]
        F[K, g, b] += 1.0
    for k in range(K + 1):  # cumulative over the root bins, then the child bins
        for g in range(1, F.shape[1]):
            for b in range(F.shape[2]):
                F[k, g, b] += F[k, g - 1, b]
        for g in range(F.shape[1]):
            for b in range(1, F.shape[2]):
                F[k, g, b] += F[k, g, b - 1]


@njit(cache=True, error_model="numpy")
def _swap_roles(F, out):
    """``out[k, b, g] = F[k, g, b]``: the pair's histogram with root and child exchanged."""
    for k in range(F.shape[0]):
        for g in range(F.shape[1]):
            for b in range(F.shape[2]):
                out[k, b, g] = F[k, g, b]


@njit(cache=True, nogil=True, error_model="numpy")
def pair_bounds(j, bins, shifted, n_bins, min_leaf, children, roots):
    """Bounds of the feature pairs (j, l), l >= j, from one histogram per pair.

    ``bins`` (p, n) are the rows' bins (``n_bins`` per feature), ``shifted`` the (n, K) rewards
    minus their row maximum, ``children`` (p, p) whether root feature a needs child feature b,
    ``roots`` (p, n_bins) the root bins to bound. Returns ``mine`` (5, p, n_bins), the bounds of
    root feature j with each child feature l >= j, and ``theirs`` (5, p, n_bins), those of each
    root feature l > j with child feature j (at index l); -inf where nothing was asked. The
    histogram of a pair serves both roles: with root and child swapped it is its transpose
    (:func:`_swap_roles`)."""
    p, K = bins.shape[0], shifted.shape[1]
    mine = np.full((5, p, n_bins), -np.inf)
    theirs = np.full((5, p, n_bins), -np.inf)
    F = np.empty((K + 1, n_bins + 1, n_bins + 1))
    swapped = np.empty_like(F)
    W = np.empty((8, n_bins + 1))
    for ell in range(j, p):
        forward, backward = children[j, ell], ell > j and children[ell, j]
        if not (forward or backward):
            continue
        _pair_histogram(bins[j], bins[ell], shifted, F)
        if forward:
            for g in range(n_bins):
                if roots[j, g]:
                    _root_bin_bounds(F, min_leaf, mine, ell, g, W)
        if backward:
            _swap_roles(F, swapped)
            for g in range(n_bins):
                if roots[ell, g]:
                    _root_bin_bounds(swapped, min_leaf, theirs, ell, g, W)
    return mine, theirs


def bin_bounds(bins, shifted, n_bins, min_leaf, children, roots, parallel):
    """Bounds (5, p, n_bins) of every root feature that needs a child feature, by root feature
    (a dict), -inf where ``children`` (p, p) or ``roots`` (p, n_bins) ask nothing; each feature
    pair's histogram is built once (:func:`pair_bounds`, one call per feature in ``parallel``)."""
    p = bins.shape[0]
    todo = [j for j in range(p) if children[j, j:].any() or children[j + 1:, j].any()]
    blocks = parallel(delayed(pair_bounds)(j, bins, shifted, n_bins, min_leaf, children, roots)
                      for j in todo)
    bounds = {j: np.full((5, p, n_bins), -np.inf) for j in range(p) if children[j].any()}
    for j, (mine, theirs) in zip(todo, blocks, strict=True):
        if j in bounds:
            bounds[j][:, j:] = mine[:, j:]
        for ell in range(j + 1, p):
            if children[ell, j]:
                bounds[ell][:, j] = theirs[:, ell]
    return bounds


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
