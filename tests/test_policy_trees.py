"""Exact depth-2 policy tree search against a direct enumeration of every root split."""

import numpy as np
import pytest

from causalkit.policy._segment_tree import scan_children
from causalkit.policy._tree_bounds import LB_LEFT, LB_RIGHT, UB_LEFT, UB_RIGHT, bin_bounds
from causalkit.policy.trees import (
    _best_depth2,
    _best_root_split,
    _prune,
    _prune_tolerance,
    _value_groups,
    fit_policy_tree,
    predict_tree,
    sort_orders,
    subset_orders,
)


def _best_stump_reference(x_rows, g_rows, min_leaf):
    """Best depth-1 total reward of a row set: leaf, or every split between distinct values of
    every feature, each side taking its best arm (cumulative sums along each sorted feature)."""
    best = g_rows.sum(axis=0).max()
    m = len(g_rows)
    for j in range(x_rows.shape[1]):
        o = np.argsort(x_rows[:, j], kind="stable")
        xs, cum = x_rows[o, j], np.cumsum(g_rows[o], axis=0)
        rows = np.arange(1, m)
        ok = (xs[:-1] < xs[1:]) & (rows >= min_leaf) & (m - rows >= min_leaf)
        if ok.any():
            split = cum[:-1].max(axis=1) + (cum[-1] - cum[:-1]).max(axis=1)
            best = max(best, split[ok].max())
    return best


def _root_split_reference(X, gamma, min_leaf):
    """Best total reward over every root split, each child taking its best depth-1 tree."""
    best = -np.inf
    for j in range(X.shape[1]):
        values = np.unique(X[:, j])
        for c in 0.5 * (values[:-1] + values[1:]):
            go = X[:, j] <= c
            if go.sum() < min_leaf or (~go).sum() < min_leaf:
                continue
            best = max(best, _best_stump_reference(X[go], gamma[go], min_leaf)
                       + _best_stump_reference(X[~go], gamma[~go], min_leaf))
    return best


def _depth2_reference(X, gamma, min_leaf):
    """Best depth-2 mean reward (a root split or, when none is better, a depth-1 tree)."""
    return max(_best_stump_reference(X, gamma, min_leaf),
               _root_split_reference(X, gamma, min_leaf)) / len(gamma)


def _spiky_rewards(X, n_arms, rng):
    """Rewards that favour arm 1 only on the 3 lowest and 3 highest rows of every feature, so
    that the best child splits ignoring ``min_samples_leaf`` cut off fewer rows than allowed."""
    n = len(X)
    gamma = rng.normal(scale=0.3, size=(n, n_arms))
    for j in range(X.shape[1]):
        rank = np.argsort(np.argsort(X[:, j], kind="stable"), kind="stable")
        gamma[:, 1] += 5 * ((rank < 3) | (rank >= n - 3))
    gamma[:, 1] -= 1
    return gamma


@pytest.mark.parametrize("n_arms, min_leaf, seed", [(2, 10, 0), (2, 6, 1), (3, 8, 2)])
def test_root_split_totals_respect_min_leaf(n_arms, min_leaf, seed):
    # the unrestricted best child split sits inside the forbidden end rows: the kernel must fall
    # back to its exact range query and return the best allowed total
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(150, 3))
    gamma = _spiky_rewards(X, n_arms, rng)
    reference = _root_split_reference(X, gamma, min_leaf)
    assert reference < _root_split_reference(X, gamma, 1)  # the leaf size constraint binds
    _, _, total, _ = _best_depth2(X, gamma, sort_orders(X), min_leaf)
    assert total == pytest.approx(reference, abs=1e-10)


@pytest.mark.parametrize("n_arms, min_leaf, spikes, seed", [
    (2, 6, 1.0, 11),   # the extremes of the prefix sums often sit inside the forbidden end rows
    (3, 4, 0.5, 12),   # ... for some arm pairs only, while another pair's extreme is allowed
    (2, 9, 0.0, 13),   # no spikes: the extremes decide directly
])
def test_child_scan_gives_every_root_split_its_best_children(n_arms, min_leaf, spikes, seed):
    # at every root split point, the compiled scan's left and right child values (every child
    # feature needed) equal the enumerated best depth-1 totals of the two child row sets
    rng = np.random.default_rng(seed)
    n, p = 90, 2
    X = np.round(rng.normal(size=(n, p)), 1)
    gamma = rng.normal(size=(n, n_arms)) + spikes * _spiky_rewards(X, n_arms, rng)
    orders = sort_orders(X)
    group, _, n_groups = _value_groups(X, orders)
    pa, pb = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(n_arms, 1))
    order = orders[0]
    cut = np.r_[X[order[:-1], 0] < X[order[1:], 0], False]
    left, right = np.full(n, -np.inf), np.full(n, -np.inf)
    scan_children(group[:, order], n_groups, np.ascontiguousarray(gamma[order]), cut, min_leaf,
                  pa, pb, np.ones((2, p, n), dtype=bool), left, right)
    for i in np.flatnonzero(cut):
        rows_left, rows_right = order[:i + 1], order[i + 1:]
        assert left[i] == pytest.approx(
            _best_stump_reference(X[rows_left], gamma[rows_left], min_leaf), abs=1e-10)
        assert right[i] == pytest.approx(
            _best_stump_reference(X[rows_right], gamma[rows_right], min_leaf), abs=1e-10)


@pytest.mark.parametrize("n_arms, min_leaf, decimals, seed", [
    (2, 1, None, 0),   # all values distinct, every split allowed
    (2, 12, None, 1),  # large leaves: the best child split is often near a forbidden end
    (2, 7, 1, 2),      # heavy ties
    (3, 9, 2, 3),
    (5, 4, None, 4),   # many arm pairs
])
def test_depth2_search_equals_enumeration(n_arms, min_leaf, decimals, seed):
    rng = np.random.default_rng(seed)
    n = 150
    X = rng.normal(size=(n, 3))
    if decimals is not None:
        X = np.round(X, decimals)
    gamma = rng.normal(size=(n, n_arms))
    gamma[:, 1] += 1.5 * np.sign(X[:, 0] * X[:, 2]) + X[:, 1]
    tree, value = fit_policy_tree(X, gamma, depth=2, min_samples_leaf=min_leaf)
    assert value == pytest.approx(_depth2_reference(X, gamma, min_leaf), abs=1e-12)
    chosen = predict_tree(tree, X)
    assert np.mean(gamma[np.arange(n), chosen]) == pytest.approx(value, abs=1e-12)


def test_depth2_search_with_a_constant_column_and_a_binary_column():
    rng = np.random.default_rng(5)
    n = 120
    X = np.c_[np.ones(n), rng.integers(0, 2, n), rng.normal(size=n)]
    gamma = rng.normal(size=(n, 2))
    gamma[:, 1] += 2 * (X[:, 1] - 0.5) * np.sign(X[:, 2])
    tree, value = fit_policy_tree(X, gamma, depth=2, min_samples_leaf=3)
    assert value == pytest.approx(_depth2_reference(X, gamma, 3), abs=1e-12)
    assert tree.get("feature") != 0  # a constant column cannot be split


def test_threaded_search_returns_the_single_thread_tree_and_breaks_ties_by_feature_order():
    # column 3 repeats column 0, so both root features reach the same best total: any thread
    # count must give the one-thread tree, which keeps the first of tied features
    rng = np.random.default_rng(6)
    n = 200
    X = rng.normal(size=(n, 3))
    X = np.c_[X, X[:, 0]]
    gamma = rng.normal(size=(n, 2))
    gamma[:, 1] += 2 * np.sign(X[:, 0]) * np.sign(X[:, 1])
    one, value = fit_policy_tree(X, gamma, depth=2, n_jobs=1)
    assert one["feature"] == 0
    for n_jobs in (2, -1):
        assert fit_policy_tree(X, gamma, depth=2, n_jobs=n_jobs) == (one, value)


@pytest.mark.parametrize("n_arms, min_leaf, decimals, seed", [(2, 5, None, 7), (3, 3, 1, 8)])
def test_bin_bounds_enclose_every_child_split(n_arms, min_leaf, decimals, seed):
    # for every root split point and child feature, the best child split on the shifted
    # rewards lies between the lower and upper bound of the root split's bin
    rng = np.random.default_rng(seed)
    n, p, n_bins = 160, 3, 8
    X = rng.normal(size=(n, p))
    if decimals is not None:
        X = np.round(X, decimals)
    gamma = rng.normal(size=(n, n_arms))
    gamma[:, 1] += 2 * np.sign(X[:, 0]) * (X[:, 1] > 0)
    shifted = gamma - gamma.max(axis=1, keepdims=True)
    orders = sort_orders(X)
    _, start, _ = _value_groups(X, orders)
    bins = (start * n_bins // n).astype(np.uint16)
    # every pair's histogram serves both (root, child) roles: the swapped role reads its transpose
    every = bin_bounds(bins, shifted, n_bins, min_leaf, np.ones((p, p), bool),
                       np.ones((p, n_bins), bool), lambda tasks: [f(*a, **k) for f, a, k in tasks])
    checked = 0
    for j in range(p):
        bounds = every[j]
        xs = X[orders[j], j]
        for i in np.flatnonzero(xs[:-1] < xs[1:]):
            g = bins[j, orders[j][i]]
            left, right = orders[j][:i + 1], orders[j][i + 1:]
            for ell in range(p):
                v_left = _best_stump_reference(X[left][:, [ell]], shifted[left], min_leaf)
                v_right = _best_stump_reference(X[right][:, [ell]], shifted[right], min_leaf)
                assert bounds[LB_LEFT, ell, g] - 1e-9 <= v_left <= bounds[UB_LEFT, ell, g] + 1e-9
                assert bounds[LB_RIGHT, ell, g] - 1e-9 <= v_right <= bounds[UB_RIGHT, ell, g] + 1e-9
                checked += 1
    assert checked > 300


def _search_without_bounds(X, gamma, min_leaf):
    """The exact search with every root bin alive and every child feature needed."""
    n, p = X.shape
    orders = sort_orders(X)
    pa, pb = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(gamma.shape[1], 1))
    group, _, n_groups = _value_groups(X, orders)
    best = None
    for j in range(p):
        split = _best_root_split(j, X, gamma, orders[j], group, n_groups, min_leaf, pa, pb,
                                 np.zeros(n, dtype=np.uint16), np.ones(1, bool),
                                 np.ones((2, p, 1), bool))
        if split is not None and (best is None or split[2] > best[2] + 1e-12 * abs(best[2])):
            best = split
    return best


@pytest.mark.parametrize("signal, seed", [(2.0, 9), (0.0, 10)])
def test_bounds_skip_work_and_keep_the_search_exact(signal, seed):
    # a clear best tree lets the bounds rule out most root bins and child features; with or
    # without one, the split is the one of the search without bounds
    rng = np.random.default_rng(seed)
    n, p = 4000, 5
    X = rng.normal(size=(n, p))
    gamma = rng.normal(size=(n, 2))
    gamma[:, 1] += signal * np.sign(X[:, 0]) * np.sign(X[:, 1] - 0.3)
    orders = sort_orders(X)
    root = _best_depth2(X, gamma, orders, 5)
    assert root[:3] == _search_without_bounds(X, gamma, 5)[:3]
    _, start, _ = _value_groups(X, orders)
    shifted = gamma - gamma.max(axis=1, keepdims=True)
    _, alive, need = _prune(start, shifted, 5, _prune_tolerance(shifted),
                            lambda tasks: [f(*a, **k) for f, a, k in tasks])
    if signal:
        assert np.mean([nd.mean() for nd in need]) < 0.05
        assert sum(a.any() for a in alive) <= 2


def test_subset_orders_are_the_sort_of_the_subset():
    # heavy ties: the orders read from the full sort must keep ties in the subset's row order,
    # as a sort of the subset does, and give the same trees
    rng = np.random.default_rng(12)
    X = np.round(rng.normal(size=(300, 3)), 1)
    gamma = rng.normal(size=(300, 2))
    gamma[:, 1] += np.sign(X[:, 0]) * np.sign(X[:, 2])
    rows = np.flatnonzero(rng.random(300) < 0.6)
    orders = sort_orders(X)
    sub = subset_orders(orders, rows)
    np.testing.assert_array_equal(sub, sort_orders(X[rows]))
    assert subset_orders(orders, np.arange(300)) is orders
    assert fit_policy_tree(X[rows], gamma[rows], orders=sub) == \
        fit_policy_tree(X[rows], gamma[rows])
    with pytest.raises(ValueError, match="increasing"):
        subset_orders(orders, rows[::-1])
    with pytest.raises(ValueError, match="orders must have shape"):
        fit_policy_tree(X[rows], gamma[rows], orders=orders)
