"""Exhaustive search for welfare-maximising policy trees of depth 1 or 2 on a score matrix.

Given rows :math:`X_r` and a reward matrix :math:`\\Gamma` (n, K), a policy tree assigns one arm
per leaf and its value is :math:`n^{-1}\\sum_r \\Gamma_{r,\\pi(X_r)}`. With the target-DR score
matrix of :meth:`causalkit.policy.TargetPolicyValue.score_matrix` this is the estimated *target*
value, so the tree found here is the best tree for the target population.

Search (as in ``policytree::policy_tree``, Sverdrup et al. 2020; Athey & Wager 2021):

* depth 1: every feature and every split point between distinct sorted values, via cumulative
  sums of :math:`\\Gamma` (exact);
* depth 2: every feature for the root at up to ``n_thresholds`` candidate split points (the
  midpoints between distinct values when there are few, otherwise empirical quantiles, an
  approximation in the spirit of policytree's ``split.step``), and an exact depth-1 search in each
  child. A split is kept only when it strictly improves on a single leaf.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_policy_tree", "predict_tree"]

_CHUNK_ELEMENTS = 4_000_000


def _leaf(total):
    return {"action": int(np.argmax(total))}


def _stumps(X, gamma, orders, masks, min_leaf):
    """Best depth-1 tree within each row subset (rows of the boolean ``masks``, shape (Q, n)).

    Returns a list of (value, node) per subset; a node is a leaf when no split helps.
    """
    Q = masks.shape[0]
    totals = masks.astype(float) @ gamma
    best_val = totals.max(axis=1)
    best = [None] * Q
    sizes = masks.sum(axis=1)
    n, K = gamma.shape
    step = max(1, _CHUNK_ELEMENTS // max(1, n * K))
    for j, o in enumerate(orders):
        xs = X[o, j]
        distinct = xs[:-1] < xs[1:]
        g_sorted = gamma[o]
        for start in range(0, Q, step):
            sl = slice(start, min(Q, start + step))
            m = masks[sl][:, o].astype(float)
            left_val, left_arm, right_val, right_arm = None, None, None, None
            for k in range(K):  # arms: a handful of columns, each a contiguous cumsum
                cum = np.cumsum(m * g_sorted[:, k], axis=1)[:, :-1]
                right = totals[sl, k][:, None] - cum
                if k == 0:
                    left_val, right_val = cum, right
                    left_arm = np.zeros(cum.shape, dtype=np.int8)
                    right_arm = np.zeros(cum.shape, dtype=np.int8)
                    continue
                better = cum > left_val
                left_val = np.where(better, cum, left_val)
                left_arm[better] = k
                better = right > right_val
                right_val = np.where(better, right, right_val)
                right_arm[better] = k
            val = left_val + right_val
            count = np.cumsum(m, axis=1)[:, :-1]
            valid = distinct[None] & (count >= min_leaf) & (sizes[sl, None] - count >= min_leaf)
            val = np.where(valid, val, -np.inf)
            t = val.argmax(axis=1)
            for qi, q in enumerate(range(sl.start, sl.stop)):
                v = val[qi, t[qi]]
                if v > best_val[q] + 1e-12 * max(1.0, abs(best_val[q])):
                    best_val[q] = v
                    best[q] = {"feature": j, "threshold": 0.5 * (xs[t[qi]] + xs[t[qi] + 1]),
                               "left": {"action": int(left_arm[qi, t[qi]])},
                               "right": {"action": int(right_arm[qi, t[qi]])}}
    nodes = [best[q] if best[q] is not None else _leaf(totals[q]) for q in range(Q)]
    return best_val, nodes


def _root_candidates(x, n_thresholds):
    values = np.unique(x)
    if values.size <= 1:
        return values[:0]
    if values.size <= n_thresholds + 1:
        return 0.5 * (values[:-1] + values[1:])
    qs = np.quantile(x, np.linspace(0, 1, n_thresholds + 2)[1:-1])
    return np.unique(qs)


def fit_policy_tree(X, gamma, *, depth=2, n_thresholds=32, min_samples_leaf=5):
    """Best tree of the given depth for the reward matrix ``gamma``.

    Parameters
    ----------
    X : ndarray of shape (n, p)
    gamma : ndarray of shape (n, K)
        Reward of each arm for each row; the tree maximises the sum of the chosen entries.
    depth : {1, 2}
    n_thresholds : int
        Root split points tried per feature at depth 2.
    min_samples_leaf : int
        Minimum rows in every leaf.

    Returns
    -------
    (tree, value) : dict, float
        The tree (nested dicts with ``feature``/``threshold``/``left``/``right`` or ``action``)
        and its mean reward :math:`n^{-1}\\sum_r \\Gamma_{r,\\pi(X_r)}`.
    """
    if depth not in (1, 2):
        raise ValueError(f"depth must be 1 or 2; got {depth!r}")
    X = np.asarray(X, dtype=float)
    gamma = np.asarray(gamma, dtype=float)
    n = X.shape[0]
    orders = [np.argsort(X[:, j], kind="stable") for j in range(X.shape[1])]
    all_rows = np.ones((1, n), dtype=bool)
    value, nodes = _stumps(X, gamma, orders, all_rows, min_samples_leaf)
    best_val, best_tree = value[0], nodes[0]
    if depth == 2:
        for j in range(X.shape[1]):
            cuts = _root_candidates(X[:, j], n_thresholds)
            if cuts.size == 0:
                continue
            left = X[:, j][None, :] <= cuts[:, None]
            sizes = left.sum(axis=1)
            keep = (sizes >= min_samples_leaf) & (n - sizes >= min_samples_leaf)
            if not keep.any():
                continue
            cuts, left = cuts[keep], left[keep]
            vals, kids = _stumps(X, gamma, orders, np.vstack([left, ~left]), min_samples_leaf)
            q = cuts.size
            total = vals[:q] + vals[q:]
            i = int(np.argmax(total))
            if total[i] > best_val + 1e-12 * max(1.0, abs(best_val)):
                best_val = total[i]
                best_tree = {"feature": j, "threshold": float(cuts[i]), "left": kids[i],
                             "right": kids[q + i]}
    return best_tree, float(best_val / n)


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
