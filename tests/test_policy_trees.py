"""Exact depth-2 policy tree search against a direct enumeration of every root split."""

import numpy as np
import pytest

from causalkit.policy.trees import _best_depth2, fit_policy_tree, predict_tree


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
    _, _, total = _best_depth2(X, gamma, min_leaf)
    assert total == pytest.approx(reference, abs=1e-10)


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
