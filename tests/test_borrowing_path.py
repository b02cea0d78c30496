"""The nested-set fast path: logistic fits along the path and the MSE path built on them."""

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from sklearn.linear_model import LogisticRegression

import causalkit.borrowing.models as models
from causalkit.borrowing._base import fit_nuisance
from causalkit.borrowing._data import prepare_data
from causalkit.borrowing.designs import paper_a_design
from causalkit.borrowing.efficient import SAMPLING_RIDGE, EfficientBorrowing
from causalkit.borrowing.influence import influence_scores
from causalkit.borrowing.models import fit_logistic, logistic_path
from causalkit.borrowing.selection import mse_path, rank_order, size_grid


def _nested_problem(seed=0, n_trial=150, n_ext=450, shift=0.4):
    """Trial rows (t = 1) then external rows (t = 0) sorted by a covariate, as in selection."""
    rng = np.random.default_rng(seed)
    Xt = rng.normal(size=(n_trial, 3))
    Xe = rng.normal(shift, 1.2, size=(n_ext, 3))
    Xe = Xe[np.argsort(np.abs(Xe[:, 0] - shift))]
    Z = sm.add_constant(np.vstack([Xt, Xe]))
    t = np.r_[np.ones(n_trial), np.zeros(n_ext)]
    ends = n_trial + np.array([20, 60, 150, 300, 450])
    return Z, t, ends


def test_path_equals_statsmodels_logit_unpenalised():
    Z, t, ends = _nested_problem()
    for end, (beta, eta) in zip(ends, logistic_path(Z, t, ends), strict=True):
        ref = sm.Logit(t[:end], Z[:end]).fit(method="newton", tol=1e-12, maxiter=100, disp=0)
        np.testing.assert_allclose(beta, ref.params, rtol=0, atol=1e-6)
        np.testing.assert_allclose(eta, Z[:end] @ ref.params, rtol=0, atol=1e-6)


def test_path_equals_sklearn_with_ridge():
    # mean-loss ridge lambda on the slopes = sklearn's C = 1 / (n lambda), intercept unpenalised
    Z, t, ends = _nested_problem(seed=1)
    ridge = 0.05
    for end, (beta, _) in zip(ends, logistic_path(Z, t, ends, ridge=ridge), strict=True):
        ref = LogisticRegression(C=1.0 / (end * ridge), solver="newton-cholesky", tol=1e-12,
                                 max_iter=200).fit(Z[:end, 1:], t[:end])
        np.testing.assert_allclose(beta, np.r_[ref.intercept_, ref.coef_.ravel()], rtol=0,
                                   atol=1e-6)


def test_path_recovers_from_a_bad_warm_start(monkeypatch):
    # strong covariate effects: full Newton steps from the logit-of-the-mean start overshoot, so
    # the first prefix goes through the line-search fallback; the answer is still the optimum
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 2))
    t = rng.binomial(1, 1 / (1 + np.exp(-(-2.0 + 3.0 * X[:, 0] - 2.0 * X[:, 1])))).astype(float)
    Z = sm.add_constant(X)
    calls = []
    monkeypatch.setattr(models, "fit_logistic",
                        lambda *a, **k: calls.append(1) or fit_logistic(*a, **k))
    ends = [200, 300, 400]
    for end, (beta, _) in zip(ends, logistic_path(Z, t, ends), strict=True):
        ref = sm.Logit(t[:end], Z[:end]).fit(method="newton", tol=1e-12, maxiter=100, disp=0)
        np.testing.assert_allclose(beta, ref.params, rtol=0, atol=1e-6)
    assert calls, "the fallback branch was not exercised"


def test_blocked_weighted_fit_matches_statsmodels_glm(monkeypatch):
    monkeypatch.setattr(models, "PASS_BLOCK", 7)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    y = rng.binomial(1, 1 / (1 + np.exp(-(0.5 + X @ [1.0, -0.5])))).astype(float)
    w = rng.integers(1, 4, size=300).astype(float)
    Z = sm.add_constant(X)
    beta, converged = fit_logistic(Z, y, sample_weight=w, tol=1e-20)
    ref = sm.GLM(y, Z, family=sm.families.Binomial(), freq_weights=w).fit(tol=1e-12)
    assert converged
    np.testing.assert_allclose(beta, ref.params, rtol=0, atol=1e-8)


def _engine(propensity, variance_ratio):
    d = paper_a_design(np.random.default_rng(4), bias=0.3)
    data = prepare_data(d["X"], d["y"], d["a"], d["s"])
    mu1, mu0, e, models = fit_nuisance(data, "auto", propensity)
    model0 = models["control"]
    nT, ctrl = data.n_trial, data.controls
    scores = influence_scores(model0, data.X[:nT][ctrl], data.y[:nT][ctrl], data.X[nT:],
                              data.y[nT:])
    engine = EfficientBorrowing(data, data.y[nT:], mu1, mu0, e, variance_ratio)
    return engine, rank_order(scores), size_grid(data.n_external)


@pytest.mark.parametrize("propensity, variance_ratio", [("constant", 1.0),
                                                        ("logistic", "estimate")])
def test_nested_equals_set_by_set_fits(propensity, variance_ratio):
    # every set refitted from scratch (the straightforward route) vs the shared path
    engine, order, sizes = _engine(propensity, variance_ratio)
    for k, fast in zip(sizes, engine.nested(order, sizes), strict=True):
        slow = engine.evaluate(order[:k])
        assert fast.n_borrowed == slow.n_borrowed == k
        assert fast.value == pytest.approx(slow.value, abs=1e-6)
        assert fast.std_error == pytest.approx(slow.std_error, abs=1e-6)
        assert fast.variance_ratio == pytest.approx(slow.variance_ratio, abs=1e-12)
        np.testing.assert_allclose(fast.influence, slow.influence, rtol=0, atol=1e-6)
        np.testing.assert_allclose(fast.weights, slow.weights, rtol=0, atol=1e-6)


@pytest.mark.parametrize("criterion", ["plugin", "debiased"])
def test_mse_path_equals_sklearn_reference(criterion):
    # the whole MSE path, each set's trial-participation score from its own sklearn fit
    engine, order, sizes = _engine("constant", 1.0)
    nT = engine.n_trial
    base = engine.evaluate(order[:0])
    rows = []
    for k in sizes:
        idx = np.r_[np.arange(nT), nT + order[:k]]
        Z = engine.Z[idx]
        if k == 0:
            fit = base
        else:
            R = np.r_[np.ones(nT), np.zeros(k)]
            ref = LogisticRegression(C=1.0 / ((nT + k) * SAMPLING_RIDGE),
                                     solver="newton-cholesky", tol=1e-12,
                                     max_iter=200).fit(Z[:, 1:], R)
            pi = ref.predict_proba(Z[:, 1:])[:, 1]
            fit = engine._assemble(pi, None, engine.e[idx], engine.resid0[idx])
        bias2 = (fit.value - base.value) ** 2
        if criterion == "debiased" and k > 0:
            d = fit.influence.copy()
            d[:nT] -= (nT + k) / nT * base.influence
            bias2 = max(bias2 - np.sum(d * d) / (nT + k) ** 2, 0.0)
        rows.append((k, fit.value, fit.std_error, bias2, fit.std_error ** 2,
                     bias2 + fit.std_error ** 2))
    expected = pd.DataFrame(rows, columns=["size", "estimate", "se", "bias2", "variance", "mse"])
    path, best, best_size = mse_path(engine, order, sizes, criterion)
    assert list(path["size"]) == list(sizes)
    np.testing.assert_allclose(path.to_numpy(float), expected.to_numpy(float), rtol=0, atol=1e-6)
    assert best_size == int(expected["size"][expected["mse"].idxmin()])
    assert best.n_borrowed == best_size


def test_bad_path_arguments():
    Z, t, _ = _nested_problem()
    with pytest.raises(ValueError, match="ends"):
        list(logistic_path(Z, t, [300, 200]))
    with pytest.raises(ValueError, match="ends"):
        list(logistic_path(Z, t, [0, 10]))
    engine, order, _ = _engine("constant", 1.0)
    with pytest.raises(ValueError, match="sizes"):
        list(engine.nested(order, [0, 50, 50]))
    with pytest.raises(ValueError, match="sizes"):
        list(engine.nested(order, [0, order.size + 1]))


def test_every_external_control_in_stored_order_equals_any_order():
    # borrowing every control in stored order skips the design copy; a permutation of the same
    # set takes the general route: the same fit, rows permuted
    engine, order, _ = _engine("constant", 1.0)
    nT = engine.n_trial
    stored = engine.evaluate(np.arange(engine.n_external))
    permuted = engine.evaluate(order)
    assert stored.n_borrowed == permuted.n_borrowed == engine.n_external
    assert stored.value == pytest.approx(permuted.value, abs=1e-10)
    assert stored.std_error == pytest.approx(permuted.std_error, abs=1e-10)
    np.testing.assert_allclose(stored.influence[:nT], permuted.influence[:nT], atol=1e-10)
    np.testing.assert_allclose(stored.influence[nT + order], permuted.influence[nT:], atol=1e-10)


def test_data_keeps_one_copy_of_the_covariates():
    d = paper_a_design(np.random.default_rng(4), n_trial=120, n_treated=60, n_external=200)
    X = np.ascontiguousarray(d["X"][::-1])            # external controls first: rows reordered
    y, a, s = d["y"][::-1], d["a"][::-1], d["s"][::-1]
    data = prepare_data(X, y, a, s)
    assert data.raw is X                               # shared with the caller, not copied
    np.testing.assert_array_equal(data.raw[data.raw_rows], X[data.order])
    assert np.all(data.s[:data.n_trial] == 1)
    idx = np.random.default_rng(0).integers(0, data.n_rows, data.n_rows)
    resample = data.take(idx)
    assert resample.raw is X                           # resamples share it too
    np.testing.assert_array_equal(resample.raw[resample.raw_rows],
                                  data.raw[data.raw_rows][idx][resample.order])
    # the resample is standardised on its own rows, as a fresh fit of those rows would be
    fresh = prepare_data(X[data.raw_rows][idx], y[data.raw_rows][idx], a[data.raw_rows][idx],
                         s[data.raw_rows][idx])
    np.testing.assert_array_equal(resample.X, fresh.X)
    np.testing.assert_array_equal(resample.y, fresh.y)
