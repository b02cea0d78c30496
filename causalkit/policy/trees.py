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
one row at a time, each child gains one row, and a segment tree over each child feature's sorted
distinct values gives the child's best split after each row
(:mod:`causalkit.policy._segment_tree`, :math:`O(K^2\\log n)` per row). Without bounds the
search makes :math:`2p^2 n` row insertions (every root feature, every child feature, both
children): :math:`O(p^2 K^2 n\\log n)` time.

Branch and bound (:mod:`causalkit.policy._tree_bounds`) cuts that work without changing the
result: two rounds of per-bin histograms (``_COARSE_BINS``, then ``_FINE_BINS`` bins per
feature, :math:`O(p^2 n)`; one two-way histogram per feature pair serves both as root and child,
since swapping the roles transposes it) bound every child of every root bin from above and
below, and the segment-tree scan then runs only over the root bins whose upper bound reaches a
tree already attained, and for each child only over the child features whose upper bound reaches
another feature's lower bound there. Rows far from the next needed split point only update their
group's record; the tree is rebuilt before the next query. How much is left depends on the data:
on the benchmark design (``benchmarks/policy.py``, which prints the share of insertions left;
two features carry the effect) nearly all of it falls, and the worst case is the search without
bounds plus the histograms. Memory is :math:`O(np + nK^2)` plus one fine histogram per thread
and the bounds, :math:`O(p^2)` per bin. One compiled call per root feature runs the scans of its
child features (numba, cached on disk so that a new process loads rather than recompiles it),
and the root features are independent, so ``n_jobs`` threads search them side by side. Unlike a
greedy CART-like tree, which fixes the root split by an impurity criterion and then splits each
child once, this is the global optimum over all depth-2 trees.
"""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed
from numba import njit

from causalkit.policy._segment_tree import scan_children
from causalkit.policy._tree_bounds import attained_total, bin_bounds, needed

__all__ = ["fit_policy_tree", "predict_tree", "export_text", "sort_orders", "subset_orders"]


def _rel_better(a, b):
    return a > b + 1e-12 * max(1.0, abs(b))


@njit(cache=True, nogil=True, error_model="numpy")
def _stump_scan(x, gamma, order, total, min_leaf):
    """Best split of the rows ``order`` (sorted by ``x``) whose arm totals are ``total``:
    (last left position or -1, total reward, left arm, right arm); the first best is kept."""
    n, K = order.size, gamma.shape[1]
    cum = np.zeros(K)
    best, best_t, best_a, best_b = -np.inf, -1, 0, 0
    for t in range(n - 1):
        r = order[t]
        for k in range(K):
            cum[k] += gamma[r, k]
        if x[r] < x[order[t + 1]] and t + 1 >= min_leaf and n - t - 1 >= min_leaf:
            a, b = 0, 0
            for k in range(1, K):
                if cum[k] > cum[a]:
                    a = k
                if total[k] - cum[k] > total[b] - cum[b]:
                    b = k
            value = cum[a] + (total[b] - cum[b])
            if value > best:
                best, best_t, best_a, best_b = value, t, a, b
    return best_t, best, best_a, best_b


def _best_stump(X, gamma, rows, orders, min_leaf, parallel, features=None):
    """Best depth-1 tree (or leaf) on the rows ``rows`` of ``X`` over splits on ``features``
    (default: every column), given the same rows sorted by each of them (``orders``, one row
    per feature; the features are scanned by ``parallel``); returns (node, total reward)."""
    features = range(X.shape[1]) if features is None else features
    total = gamma[rows].sum(axis=0)
    best_val, best = float(total.max()), {"action": int(np.argmax(total))}
    scans = parallel(delayed(_stump_scan)(X[:, j], gamma, order, total, min_leaf)
                     for j, order in zip(features, orders, strict=True))
    for j, order, (t, value, a, b) in zip(features, orders, scans, strict=True):
        if t >= 0 and _rel_better(value, best_val):
            best_val = float(value)
            best = {"feature": int(j),
                    "threshold": float(0.5 * (X[order[t], j] + X[order[t + 1], j])),
                    "left": {"action": int(a)}, "right": {"action": int(b)}}
    return best, best_val


def _sort_order(x):
    """Rows sorted by ``x``, ties in row order."""
    o = np.argsort(x, kind="quicksort")
    xs = x[o]
    return o if not np.any(xs[1:] == xs[:-1]) else np.argsort(x, kind="stable")


def sort_orders(X):
    """Rows of ``X`` sorted by each column, ties in row order: (p, n) (the ``orders`` of
    :func:`fit_policy_tree`). One column after another: threads made the sorts slower
    (``np.argsort`` of 100,000 rows by 10 columns, 2 cores)."""
    X = np.asfortranarray(X)
    return np.array([_sort_order(X[:, j]) for j in range(X.shape[1])],
                    dtype=np.int64).reshape(X.shape[1], X.shape[0])


def subset_orders(orders, rows):
    """The :func:`sort_orders` of ``X[rows]`` read from those of ``X`` (``orders``), without
    sorting again: ``rows`` must be increasing, so that ties stay in row order."""
    rows = np.asarray(rows)
    if rows.ndim != 1 or np.any(np.diff(rows) <= 0):
        raise ValueError("rows must be a 1-d array of increasing row indices")
    if rows.size == orders.shape[1]:  # increasing and as many as the rows: every row
        return orders
    return _subset_orders(orders, rows.astype(np.int64))


@njit(cache=True, nogil=True)
def _subset_orders(orders, rows):
    """Each feature's order with the rows not in ``rows`` left out, as indices into ``rows``."""
    p, n = orders.shape
    local = np.full(n, -1, dtype=np.int64)
    for i in range(rows.size):
        local[rows[i]] = i
    out = np.empty((p, rows.size), dtype=np.int64)
    for j in range(p):
        c = 0
        for t in range(n):
            i = local[orders[j, t]]
            if i >= 0:
                out[j, c] = i
                c += 1
    return out


def _best_root_split(j, X, gamma, order, group, n_groups, min_leaf, pa, pb, bins, alive, need):
    """Best split of the root on feature ``j`` (rows sorted by it: ``order``): (feature,
    threshold, total reward, child features) or None. Only split points in the root bins
    ``alive`` (``bins``: each row's bin of feature j) are searched, each child over the child
    features ``need`` (2, p, bins) names. The child features returned are those that ``need``
    keeps at the best split's bin (a tuple of the left and right child's feature indices): they
    hold each child's best split."""
    if not alive.any():
        return None
    n = X.shape[0]
    xs = X[order, j]
    position_bin = bins[order]
    sizes = np.arange(1, n)
    cut = np.zeros(n, dtype=np.bool_)
    cut[:-1] = (xs[:-1] < xs[1:]) & (sizes >= min_leaf) & (n - sizes >= min_leaf)
    cut &= alive[position_bin]
    if not cut.any():
        return None
    left, right = np.full(n, -np.inf), np.full(n, -np.inf)
    children = np.flatnonzero(need.any(axis=(0, 2)))   # only these are gathered and scanned
    scan_children(group[children[:, None], order], n_groups[children],
                  np.ascontiguousarray(gamma[order]), cut, min_leaf, pa, pb,
                  need[:, children][:, :, position_bin], left, right)
    total = np.where(cut, left + right, -np.inf)
    i = int(np.argmax(total))
    if total[i] == -np.inf:
        return None
    sides = need[:, :, position_bin[i]]
    return (j, float(0.5 * (xs[i] + xs[i + 1])), float(total[i]),
            (tuple(np.flatnonzero(sides[0]).tolist()), tuple(np.flatnonzero(sides[1]).tolist())))


#: Bins per feature of the two rounds of bounds (:mod:`causalkit.policy._tree_bounds`): every
#: (root, child) feature pair at the coarse size, then the pairs still needed at the fine size
#: (a multiple of the coarse). Speed constants: any sizes give the same tree. Chosen on the
#: benchmark design's seed 1 (``benchmarks/policy.py`` times seed 0) and on pure-noise rewards.
_COARSE_BINS, _FINE_BINS = 64, 256


def _prune(start, shifted, min_leaf, tol, parallel):
    """Root bins (per root feature, at the fine size) that may hold the best root split, and the
    child features each side needs there: two rounds of :func:`bin_bounds`, the second over
    what the first leaves. Returns the rows' fine bins (p, n), and per root feature the alive
    bins (fine,) and the needed child features (2, p, fine).

    ``start`` (p, n) is each row's rank of the first row with its value of each feature."""
    p, n = start.shape
    candidates = [np.ones((2, p, _COARSE_BINS), dtype=bool) for _ in range(p)]
    best = -np.inf
    for n_bins in (_COARSE_BINS, _FINE_BINS):
        candidates = [np.repeat(c, n_bins // c.shape[2], axis=2) for c in candidates]
        bins = (start * n_bins // n).astype(np.uint16)
        children = np.array([c.any(axis=(0, 2)) for c in candidates])
        roots = np.array([c.any(axis=(0, 1)) for c in candidates])
        bounds = bin_bounds(bins, shifted, n_bins, min_leaf, children, roots, parallel)
        for j in bounds:
            rows_up_to = np.cumsum(np.bincount(bins[j], minlength=n_bins))
            best = max(best, attained_total(bounds[j], rows_up_to, n, min_leaf))
        nothing = np.full((5, p, n_bins), -np.inf)
        alive, candidates = map(list, zip(*(needed(bounds.get(j, nothing), candidates[j], best,
                                                   tol) for j in range(p)), strict=True))
    return bins, alive, candidates


@njit(cache=True, nogil=True, error_model="numpy")
def _value_groups(X, orders):
    """Per feature and row: the rank of the row's value among the feature's distinct values
    (``group``), the sorted position of the first row with that value (``start``), and the number
    of distinct values (``n_groups``)."""
    p, n = orders.shape
    group = np.empty((p, n), dtype=np.int64)
    start = np.empty((p, n), dtype=np.int64)
    n_groups = np.empty(p, dtype=np.int64)
    for j in range(p):
        g, first, previous = -1, 0, 0.0
        for t in range(n):
            r = orders[j, t]
            if t == 0 or X[r, j] > previous:
                g, first, previous = g + 1, t, X[r, j]
            group[j, r] = g
            start[j, r] = first
        n_groups[j] = g + 1
    return group, start, n_groups


def _prune_tolerance(shifted):
    """Rounding allowance of the bounds: far above the error of sums over the rows."""
    return 1e-9 * (np.abs(shifted).sum() + 1.0)


def _best_depth2(X, gamma, orders, min_leaf, parallel=None):
    """Best root split (feature, threshold, total reward, child features: see
    :func:`_best_root_split`) over every split point, or None.
    Bounds (:mod:`causalkit.policy._tree_bounds`) first rule out root bins and child features
    that cannot hold the best tree; the root features are then searched by ``parallel`` (joblib
    threads: the compiled scan releases the GIL) and compared in feature order, so the tree
    does not depend on the thread count."""
    p = X.shape[1]
    pa, pb = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(gamma.shape[1], 1))
    group, start, n_groups = _value_groups(X, orders)
    shifted = gamma - gamma.max(axis=1, keepdims=True)
    parallel = Parallel(n_jobs=1) if parallel is None else parallel
    bins, alive, need = _prune(start, shifted, min_leaf, _prune_tolerance(shifted), parallel)
    splits = parallel(
        delayed(_best_root_split)(j, X, gamma, orders[j], group, n_groups, min_leaf, pa, pb,
                                  bins[j], alive[j], need[j])
        for j in range(p))
    best = None
    for split in splits:
        if split is not None and (best is None or _rel_better(split[2], best[2])):
            best = split
    return best


def fit_policy_tree(X, gamma, *, depth=2, min_samples_leaf=5, n_jobs=None, orders=None):
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
        Threads of the search: the depth-1 scans, the bounds and the depth-2 scans run one
        feature per thread (joblib's convention: None is 1 unless a
        ``joblib.parallel_config`` says otherwise, -1 is every core). The tree is the same for
        any value.
    orders : ndarray of shape (p, n), optional
        The rows of ``X`` sorted by each column, ties in row order (:func:`sort_orders`, or
        :func:`subset_orders` when ``X`` holds rows of a matrix already sorted, as the held-out
        folds of a learner do); sorted here when None.

    Returns
    -------
    (tree, value) : dict, float
        The tree (nested dicts with ``feature``/``threshold``/``left``/``right`` or ``action``)
        and its mean reward :math:`n^{-1}\\sum_r \\Gamma_{r,\\pi(X_r)}`. A split is kept only
        when it strictly improves on the shallower tree; thresholds are midpoints between
        consecutive distinct values. The children of a depth-2 root are split over the child
        features that the bounds keep at the root split (every other feature's best split
        there is below one of theirs, :mod:`causalkit.policy._tree_bounds`).
    """
    if depth not in (1, 2):
        raise ValueError(f"depth must be 1 or 2; got {depth!r}")
    X = np.asfortranarray(X, dtype=float)  # contiguous columns for the per-feature gathers
    gamma = np.ascontiguousarray(gamma, dtype=float)
    n, p = X.shape
    parallel = Parallel(n_jobs=n_jobs, prefer="threads")
    orders = sort_orders(X) if orders is None else orders
    if orders.shape != (p, n):
        raise ValueError(f"orders must have shape {(p, n)}; got {orders.shape}")
    tree, value = _best_stump(X, gamma, np.arange(n), orders, min_samples_leaf, parallel)
    if depth == 2:
        root = _best_depth2(X, gamma, orders, min_samples_leaf, parallel)
        if root is not None and _rel_better(root[2], value):
            j, threshold, _, sides = root
            go_left = X[:, j] <= threshold
            children = []
            for features, here in zip(sides, (go_left, ~go_left), strict=True):
                order = orders[list(features)]
                children.append(_best_stump(X, gamma, np.flatnonzero(here),
                                            order[here[order]].reshape(len(features), -1),
                                            min_samples_leaf, parallel, features))
            (left, v_left), (right, v_right) = children
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
