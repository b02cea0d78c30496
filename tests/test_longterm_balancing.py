"""BalancingLogit: Tan's calibration fit of a logistic model (stage-wise balancing weights).

Checked against exact properties: the first-order conditions (exact balance, mean-one weights,
the ridge identity), consistency under a correct logistic model, affine invariance, and the
balance of the stage-wise weights inside MonotoneAIPW.
"""

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from causalkit.longterm import (
    BalancingLogit,
    LinearGaussianDesign,
    MonotoneAIPW,
    SequentialIPW,
    SequentialTMLE,
    check_monotone_data,
)
from causalkit.longterm._models import is_parametric


def _simulate(seed, n=2000):
    """Three columns (the third in large units, none centred) and a logistic response."""
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(n, 3)) * [1.0, 2.0, 1e4] + [1.0, -3.0, 5e4]
    eta = 0.5 + 0.8 * (h[:, 0] - 1) - 0.4 * (h[:, 1] + 3) + 0.7 * (h[:, 2] - 5e4) / 1e4
    return h, rng.binomial(1, expit(eta))


def _imbalance(h, r, p, w=None):
    """``sum w R h / p - sum w h`` per column and ``sum w R / p - sum w``."""
    w = np.ones(len(r)) if w is None else w
    return (w * r / p - w) @ h, float(np.sum(w * r / p) - np.sum(w))


@pytest.fixture(scope="module")
def sample():
    return _simulate(1)


def test_exact_balance_and_mean_one_weights(sample):
    h, r = sample
    model = BalancingLogit().fit(h, r)
    p = model.predict_proba(h)[:, 1]
    n = len(r)
    np.testing.assert_allclose((r / p) @ h, h.sum(axis=0), rtol=1e-6)
    gap, total = _imbalance(h, r, p)
    assert np.all(np.abs(gap) <= 1e-7 * n * h.std(axis=0))      # standardised, not only rtol
    assert total == pytest.approx(0.0, abs=1e-6 * n)
    assert np.sum(r / p) == pytest.approx(n, rel=1e-10)
    assert np.min(1 / p[r == 1]) >= 1.0                           # weights 1 + exp(-eta) >= 1
    assert model.balance_ < 1e-8
    assert model.balance_ == pytest.approx(np.max(np.abs(gap) / (n * h.std(axis=0))), abs=1e-12)
    np.testing.assert_array_equal(model.classes_, [0, 1])
    assert model.n_features_in_ == 3 and model.coef_.shape == (1, 3)
    assert model.intercept_.shape == (1,)
    np.testing.assert_allclose(model.decision_function(h), model.intercept_ + h @ model.coef_[0],
                               rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(model.predict(h), (model.decision_function(h) > 0).astype(int))
    np.testing.assert_allclose(model.predict_proba(h).sum(axis=1), 1.0)


def test_sample_weight_balances_the_weighted_sums(sample):
    h, r = sample
    w = np.random.default_rng(2).integers(0, 4, size=len(r)).astype(float)
    model = BalancingLogit().fit(h, r, sample_weight=w)
    p = model.predict_proba(h)[:, 1]
    np.testing.assert_allclose((w * r / p) @ h, w @ h, rtol=1e-6)
    assert np.sum(w * r / p) == pytest.approx(w.sum(), rel=1e-10)
    assert model.balance_ < 1e-8
    # integer weights are frequency weights: the same fit as repeating the rows
    rep = np.repeat(np.arange(len(r)), w.astype(int))
    expanded = BalancingLogit().fit(h[rep], r[rep])
    np.testing.assert_allclose(model.coef_, expanded.coef_, rtol=1e-6)
    np.testing.assert_allclose(model.intercept_, expanded.intercept_, rtol=1e-6)


def test_consistent_for_a_correct_logistic_model():
    rng = np.random.default_rng(3)
    n, beta = 200_000, np.array([1.0, -0.5, 0.25])
    h = rng.normal(size=(n, 3))
    r = rng.binomial(1, expit(0.2 + h @ beta))
    model = BalancingLogit().fit(h, r)
    np.testing.assert_allclose(model.coef_[0], beta, atol=0.03)
    assert model.intercept_[0] == pytest.approx(0.2, abs=0.03)
    mle = LogisticRegression(C=np.inf).fit(h, r)
    np.testing.assert_allclose(model.coef_, mle.coef_, atol=0.03)


def test_ridge_shrinks_with_the_first_order_imbalance(sample):
    h, r = sample
    n = len(r)
    exact = BalancingLogit().fit(h, r)
    ridge = 0.02
    model = BalancingLogit(ridge=ridge).fit(h, r)
    b = model.coef_[0] * model.scale_                          # standardised coefficients
    p = model.predict_proba(h)[:, 1]
    gap, total = _imbalance(h, r, p)
    # intercept unpenalised: mean-one weights still hold; each column is off by n ridge b_j
    assert total == pytest.approx(0.0, abs=1e-6 * n)
    np.testing.assert_allclose(gap / model.scale_, n * ridge * b, rtol=1e-6)
    assert model.balance_ > 100 * exact.balance_
    assert model.balance_ == pytest.approx(ridge * np.max(np.abs(b)), rel=1e-6)
    assert np.linalg.norm(b) < np.linalg.norm(exact.coef_[0] * exact.scale_)


def test_invariant_to_the_units_of_a_column(sample):
    h, r = sample
    scaled = h.copy()
    scaled[:, 0] *= 1e6
    base = BalancingLogit().fit(h, r)
    model = BalancingLogit().fit(scaled, r)
    np.testing.assert_allclose(model.predict_proba(scaled), base.predict_proba(h), rtol=1e-8)
    np.testing.assert_allclose(model.coef_[0, 0] * 1e6, base.coef_[0, 0], rtol=1e-8)


def test_zero_variance_column(sample):
    h, r = sample
    with_const = np.column_stack([h, np.full(len(r), 7.0), np.zeros(len(r))])
    model = BalancingLogit().fit(with_const, r)
    assert model.coef_[0, 3:].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(model.predict_proba(with_const), BalancingLogit().fit(h, r)
                               .predict_proba(h), rtol=1e-10)
    assert model.balance_ < 1e-8


@pytest.mark.parametrize("y, match", [
    (np.array([0, 1, 2] * 20), "y must be binary"),
    (np.ones(60), "y must contain both classes"),
])
def test_invalid_target(y, match):
    X = np.random.default_rng(4).normal(size=(60, 2))
    with pytest.raises(ValueError, match=match):
        BalancingLogit().fit(X, y)


def test_negative_ridge():
    X = np.random.default_rng(4).normal(size=(60, 2))
    with pytest.raises(ValueError, match="ridge"):
        BalancingLogit(ridge=-0.1).fit(X, np.arange(60) % 2)


def test_no_overlap_raises_and_ridge_rescues():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 2))
    r = (X[:, 0] + X[:, 1] > 0.5).astype(int)                # separated
    with pytest.raises(ValueError, match="cannot be balanced.*no overlap.*ridge > 0"):
        BalancingLogit().fit(X, r)
    model = BalancingLogit(ridge=0.1).fit(X, r)
    assert np.all(np.isfinite(model.coef_)) and model.balance_ > 0


def test_non_convergence_warns():
    X, r = _simulate(6, n=300)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        BalancingLogit(max_iter=1).fit(X, r)


def test_clone_and_params_round_trip():
    model = BalancingLogit(ridge=0.5, max_iter=7, tol=1e-6)
    params = {"ridge": 0.5, "max_iter": 7, "tol": 1e-6}
    assert model.get_params() == params
    assert clone(model).get_params() == params
    assert BalancingLogit().set_params(**params).get_params() == params
    fitted = BalancingLogit().fit(*_simulate(7, n=200))
    assert not hasattr(clone(fitted), "coef_")


def test_is_parametric():
    assert is_parametric(BalancingLogit())
    assert is_parametric(make_pipeline(StandardScaler(), BalancingLogit()))


@pytest.fixture(scope="module")
def design_data():
    design = LinearGaussianDesign(dropout=(0.2,) * 3, xi=1.0)
    design.intercepts()
    return design.sample(np.random.default_rng(8), n=1000)


def _fit(est, d):
    return est.fit(d["X"], d["outcome"], d["treatment"], short=d["short"])


@pytest.mark.filterwarnings("ignore::causalkit.exceptions.ClippingWarning")
def test_monotone_aipw_with_stagewise_balancing_weights(design_data):
    est = _fit(MonotoneAIPW(selection_model=BalancingLogit()), design_data)
    result = est.estimate()
    assert np.isfinite(est.ate_) and np.isfinite(result.std_error) and result.std_error > 0
    assert abs(est.ate_ - design_data["truth"]) < 5 * result.std_error
    assert len(est.folds_) == 1                                # cv="auto": fitted in sample
    data = check_monotone_data(design_data["X"], design_data["outcome"],
                               design_data["treatment"], short=design_data["short"])
    selection = est.fold_models_[0]["selection"]
    assert all(isinstance(m, BalancingLogit) for m in selection)
    for k, model in enumerate(selection):
        rows = data.at_risk(k)
        H = np.column_stack([data.X[rows], data.a[rows], data.Z[rows, :k]])
        R = data.R[rows, k]
        p = model.predict_proba(H)[:, 1]
        assert p[R == 1].min() >= est.selection_floor          # the floor binds on no weight
        w = R / p
        np.testing.assert_allclose(w @ H, H.sum(axis=0), atol=1e-6 * rows.sum())
        assert w.sum() == pytest.approx(rows.sum(), rel=1e-10)


@pytest.mark.filterwarnings("ignore::causalkit.exceptions.ClippingWarning")
@pytest.mark.filterwarnings("ignore::causalkit.exceptions.CausalkitWarning")
@pytest.mark.parametrize("cls", [SequentialIPW, SequentialTMLE])
def test_other_estimators_accept_it(cls, design_data):
    est = _fit(cls(selection_model=BalancingLogit()), design_data)
    assert np.isfinite(est.ate_) and np.isfinite(est.estimate().std_error)
    assert all(isinstance(m, BalancingLogit) for m in est.selection_model_)
