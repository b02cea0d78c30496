"""TargetPolicyLearner and its policy classes: exact tree search, surrogate gradients, regret."""

import itertools
import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy.optimize import check_grad
from scipy.special import softmax
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from causalkit import Estimate
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps
from causalkit.policy.smooth import fit_linear_policy
from causalkit.policy.trees import fit_policy_tree, predict_tree

matplotlib.use("Agg")


def _brute_force_tree(X, gamma, depth, min_leaf):
    """Best tree by enumerating every split at every distinct midpoint (independent reference)."""
    n, p = X.shape

    def cuts(rows, j):
        v = np.unique(X[rows, j])
        return 0.5 * (v[:-1] + v[1:])

    def best(rows, d):
        value = gamma[rows].sum(axis=0).max()
        if d == 0:
            return value
        for j in range(p):
            for c in cuts(rows, j):
                left, right = rows[X[rows, j] <= c], rows[X[rows, j] > c]
                if len(left) < min_leaf or len(right) < min_leaf:
                    continue
                value = max(value, best(left, d - 1) + best(right, d - 1))
        return value

    return best(np.arange(n), depth) / n


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tree_search_matches_brute_force(depth, seed):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(24, 2)), 1)
    gamma = rng.normal(size=(24, 3)) + np.c_[np.zeros(24), X[:, 0], -X[:, 1]]
    tree, value = fit_policy_tree(X, gamma, depth=depth, min_samples_leaf=2)
    assert value == pytest.approx(_brute_force_tree(X, gamma, depth, 2), abs=1e-12)
    chosen = predict_tree(tree, X)
    assert np.mean(gamma[np.arange(24), chosen]) == pytest.approx(value, abs=1e-12)


@pytest.mark.parametrize("n_arms, min_leaf, decimals", [(2, 1, 2), (2, 5, 3), (3, 3, 1),
                                                         (4, 2, None)])
def test_tree_search_matches_brute_force_every_root_threshold(n_arms, min_leaf, decimals):
    # enough distinct values that the root and child searches span many leaf blocks, ties
    # (rounding) or none, and a signal so that the best splits sit inside the data
    rng = np.random.default_rng(n_arms + 10 * min_leaf)
    X = rng.normal(size=(70, 2))
    X = np.round(X, decimals) if decimals is not None else X
    gamma = rng.normal(size=(70, n_arms))
    gamma[:, 1] += 2 * np.sign(X[:, 0] * X[:, 1])
    tree, value = fit_policy_tree(X, gamma, depth=2, min_samples_leaf=min_leaf)
    assert value == pytest.approx(_brute_force_tree(X, gamma, 2, min_leaf), abs=1e-12)
    assert np.mean(gamma[np.arange(70), predict_tree(tree, X)]) == pytest.approx(value, abs=1e-12)


def test_tree_recovers_a_planted_rule():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 3))
    best_arm = np.where(X[:, 1] > 0.3, np.where(X[:, 2] > -0.2, 2, 1), 0)
    gamma = rng.normal(scale=0.3, size=(2000, 3)) + np.eye(3)[best_arm]
    tree, _ = fit_policy_tree(X, gamma, depth=2)
    assert np.mean(predict_tree(tree, X) == best_arm) > 0.97


def test_linear_surrogate_gradient():
    rng = np.random.default_rng(1)
    X, G = rng.normal(size=(200, 2)), rng.normal(size=(200, 3))
    Z = np.c_[np.ones(200), (X - X.mean(0)) / X.std(0)]
    Gs = G / G.std()

    def f(flat):
        theta = np.c_[np.zeros(3), flat.reshape(3, 2)]
        return -np.sum(softmax(Z @ theta / 0.7, axis=1) * Gs) / 200 + 0.01 * flat @ flat

    def grad(flat):
        theta = np.c_[np.zeros(3), flat.reshape(3, 2)]
        P = softmax(Z @ theta / 0.7, axis=1)
        d = P * (Gs - np.sum(P * Gs, axis=1, keepdims=True)) / (200 * 0.7)
        return -(Z.T @ d)[:, 1:].ravel() + 0.02 * flat

    theta0 = rng.normal(size=6)
    assert check_grad(f, grad, theta0) < 1e-6
    # the fitted policy is a stationary point of the same objective
    fitted = fit_linear_policy(X, G, l2=0.01, temperature=0.7, max_iter=2000)
    assert np.linalg.norm(grad(fitted.theta[:, 1:].ravel())) < 1e-4


@pytest.fixture(scope="module")
def shifted_data():
    return dgps.simulate("estimation", np.random.default_rng(11), n_source=2000, n_target=2000,
                         shift=dgps.SHIFTS["moderate"])


@pytest.mark.parametrize("policy", ["linear", "tree", "mlp"])
def test_learner_finds_near_optimal_target_policy(shifted_data, policy):
    d = shifted_data
    m = dgps.SHIFTS["moderate"]
    learner = TargetPolicyLearner(TargetPolicyValue(cv=2, random_state=0), policy=policy,
                                  max_iter=300, random_state=0)
    learner.fit(d["X_source"], d["y"], d["treatment"], X_target=d["X_target"])
    optimum = dgps.true_value("estimation", None, m)
    value = dgps.true_value("estimation", learner.predict_proba, m, n_mc=400_000)
    # the optimal rule 1{0.5 + x1 - x3 > 0} is linear; a depth-2 tree approximates it
    assert optimum - value < (0.03 if policy != "tree" else 0.12)
    assert isinstance(learner.value_, Estimate)
    lo, hi = learner.value_.conf_int(0.01)
    assert lo < value < hi
    proba = learner.predict_proba(d["X_target"][:50])
    assert proba.shape == (50, 2) and set(np.unique(proba)) <= {0.0, 1.0}
    assert set(learner.predict(d["X_target"])) <= {0, 1}


@pytest.mark.parametrize("objective, trim", [("target", False), ("auto", False),
                                             ("target", True)])
def test_tree_learner_gives_the_same_fit_for_any_thread_count(shifted_data, objective, trim):
    # with n_jobs other than 1 the stacked rows are sorted beside the value fit (and sorted
    # again when trimming drops rows) and the held-out folds' searches (with a fixed objective,
    # also the search on all rows) run side by side: the fold trees, the held-out assignment
    # and value, and the final tree must be those of one thread
    d = shifted_data
    if trim:
        d = dgps.simulate("learning", np.random.default_rng(3), n_source=400, n_target=400,
                          shift=dgps.LEARNING_SHIFTS["strong"])
    value = TargetPolicyValue(cv=2, on_poor_overlap="trim" if trim else "warn", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one, two = (TargetPolicyLearner(value, policy="tree", objective=objective,
                                        n_jobs=n_jobs, random_state=0).fit(
            d["X_source"], d["y"], d["treatment"], X_target=d["X_target"]) for n_jobs in (1, 2))
    assert (one.value_estimator_.n_trimmed_target_ > 0) == trim
    assert [m.tree for m in one.fold_models_] == [m.tree for m in two.fold_models_]
    np.testing.assert_array_equal(one.held_out_, two.held_out_)
    assert (one.value_.value, one.value_.std_error) == (two.value_.value, two.value_.std_error)
    assert one.objective_ == two.objective_
    assert one.policy_model_.tree == two.policy_model_.tree


def test_learner_labels_three_arms_and_fresh_evaluation():
    d = dgps.simulate("estimation3", np.random.default_rng(3), n_source=1500, n_target=1500,
                      shift=dgps.SHIFTS["moderate"])
    labels = np.array([-1.0, 4.0, 7.0])
    learner = TargetPolicyLearner(TargetPolicyValue(cv=2, random_state=0), policy="linear",
                                  random_state=0)
    learner.fit(d["X_source"], d["y"], labels[d["treatment"]], X_target=d["X_target"])
    assert set(learner.predict(d["X_target"])) <= set(labels)
    fresh = dgps.simulate("estimation3", np.random.default_rng(4), n_source=1500, n_target=1500,
                          shift=dgps.SHIFTS["moderate"])
    value = learner.policy_value(fresh["X_source"], fresh["y"], labels[fresh["treatment"]],
                                 X_target=fresh["X_target"])
    truth = dgps.true_value("estimation3",
                            lambda X: np.eye(3)[np.searchsorted(labels, learner.predict(X))],
                            dgps.SHIFTS["moderate"], n_mc=400_000)
    lo, hi = value.conf_int(0.01)
    assert lo < truth < hi
    assert learner.policy_value() is learner.value_
    soft = clone(learner).set_params(deterministic=False).fit(
        d["X_source"], d["y"], labels[d["treatment"]], X_target=d["X_target"])
    p = soft.predict_proba(d["X_target"][:20])
    assert np.allclose(p.sum(axis=1), 1) and (p > 0).all()


def test_learner_errors():
    d = dgps.simulate("estimation", np.random.default_rng(0), n_source=200, n_target=200)
    args = (d["X_source"], d["y"], d["treatment"])
    kw = {"X_target": d["X_target"]}
    with pytest.raises(ValueError, match="policy must be one of"):
        TargetPolicyLearner(policy="forest").fit(*args, **kw)
    with pytest.raises(TypeError, match="value must be a TargetPolicyValue"):
        TargetPolicyLearner(value="dr").fit(*args, **kw)
    with pytest.raises(ValueError, match="depth must be 1 or 2"):
        TargetPolicyLearner(policy="tree", depth=3).fit(*args, **kw)
    for n_jobs in (0, 1.5, True):
        with pytest.raises(ValueError, match="n_jobs must be None or a nonzero integer"):
            TargetPolicyLearner(policy="tree", n_jobs=n_jobs).fit(*args, **kw)
    with pytest.raises(NotFittedError):
        TargetPolicyLearner().predict(d["X_target"])
    fitted = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", depth=1).fit(*args, **kw)
    with pytest.raises(ValueError, match="columns"):
        fitted.predict(d["X_target"][:, :2])
    with pytest.raises(ValueError, match="all of X, y, treatment"):
        fitted.policy_value(d["X_source"])
    with pytest.raises(ValueError, match="X_target must have at least 1 row"):
        TargetPolicyLearner(TargetPolicyValue(cv=2)).fit(*args, X_target=d["X_target"][:0])


def test_tree_export_and_plot_use_feature_names():
    d = dgps.simulate("estimation", np.random.default_rng(5), n_source=400, n_target=400,
                      shift=dgps.SHIFTS["moderate"])
    names = ["age", "dose", "score"]
    Xs, Xt = pd.DataFrame(d["X_source"], columns=names), pd.DataFrame(d["X_target"], columns=names)
    learner = TargetPolicyLearner(TargetPolicyValue(cv=2, random_state=0), policy="tree",
                                  random_state=0).fit(Xs, d["y"], d["treatment"], X_target=Xt)
    text = learner.export_text()
    tree = learner.policy_model_.tree
    assert text.splitlines()[0] == f"|--- {names[tree['feature']]} <= {round(tree['threshold'], 3)}"
    assert text.count("treat:") == sum(1 for line in text.splitlines() if "treat" in line) >= 2
    ax = learner.plot_tree()
    shown = {t.get_text() for t in ax.texts}
    assert f"{names[tree['feature']]} <= {round(tree['threshold'], 3)}" in shown
    assert any(t.startswith("treat: ") for t in shown)
    assert learner.export_text(feature_names=["a", "b", "c"]).startswith(
        f"|--- {'abc'[tree['feature']]} <= ")
    with pytest.raises(ValueError, match="feature_names has 2 entries"):
        learner.export_text(feature_names=["a", "b"])
    with pytest.raises(ValueError, match="not a tree"):
        TargetPolicyLearner(TargetPolicyValue(cv=2), policy="linear").fit(
            Xs, d["y"], d["treatment"], X_target=Xt).export_text()


def test_exhaustive_grid_of_constructor_params_clone():
    for policy, depth in itertools.product(("linear", "tree", "mlp"), (1, 2)):
        est = TargetPolicyLearner(policy=policy, depth=depth)
        assert clone(est).get_params()["policy"] == policy
