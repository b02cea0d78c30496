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
blocks of 8 consecutive values) keeps, for every arm pair, the maximum and minimum prefix sum of
:math:`\\Gamma_a-\\Gamma_b` and the row count where each is reached. The root of the segment
tree gives the best split in :math:`O(K^2)` unless an extreme lies within ``min_samples_leaf``
rows of either end; then an exact range query over the allowed split points, in
:math:`O(K^2\\log n)`, is run unless the unrestricted extreme (an upper bound) cannot beat the
best child split already found on another feature. The search is :math:`O(p^2 K^2 n\\log n)`
time and :math:`O(np + nK^2)` memory for any number of arms (compiled with numba when it is
installed; the same code runs interpreted, much slower, without it).
"""

from __future__ import annotations

import numpy as np

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

# The child feature's distinct values ("groups", in sorted order) hold per-group records
# ``gs[g] = (rows, reward sum per arm)``. Blocks of ``_BLOCK`` consecutive groups are the leaves
# of a segment tree ``T`` whose node record (one row) is: column 0 the rows below the node,
# columns 1..K the reward sums per arm, then for each arm pair q = (a, b), a < b, four blocks of
# P columns: the maximum prefix sum of Gamma_a - Gamma_b over the node's groups (prefix from its
# first group, inclusive), the rows up to that maximum, the minimum prefix sum and the rows up
# to it.


@njit(cache=True, error_model="numpy")
def _scan_block(b, gs, T, size, pa, pb):
    """Recompute the leaf record of block ``b`` from its groups."""
    K, P = gs.shape[1] - 1, pa.size
    node = size + b
    T[node, :] = 0.0
    for q in range(P):
        T[node, 1 + K + q] = -np.inf
        T[node, 1 + K + 2 * P + q] = np.inf
    for g in range(b * _BLOCK, min(gs.shape[0], (b + 1) * _BLOCK)):
        for k in range(K + 1):
            T[node, k] += gs[g, k]
        for q in range(P):
            d = T[node, 1 + pa[q]] - T[node, 1 + pb[q]]
            if d > T[node, 1 + K + q]:
                T[node, 1 + K + q], T[node, 1 + K + P + q] = d, T[node, 0]
            if d < T[node, 1 + K + 2 * P + q]:
                T[node, 1 + K + 2 * P + q], T[node, 1 + K + 3 * P + q] = d, T[node, 0]


@njit(cache=True, error_model="numpy")
def _insert(group, g, gs, T, size, pa, pb):
    """Add a row with rewards ``g`` to ``group`` and refresh its block's path to the root."""
    K, P = g.size, pa.size
    gs[group, 0] += 1.0
    for k in range(K):
        gs[group, 1 + k] += g[k]
    node = group // _BLOCK
    _scan_block(node, gs, T, size, pa, pb)
    node = (node + size) >> 1
    while node >= 1:
        L, R = 2 * node, 2 * node + 1
        for k in range(K + 1):
            T[node, k] = T[L, k] + T[R, k]
        for q in range(P):
            dl = T[L, 1 + pa[q]] - T[L, 1 + pb[q]]
            c = 1 + K + q
            right = dl + T[R, c]
            if T[L, c] >= right:
                T[node, c], T[node, c + P] = T[L, c], T[L, c + P]
            else:
                T[node, c], T[node, c + P] = right, T[L, 0] + T[R, c + P]
            c += 2 * P
            right = dl + T[R, c]
            if T[L, c] <= right:
                T[node, c], T[node, c + P] = T[L, c], T[L, c + P]
            else:
                T[node, c], T[node, c + P] = right, T[L, 0] + T[R, c + P]
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
def _absorb_group(gs, g, pa, pb, off, hi_mx, lo_mn):
    for k in range(off.size):
        off[k] += gs[g, 1 + k]
    for q in range(pa.size):
        d = off[pa[q]] - off[pb[q]]
        hi_mx[q] = max(hi_mx[q], d)
        lo_mn[q] = min(lo_mn[q], d)


@njit(cache=True, error_model="numpy")
def _absorb_node(T, v, pa, pb, off, hi_mx, lo_mn):
    K, P = off.size, pa.size
    for q in range(P):
        base = off[pa[q]] - off[pb[q]]
        hi_mx[q] = max(hi_mx[q], base + T[v, 1 + K + q])
        lo_mn[q] = min(lo_mn[q], base + T[v, 1 + K + 2 * P + q])
    for k in range(K):
        off[k] += T[v, 1 + k]


@njit(cache=True, error_model="numpy")
def _stump_value(gs, T, size, min_leaf, bar, pa, pb, off, hi_mx, lo_mn, stack):
    """Best depth-1 total reward of the rows in the tree (leaf or any allowed split), or any
    value not above ``bar`` when the best is not above ``bar``."""
    K, P = off.size, pa.size
    m = T[1, 0]
    best = T[1, 1]
    for k in range(1, K):
        best = max(best, T[1, 1 + k])
    # The extreme prefix sums over all groups decide unless one sits strictly inside the first
    # or last ``min_leaf - 1`` rows (a prefix over 0 or all m rows is a leaf value); in any case
    # they bound the best allowed split from above.
    direct, decided = best, True
    for q in range(P):
        for c in (1 + K + q, 1 + K + 2 * P + q):
            rows = T[1, c + P]
            decided &= not (0 < rows < m and (rows < min_leaf or rows > m - min_leaf))
        direct = max(direct, T[1, 1 + pb[q]] + T[1, 1 + K + q],
                     T[1, 1 + pa[q]] - T[1, 1 + K + 2 * P + q])
    if decided or direct <= bar:
        return direct
    if m < 2 * min_leaf:
        return best
    lo = _kth(gs, T, size, min_leaf)
    hi = _kth(gs, T, size, m - min_leaf + 1) - 1
    if lo > hi:
        return best
    blo, bhi = lo // _BLOCK, hi // _BLOCK
    off[:] = 0.0  # reward sums before group lo
    node, a, b = 1, 0, size
    while node < size:
        mid = (a + b) // 2
        if blo >= mid:
            for k in range(K):
                off[k] += T[2 * node, 1 + k]
            node, a = 2 * node + 1, mid
        else:
            node, b = 2 * node, mid
    for g in range(blo * _BLOCK, lo):
        for k in range(K):
            off[k] += gs[g, 1 + k]
    hi_mx[:] = -np.inf
    lo_mn[:] = np.inf
    for g in range(lo, min(hi + 1, (blo + 1) * _BLOCK)):
        _absorb_group(gs, g, pa, pb, off, hi_mx, lo_mn)
    if bhi > blo:
        ns = 0
        l, r = blo + 1 + size, bhi + size
        while l < r:  # canonical nodes of blocks blo+1 .. bhi-1, absorbed left to right
            if l & 1:
                _absorb_node(T, l, pa, pb, off, hi_mx, lo_mn)
                l += 1
            if r & 1:
                r -= 1
                stack[ns] = r
                ns += 1
            l //= 2
            r //= 2
        for t in range(ns - 1, -1, -1):
            _absorb_node(T, stack[t], pa, pb, off, hi_mx, lo_mn)
        for g in range(bhi * _BLOCK, hi + 1):
            _absorb_group(gs, g, pa, pb, off, hi_mx, lo_mn)
    for q in range(P):
        best = max(best, T[1, 1 + pb[q]] + hi_mx[q], T[1, 1 + pa[q]] - lo_mn[q])
    return best


@njit(cache=True, error_model="numpy")
def _scan_children(group, gamma, n_groups, cut, min_leaf, pa, pb, left, right):
    """Raise ``left[i]`` / ``right[i]`` to the best depth-1 reward of the left / right child
    of every allowed root split point i (rows ``0..i`` of the root order on the left) using
    splits on one child feature. ``group`` and ``gamma`` are in root order; ``group`` is each
    row's rank among the child feature's distinct values."""
    n, K = gamma.shape
    size = 1
    while size * _BLOCK < n_groups:
        size *= 2
    off, hi_mx, lo_mn = np.empty(K), np.empty(pa.size), np.empty(pa.size)
    stack = np.empty(64, dtype=np.int64)
    for side in range(2):
        gs = np.zeros((n_groups, 1 + K))
        T = np.zeros((2 * size, 1 + K + 4 * pa.size))
        for step in range(n):
            i = step if side == 0 else n - 1 - step
            _insert(group[i], gamma[i], gs, T, size, pa, pb)
            if side == 0 and cut[i]:
                left[i] = max(left[i], _stump_value(gs, T, size, min_leaf, left[i], pa, pb, off,
                                                    hi_mx, lo_mn, stack))
            elif side == 1 and i > 0 and cut[i - 1]:
                right[i - 1] = max(right[i - 1], _stump_value(gs, T, size, min_leaf, right[i - 1],
                                                              pa, pb, off, hi_mx, lo_mn, stack))


def _best_depth2(X, gamma, min_leaf):
    """Best root split (feature, threshold, total reward) over every split point, or None."""
    n, p = X.shape
    K = gamma.shape[1]
    pa, pb = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(K, 1))
    groups = [np.unique(X[:, j], return_inverse=True) for j in range(p)]
    group = [inv.astype(np.int64).ravel() for _, inv in groups]
    sizes = np.arange(1, n + 1)
    best = None
    for j in range(p):
        order = np.argsort(X[:, j], kind="stable").astype(np.int64)
        xs = X[order, j]
        cut = np.zeros(n, dtype=np.bool_)
        cut[:-1] = (xs[:-1] < xs[1:]) & (sizes[:-1] >= min_leaf) & (n - sizes[:-1] >= min_leaf)
        if not cut.any():
            continue
        left, right = np.full(n, -np.inf), np.full(n, -np.inf)
        g_sorted = np.ascontiguousarray(gamma[order])
        for j2 in range(p):
            _scan_children(group[j2][order], g_sorted, groups[j2][0].size, cut, min_leaf, pa,
                           pb, left, right)
        total = np.where(cut, left + right, -np.inf)
        i = int(np.argmax(total))
        if best is None or _rel_better(total[i], best[2]):
            best = (j, float(0.5 * (xs[i] + xs[i + 1])), float(total[i]))
    return best


def fit_policy_tree(X, gamma, *, depth=2, min_samples_leaf=5):
    """Best tree of the given depth for the reward matrix ``gamma`` (exact search).

    Parameters
    ----------
    X : ndarray of shape (n, p)
    gamma : ndarray of shape (n, K)
        Reward of each arm for each row; the tree maximises the sum of the chosen entries.
    depth : {1, 2}
    min_samples_leaf : int
        Minimum rows in every leaf.

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
        root = _best_depth2(X, gamma, min_samples_leaf)
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
