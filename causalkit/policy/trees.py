"""Exact search for welfare-maximising policy trees of depth 1 or 2 on a score matrix.

Given rows :math:`X_r` and a reward matrix :math:`\\Gamma` (n, K), a policy tree assigns one arm
per leaf and its value is :math:`n^{-1}\\sum_r \\Gamma_{r,\\pi(X_r)}`. With the target-DR score
matrix of :meth:`causalkit.policy.TargetPolicyValue.score_matrix` this is the estimated *target*
value, so the tree found here is the best tree for the target population. Every split point
between distinct sorted values is searched, at the root and in both children (as
``policytree::policy_tree`` with ``split.step = 1``; Sverdrup et al. 2020, Athey & Wager 2021).

Depth 1 uses cumulative sums of :math:`\\Gamma` along each sorted feature. Depth 2 uses that the
best split of a row set :math:`S` on one feature has value

.. math::

    \\max_{a, b}\\Big(T_b(S) + \\max_t \\big[P_a(t) - P_b(t)\\big]\\Big),

where :math:`T_b(S)=\\sum_{r\\in S}\\Gamma_{rb}` and :math:`P_a(t)` is the sum of
:math:`\\Gamma_{ra}` over the rows of :math:`S` left of split point :math:`t` (:math:`a=b` is
the leaf; for two arms this is :math:`T_0+\\max(0, D, \\max_t d_t, D-\\min_t d_t)` with
:math:`d` the prefix sum of :math:`\\Gamma_{r1}-\\Gamma_{r0}`). As the root split point moves
one row at a time, each child gains one row (a forward pass builds the left children, a backward
pass the right ones); a segment tree over the child feature's sorted distinct values (leaves:
blocks of 8 consecutive values) keeps, for every arm pair, the sum, the maximum and the minimum
prefix sum of :math:`\\Gamma_a-\\Gamma_b` and the row count where each extreme is reached, so
that adding a row costs :math:`O(K^2\\log n)`. The root of the segment tree gives the best
split in :math:`O(K^2)` unless an extreme lies within ``min_samples_leaf`` rows of either end;
then an exact range query over the allowed split points, in :math:`O(K^2\\log n)`, is run
unless the unrestricted extreme (an upper bound) cannot beat the best child split already found
on another feature. The search is :math:`O(p^2 K^2 n\\log n)` time (:math:`2p^2 n` row
insertions: every root feature, every child feature, both children) and :math:`O(np + nK^2)`
memory for any number of arms; one compiled call per root feature runs the scans of all child
features (compiled with numba when it is installed, cached on disk so that a new process loads
rather than recompiles it; the same code runs interpreted, much slower, without numba), and the
root features are independent, so ``n_jobs`` threads search them side by side. Unlike a
greedy CART-like tree, which fixes the root split by an impurity criterion and then splits each
child once, this is the global optimum over all depth-2 trees: its work grows as
:math:`p^2 n\\log n` where a greedy fit's grows as :math:`p\\,n\\log n`.
"""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed

try:
    from numba import njit
except ImportError:  # pragma: no cover - same kernel, interpreted
    def njit(**_):
        return lambda f: f

__all__ = ["fit_policy_tree", "predict_tree", "export_text"]


def _rel_better(a, b):
    return a > b + 1e-12 * max(1.0, abs(b))


def _best_stump(X, gamma, min_leaf):
    """Best depth-1 tree (or leaf) on all rows of ``X``; returns (node, total reward)."""
    n = X.shape[0]
    total = gamma.sum(axis=0)
    best_val, best = float(total.max()), {"action": int(np.argmax(total))}
    count = np.arange(1, n)
    for j in range(X.shape[1]):
        o = np.argsort(X[:, j], kind="stable")
        xs = X[o, j]
        cum = np.cumsum(gamma[o], axis=0)[:-1]
        right = total - cum
        val = cum.max(axis=1) + right.max(axis=1)
        val[~((xs[:-1] < xs[1:]) & (count >= min_leaf) & (n - count >= min_leaf))] = -np.inf
        if val.size == 0:
            continue
        t = int(np.argmax(val))
        if _rel_better(val[t], best_val):
            best_val = float(val[t])
            best = {"feature": j, "threshold": float(0.5 * (xs[t] + xs[t + 1])),
                    "left": {"action": int(np.argmax(cum[t]))},
                    "right": {"action": int(np.argmax(right[t]))}}
    return best, best_val


#: Distinct values per leaf block of the segment tree (a speed constant: blocks are scanned
#: linearly, which keeps the tree small enough to stay in cache).
_BLOCK = 8

#: Each segment-tree node record is padded to a multiple of this many float64 values (a 64-byte
#: cache line), so that the two children of a node lie on adjacent lines.
_LINE = 8

# The child feature's distinct values ("groups", in sorted order) hold per-group records
# ``gs[g] = (rows, sum of Gamma_a - Gamma_b for each arm pair q = (a, b), a < b)``. Blocks of
# ``_BLOCK`` consecutive groups are the leaves of a segment tree ``T`` (block b: row ``size + b``;
# node v has children 2v and 2v + 1). A node record (one row of T) holds in column 0 the rows
# below the node and, for each pair q, five columns from 1 + 5q: the sum of Gamma_a - Gamma_b
# over the node's rows, the maximum prefix sum of Gamma_a - Gamma_b over the node's groups
# (prefix from its first group, inclusive), the rows up to that maximum, the minimum prefix sum
# and the rows up to it. The arm totals of all rows are kept outside the tree.


@njit(cache=True, error_model="numpy")
def _insert(group, g, gs, T, size, pa, pb):
    """Add a row with rewards ``g`` to ``group``, rescan its block and refresh the path to the
    root."""
    gs[group, 0] += 1.0
    for q in range(pa.size):
        gs[group, 1 + q] += g[pa[q]] - g[pb[q]]
    blk = group // _BLOCK
    leaf = size + blk
    T[leaf, :] = 0.0
    for q in range(pa.size):
        T[leaf, 2 + 5 * q] = -np.inf
        T[leaf, 4 + 5 * q] = np.inf
    for h in range(blk * _BLOCK, (blk + 1) * _BLOCK):
        T[leaf, 0] += gs[h, 0]
        for q in range(pa.size):
            c = 1 + 5 * q
            d = T[leaf, c] + gs[h, 1 + q]
            T[leaf, c] = d
            if d > T[leaf, c + 1]:
                T[leaf, c + 1], T[leaf, c + 2] = d, T[leaf, 0]
            if d < T[leaf, c + 3]:
                T[leaf, c + 3], T[leaf, c + 4] = d, T[leaf, 0]
    node = leaf >> 1
    while node >= 1:
        L, R = 2 * node, 2 * node + 1
        T[node, 0] = T[L, 0] + T[R, 0]
        for q in range(pa.size):
            c = 1 + 5 * q
            dl = T[L, c]
            T[node, c] = dl + T[R, c]
            lv, rv = T[L, c + 1], dl + T[R, c + 1]
            lr, rr = T[L, c + 2], T[L, 0] + T[R, c + 2]
            keep = lv >= rv
            T[node, c + 1] = lv if keep else rv
            T[node, c + 2] = lr if keep else rr
            lv, rv = T[L, c + 3], dl + T[R, c + 3]
            lr, rr = T[L, c + 4], T[L, 0] + T[R, c + 4]
            keep = lv <= rv
            T[node, c + 3] = lv if keep else rv
            T[node, c + 4] = lr if keep else rr
        node >>= 1


@njit(cache=True, error_model="numpy")
def _kth(gs, T, size, k):
    """Group holding the k-th present row (1-based) in sorted order."""
    node = 1
    while node < size:
        if T[2 * node, 0] >= k:
            node = 2 * node
        else:
            k -= T[2 * node, 0]
            node = 2 * node + 1
    g = (node - size) * _BLOCK
    while gs[g, 0] < k:
        k -= gs[g, 0]
        g += 1
    return g


@njit(cache=True, error_model="numpy")
def _absorb_group(gs, g, off, hi_mx, lo_mn):
    """Extend running prefix sums ``off`` and the extremes seen so far by group ``g``."""
    for q in range(off.size):
        off[q] += gs[g, 1 + q]
        hi_mx[q] = max(hi_mx[q], off[q])
        lo_mn[q] = min(lo_mn[q], off[q])


@njit(cache=True, error_model="numpy")
def _absorb(T, v, off, hi_mx, lo_mn):
    """Extend running prefix sums ``off`` and the extremes seen so far by node ``v``."""
    for q in range(off.size):
        c = 1 + 5 * q
        hi_mx[q] = max(hi_mx[q], off[q] + T[v, c + 1])
        lo_mn[q] = min(lo_mn[q], off[q] + T[v, c + 3])
        off[q] += T[v, c]


@njit(cache=True, error_model="numpy")
def _stump_value(gs, T, size, tot, min_leaf, bar, pa, pb, off, hi_mx, lo_mn, stack):
    """Best depth-1 total reward of the rows in the tree (arm totals ``tot``; leaf or any
    allowed split), or any value not above ``bar`` when the best is not above ``bar``."""
    P = pa.size
    m = T[1, 0]
    best = tot.max()
    # The extreme prefix sums over all groups decide unless one sits strictly inside the first
    # or last ``min_leaf - 1`` rows (a prefix over 0 or all m rows is a leaf value); in any case
    # they bound the best allowed split from above.
    direct, decided = best, True
    for q in range(P):
        c = 1 + 5 * q
        for rows in (T[1, c + 2], T[1, c + 4]):
            decided &= not (0 < rows < m and (rows < min_leaf or rows > m - min_leaf))
        direct = max(direct, tot[pb[q]] + T[1, c + 1], tot[pa[q]] - T[1, c + 3])
    if decided or direct <= bar:
        return direct
    if m < 2 * min_leaf:
        return best
    lo = _kth(gs, T, size, min_leaf)
    hi = _kth(gs, T, size, m - min_leaf + 1) - 1
    if lo > hi:
        return best
    blo, bhi = lo // _BLOCK, hi // _BLOCK
    off[:] = 0.0  # sums of the groups before lo
    node, a, b = 1, 0, size
    while node < size:
        mid = (a + b) // 2
        if blo >= mid:
            for q in range(P):
                off[q] += T[2 * node, 1 + 5 * q]
            node, a = 2 * node + 1, mid
        else:
            node, b = 2 * node, mid
    for g in range(blo * _BLOCK, lo):
        for q in range(P):
            off[q] += gs[g, 1 + q]
    hi_mx[:] = -np.inf
    lo_mn[:] = np.inf
    for g in range(lo, min(hi + 1, (blo + 1) * _BLOCK)):
        _absorb_group(gs, g, off, hi_mx, lo_mn)
    if bhi > blo:
        ns = 0
        l, r = blo + 1 + size, bhi + size
        while l < r:  # canonical nodes of blocks blo+1 .. bhi-1, absorbed left to right
            if l & 1:
                _absorb(T, l, off, hi_mx, lo_mn)
                l += 1
            if r & 1:
                r -= 1
                stack[ns] = r
                ns += 1
            l >>= 1
            r >>= 1
        for t in range(ns - 1, -1, -1):
            _absorb(T, stack[t], off, hi_mx, lo_mn)
        for g in range(bhi * _BLOCK, hi + 1):
            _absorb_group(gs, g, off, hi_mx, lo_mn)
    for q in range(P):
        best = max(best, tot[pb[q]] + hi_mx[q], tot[pa[q]] - lo_mn[q])
    return best


@njit(cache=True, nogil=True, error_model="numpy")
def _scan_children(group, n_groups, gamma, cut, min_leaf, pa, pb, left, right):
    """Raise ``left[i]`` / ``right[i]`` to the best depth-1 reward of the left / right child
    of every allowed root split point i (rows ``0..i`` of the root order on the left) over
    splits on every child feature. ``gamma`` is in root order and ``group[j, i]`` is the rank of
    row i's value among the distinct values of child feature j (``n_groups[j]`` of them)."""
    n, K = gamma.shape
    P = pa.size
    width = -(-(1 + 5 * P) // _LINE) * _LINE
    tot, off, hi_mx, lo_mn = np.empty(K), np.empty(P), np.empty(P), np.empty(P)
    stack = np.empty(64, dtype=np.int64)
    for j in range(group.shape[0]):
        size = 1
        while size * _BLOCK < n_groups[j]:
            size *= 2
        for side in range(2):
            gs = np.zeros((size * _BLOCK, 1 + P))
            T = np.zeros((2 * size, width))
            tot[:] = 0.0
            for step in range(n):
                i = step if side == 0 else n - 1 - step
                _insert(group[j, i], gamma[i], gs, T, size, pa, pb)
                for k in range(K):
                    tot[k] += gamma[i, k]
                if side == 0 and cut[i]:
                    left[i] = max(left[i], _stump_value(gs, T, size, tot, min_leaf, left[i], pa, pb,
                                                        off, hi_mx, lo_mn, stack))
                elif side == 1 and i > 0 and cut[i - 1]:
                    right[i - 1] = max(right[i - 1], _stump_value(gs, T, size, tot, min_leaf,
                                                                  right[i - 1], pa, pb, off,
                                                                  hi_mx, lo_mn, stack))


def _best_root_split(j, X, gamma, group, n_groups, min_leaf, pa, pb):
    """Best split of the root on feature ``j``: (feature, threshold, total reward) or None."""
    n = X.shape[0]
    order = np.argsort(X[:, j], kind="stable")
    xs = X[order, j]
    sizes = np.arange(1, n)
    cut = np.zeros(n, dtype=np.bool_)
    cut[:-1] = (xs[:-1] < xs[1:]) & (sizes >= min_leaf) & (n - sizes >= min_leaf)
    if not cut.any():
        return None
    left, right = np.full(n, -np.inf), np.full(n, -np.inf)
    _scan_children(np.ascontiguousarray(group[:, order]), n_groups,
                   np.ascontiguousarray(gamma[order]), cut, min_leaf, pa, pb, left, right)
    total = np.where(cut, left + right, -np.inf)
    i = int(np.argmax(total))
    return j, float(0.5 * (xs[i] + xs[i + 1])), float(total[i])


def _best_depth2(X, gamma, min_leaf, n_jobs=None):
    """Best root split (feature, threshold, total reward) over every split point, or None.
    The root features are searched in ``n_jobs`` threads (the compiled scan releases the GIL);
    their results are compared in feature order, so the tree does not depend on ``n_jobs``."""
    n, p = X.shape
    K = gamma.shape[1]
    pa, pb = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(K, 1))
    group = np.empty((p, n), dtype=np.int64)
    n_groups = np.empty(p, dtype=np.int64)
    for j in range(p):
        values, inverse = np.unique(X[:, j], return_inverse=True)
        group[j], n_groups[j] = inverse.ravel(), values.size
    splits = Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(_best_root_split)(j, X, gamma, group, n_groups, min_leaf, pa, pb)
        for j in range(p))
    best = None
    for split in splits:
        if split is not None and (best is None or _rel_better(split[2], best[2])):
            best = split
    return best


def fit_policy_tree(X, gamma, *, depth=2, min_samples_leaf=5, n_jobs=None):
    """Best tree of the given depth for the reward matrix ``gamma`` (exact search).

    Parameters
    ----------
    X : ndarray of shape (n, p)
    gamma : ndarray of shape (n, K)
        Reward of each arm for each row; the tree maximises the sum of the chosen entries.
    depth : {1, 2}
    min_samples_leaf : int
        Minimum rows in every leaf.
    n_jobs : int or None
        Threads for the depth-2 search, one root feature at a time (joblib's convention: None
        is 1 unless a ``joblib.parallel_config`` says otherwise, -1 is every core). The tree is
        the same for any value.

    Returns
    -------
    (tree, value) : dict, float
        The tree (nested dicts with ``feature``/``threshold``/``left``/``right`` or ``action``)
        and its mean reward :math:`n^{-1}\\sum_r \\Gamma_{r,\\pi(X_r)}`. A split is kept only
        when it strictly improves on the shallower tree; thresholds are midpoints between
        consecutive distinct values.
    """
    if depth not in (1, 2):
        raise ValueError(f"depth must be 1 or 2; got {depth!r}")
    X = np.ascontiguousarray(X, dtype=float)
    gamma = np.ascontiguousarray(gamma, dtype=float)
    n = X.shape[0]
    tree, value = _best_stump(X, gamma, min_samples_leaf)
    if depth == 2:
        root = _best_depth2(X, gamma, min_samples_leaf, n_jobs)
        if root is not None and _rel_better(root[2], value):
            j, threshold, _ = root
            go_left = X[:, j] <= threshold
            left, v_left = _best_stump(X[go_left], gamma[go_left], min_samples_leaf)
            right, v_right = _best_stump(X[~go_left], gamma[~go_left], min_samples_leaf)
            tree = {"feature": j, "threshold": threshold, "left": left, "right": right}
            value = v_left + v_right
    return tree, float(value / n)


def predict_tree(tree, X):
    """Arm index (0..K-1) chosen by ``tree`` for each row of ``X``."""
    X = np.asarray(X, dtype=float)
    out = np.empty(X.shape[0], dtype=int)

    def visit(node, rows):
        if "action" in node:
            out[rows] = node["action"]
            return
        go_left = X[rows, node["feature"]] <= node["threshold"]
        visit(node["left"], rows[go_left])
        visit(node["right"], rows[~go_left])

    visit(tree, np.arange(X.shape[0]))
    return out


def export_text(tree, feature_names, arm_names, *, decimals=3):
    """Indented text rendering of ``tree`` (one line per node, as ``sklearn.tree.export_text``).

    Parameters
    ----------
    tree : dict
        A tree from :func:`fit_policy_tree`.
    feature_names : sequence of str
        Name of each column of ``X``.
    arm_names : sequence
        Label of each arm (index ``action``).
    decimals : int
        Digits of the thresholds.
    """
    lines = []

    def visit(node, indent):
        if "action" in node:
            lines.append(f"{'|   ' * indent}|--- treat: {arm_names[node['action']]}")
            return
        name, thr = feature_names[node["feature"]], round(node["threshold"], decimals)
        lines.append(f"{'|   ' * indent}|--- {name} <= {thr}")
        visit(node["left"], indent + 1)
        lines.append(f"{'|   ' * indent}|--- {name} >  {thr}")
        visit(node["right"], indent + 1)

    visit(tree, 0)
    return "\n".join(lines)
