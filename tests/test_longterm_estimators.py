"""Exact reductions, reference checks and the estimator interface of causalkit.longterm."""

import numpy as np
import pytest
import statsmodels.api as sm
from sklearn.base import clone
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from causalkit import Estimate
from causalkit.exceptions import ClippingWarning, OverlapWarning
from causalkit.longterm import (
    CompleteCase,
    LinearGaussianDesign,
    MonotoneAIPW,
    NaiveIPW,
    SeqMSM,
    SequentialIPW,
    SequentialRegression,
    SequentialTMLE,
)
from causalkit.longterm._scores import _squared_residual_model, combine_aipw, second_moment

ALL = [SequentialIPW, SequentialRegression, SeqMSM, MonotoneAIPW, CompleteCase, NaiveIPW]


@pytest.fixture(scope="module")
def full():
    """No drop-out at all."""
    return LinearGaussianDesign(dropout=(0.0, 0.0, 0.0)).sample(np.random.default_rng(1), n=500)


@pytest.fixture(scope="module")
def dropout():
    return LinearGaussianDesign(dropout=(0.2, 0.25, 0.25)).sample(np.random.default_rng(2),
                                                                  n=800)


def _args(s):
    return s["X"], s["treatment"], s["short"], s["outcome"]


def _roles(s):
    return dict(X=s["X"], y=s["outcome"], treatment=s["treatment"], short=s["short"])


def test_no_dropout_sequential_regression_is_t_learner(full):
    X, a, S, y = _args(full)
    rf = RandomForestRegressor(n_estimators=20, min_samples_leaf=5, random_state=0)
    est = SequentialRegression(outcome_model=rf).fit(X, y, a, short=S)
    m = [clone(rf).fit(X[a == arm], y[a == arm]).predict(X) for arm in (0, 1)]
    assert est.ate_ == pytest.approx(np.mean(m[1] - m[0]), abs=1e-12)
    np.testing.assert_allclose(est.effect(X), m[1] - m[0], atol=1e-12)
    # plain ICE ("replace_all") equals the T-learner for OLS (nested projections)
    ice = SequentialRegression(mode="replace_all").fit(X, y, a, short=S)
    ols = [LinearRegression().fit(X[a == arm], y[a == arm]).predict(X) for arm in (0, 1)]
    assert ice.ate_ == pytest.approx(np.mean(ols[1] - ols[0]), abs=1e-10)


def test_no_dropout_ipw_is_standard_ipw(full):
    X, a, S, y = _args(full)
    model = LogisticRegression(C=1e4, solver="newton-cholesky")
    e = model.fit(X, a).predict_proba(X)[:, 1]
    ht = np.mean(a * y / e - (1 - a) * y / (1 - e))
    hajek = (np.sum(a * y / e) / np.sum(a / e)
             - np.sum((1 - a) * y / (1 - e)) / np.sum((1 - a) / (1 - e)))
    est = SequentialIPW(propensity_model=model).fit(X, y, a, short=S)
    assert est.ate_ == pytest.approx(ht, abs=1e-10)
    np.testing.assert_array_equal(est.continuation_, 1.0)
    assert SequentialIPW(propensity_model=model, normalize=True).fit(X, y, a, short=S).ate_ == \
        pytest.approx(hajek, abs=1e-10)


@pytest.mark.parametrize("normalize", [False, True])
def test_single_stage_aipw_is_standard_missing_outcome_aipw(dropout, normalize):
    """T = 1: the plain form is the textbook AIPW for a missing-at-random outcome, the ratio form
    replaces the weighted mean residual by its Hajek version ``sum w res / sum w``."""
    X, a, _, y = _args(dropout)
    y = y.copy()
    r = (np.isfinite(y)).astype(int)
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=1e4, solver="newton-cholesky"))
    e = clf.fit(X, a).predict_proba(X)[:, 1]
    XA = np.column_stack([X, a])
    lam = clone(clf).fit(XA, r).predict_proba(XA)[:, 1]
    phi = []
    for arm, e_arm in ((0, 1 - e), (1, e)):
        fit = (r == 1) & (a == arm)
        m = LinearRegression().fit(X[fit], y[fit]).predict(X)
        res = np.where(r == 1, np.nan_to_num(y) - m, 0.0)
        w = (a == arm) * r / (e_arm * lam)
        if normalize:
            b = np.sum(w * res) / np.sum(w)
            phi.append(m + b + w * (res - b) / w.mean())
        else:
            phi.append(m + w * res)
    est = MonotoneAIPW(cv=1, normalize=normalize, variance="empirical").fit(X, y, a)
    assert est.ate_ == pytest.approx(np.mean(phi[1] - phi[0]), abs=1e-10)
    ref = Estimate.from_influence(np.mean(phi[1] - phi[0]), phi[1] - phi[0])
    assert est.estimate().std_error == pytest.approx(ref.std_error, rel=1e-10)


def test_ratio_form_is_invariant_to_the_level_of_the_weights():
    """Scaling every stage weight by a constant (a systematic error in their level) moves the
    plain AIPW mean by that constant times the weighted residual sum and leaves the ratio form,
    whose mean is ``mean(m_1) + sum_t sum W D / sum W``, unchanged."""
    rng = np.random.default_rng(0)
    n, T = 500, 3
    m_first = rng.normal(size=(n, 2))
    responder = rng.random((n, T, 2)) < 0.6
    W = np.where(responder, rng.exponential(2.0, size=(n, T, 2)), 0.0)
    D = np.where(responder, rng.normal(0.3, 1.0, size=(n, T, 2)), 0.0)
    ratio = combine_aipw(m_first, W, D, normalize=True)
    expected = m_first.mean(axis=0) + np.sum(np.sum(W * D, axis=0) / W.sum(axis=0), axis=0)
    np.testing.assert_allclose(ratio.mean(axis=0), expected, rtol=1e-12)
    np.testing.assert_allclose(combine_aipw(m_first, 1.3 * W, D, normalize=True), ratio,
                               rtol=1e-12)
    plain = combine_aipw(m_first, W, D).mean(axis=0)
    np.testing.assert_allclose(combine_aipw(m_first, 1.3 * W, D).mean(axis=0) - plain,
                               0.3 * np.sum(W * D, axis=(0, 1)) / n, rtol=1e-10)


def test_ratio_form_with_a_constant_chain_is_hajek_ipw(dropout):
    """With a constant outcome chain the stage corrections telescope: the ratio-form AIPW is
    ``sum W_T Y / sum W_T`` per arm, the Hajek sequential IPW, whatever the constants."""
    aipw = MonotoneAIPW(outcome_model=DummyRegressor(), normalize=True, cv=1)
    hajek = SequentialIPW(normalize=True).fit(**_roles(dropout))
    assert aipw.fit(**_roles(dropout)).ate_ == pytest.approx(hajek.ate_, abs=1e-10)


def test_continuation_probabilities_match_statsmodels_logit(dropout):
    est = SequentialIPW().fit(**_roles(dropout))
    X, a = dropout["X"], dropout["treatment"]
    Z = np.column_stack([dropout["short"], dropout["outcome"]])
    R = dropout["observed"]
    for k in range(3):
        rows = np.ones(len(a), bool) if k == 0 else R[:, k - 1] == 1
        design = sm.add_constant(np.column_stack([X, a, Z[:, :k]])[rows])
        ref = sm.Logit(R[rows, k], design).fit(disp=0).predict(design)
        np.testing.assert_allclose(est.continuation_[rows, k], ref, atol=2e-3)
        assert np.isnan(est.continuation_[~rows, k]).all()
    # the final weight is 1 / (e_A * lambda_1 * lambda_2 * lambda_3)
    e_own = np.where(a == 1, est.propensity_, 1 - est.propensity_)
    done = R[:, 2] == 1
    np.testing.assert_allclose(est.weights_[done, 2],
                               1 / (e_own * est.continuation_.prod(axis=1))[done], rtol=1e-10)


def test_interface_and_protocol(dropout):
    X = dropout["X"]
    for cls in ALL:
        est = cls()
        assert clone(est).get_params() == est.get_params()
        assert cls.__doc__.strip()
        fitted = est.fit(**_roles(dropout))
        res = fitted.estimate(n_boot=20)
        assert isinstance(res, Estimate) and res.std_error > 0
        lo, hi = res.conf_int()
        assert lo < res.value < hi
        assert fitted.effect(X[:10]).shape == (10,)
        assert fitted.influence_.shape == (800,) or cls is CompleteCase


def test_bootstrap_inference(dropout):
    est = SequentialRegression().fit(**_roles(dropout))
    boot = est.estimate(inference="bootstrap", n_boot=40, random_state=0)
    assert boot.replicates.size == 40
    assert boot.value == est.ate_
    infl = est.estimate()
    # the influence-function SE is an upper bound for the correctly specified OLS chain
    assert 0.5 * infl.std_error < boot.std_error < 1.5 * infl.std_error


def test_aipw_cross_fitting_is_deterministic(dropout):
    a1 = MonotoneAIPW(random_state=4).fit(**_roles(dropout))
    a2 = MonotoneAIPW(random_state=4).fit(**_roles(dropout))
    assert a1.ate_ == a2.ate_
    assert a1.scores_.shape == (800, 2)
    assert np.isfinite(a1.weights_[dropout["observed"] == 1]).all()
    assert set(a1.ess_.columns) >= {"stage", "treatment", "ess", "n_observed"}


def test_extreme_weights_warn():
    design = LinearGaussianDesign(dropout=(0.3, 0.5, 0.6), xi=4.0)
    s = design.sample(np.random.default_rng(0), n=800)
    with pytest.warns(OverlapWarning, match="effective sample size"):
        SequentialIPW(ess_warning=0.5).fit(**_roles(s))
    with pytest.warns(ClippingWarning):
        est = SequentialIPW(selection_floor=0.3).fit(**_roles(s))
    assert est.n_clipped_.sum() > 0
    assert np.nanmin(est.continuation_) >= 0.3


def test_msm_weights(dropout):
    cum = SeqMSM(weights="cumulative").fit(**_roles(dropout))
    stage = SeqMSM(weights="stagewise").fit(**_roles(dropout))
    plain = SequentialRegression().fit(**_roles(dropout))
    assert cum.ate_ != plain.ate_ and stage.ate_ != plain.ate_
    # all three are consistent for the same estimand on the correctly specified chain
    assert abs(cum.ate_ - plain.ate_) < 0.3 and abs(stage.ate_ - plain.ate_) < 0.3


@pytest.mark.parametrize("cls", [MonotoneAIPW, SequentialTMLE])
def test_substitution_variance_agrees_with_the_empirical_one_without_dropout(cls):
    """Without drop-out every unit is a responder, so averaging the modelled squared residuals
    over the units at risk and averaging the squared residuals themselves estimate the same
    variance (the Poisson fit's intercept equation makes the two sums equal up to the
    propensity weighting)."""
    rng = np.random.default_rng(3)
    n = 2000
    X = rng.normal(size=(n, 3))
    a = rng.binomial(1, 1 / (1 + np.exp(-X[:, 0])))
    y = (X @ [1.0, 0.5, -0.5] + a * (1 + X[:, 1])
         + rng.normal(size=n) * (1 + 0.5 * np.abs(X[:, 2])))
    substitution = cls().fit(X, y, a)
    empirical = cls(variance="empirical").fit(X, y, a)
    assert substitution.ate_ == empirical.ate_
    assert substitution.estimate().std_error == pytest.approx(
        empirical.estimate().std_error, rel=0.03)


def test_second_moment_follows_a_residual_with_a_conditional_mean():
    """A wrong outcome chain leaves residuals with a conditional mean: with ``D = 1 + H b + e``
    the second moment ``E[D^2 | H] = (1 + H b)^2 + 1`` is quadratic in ``H``. The squared
    least-squares mean plus the log-linear variance recovers it, in the tails too (90% of the
    relative errors below 10%); a log-linear model of ``D^2`` alone does not."""
    rng = np.random.default_rng(11)
    b = np.array([1.0, -0.5, 0.5])
    H = rng.normal(size=(20_000, 3))
    D = 1 + H @ b + rng.normal(size=H.shape[0])
    at = rng.normal(size=(2000, 3)) * 1.5               # beyond the fitting spread as well
    truth = (1 + at @ b) ** 2 + 1
    fitted = second_moment(H, D, at)
    loglinear = D.var() * _squared_residual_model().fit(H, D ** 2 / D.var()).predict(at)
    assert np.mean(fitted) == pytest.approx(np.mean(truth), rel=0.02)
    assert np.quantile(np.abs(fitted / truth - 1), 0.9) < 0.1
    assert np.quantile(np.abs(loglinear / truth - 1), 0.9) > 0.5


@pytest.mark.parametrize("hc3", [False, True])
def test_second_moment_of_least_squares_residuals_is_the_log_linear_fit(hc3):
    """In-sample least-squares residuals have no linear mean on their own regressors, so the
    squared-mean part vanishes and the log-linear model of the squared residuals is all; with
    the chain's leverages, of the squared leave-one-out residuals ``D / (1 - h)`` (HC3)."""
    rng = np.random.default_rng(12)
    H = rng.normal(size=(300, 4))
    y = H @ [1.0, 2.0, 0.0, -1.0] + rng.normal(size=300) * np.exp(0.3 * H[:, 0])
    D = y - LinearRegression().fit(H, y).predict(H)
    design = np.c_[np.ones(len(H)), H]
    h = np.einsum("ij,ji->i", design, np.linalg.pinv(design)) if hc3 else None
    squared = (D / (1 - h) if hc3 else D) ** 2
    level = np.mean(squared)
    loglinear = level * _squared_residual_model().fit(H, squared / level).predict(H[:50])
    np.testing.assert_allclose(second_moment(H, D, H[:50], h), loglinear, rtol=1e-6)


@pytest.mark.parametrize("cls", [MonotoneAIPW, SequentialTMLE])
def test_unknown_variance_is_named(cls, dropout):
    with pytest.raises(ValueError, match="variance must be one of"):
        cls(variance="sandwich").fit(dropout["X"], dropout["outcome"], dropout["treatment"],
                                     short=dropout["short"])


@pytest.mark.parametrize("cls", [MonotoneAIPW, SequentialTMLE])
def test_weight_cap_is_applied_counted_and_reported(cls):
    """The cap binds on exactly the responders whose uncapped cumulative weight exceeds it,
    is reported per stage with a ClippingWarning, and an infinite cap changes nothing."""
    s = LinearGaussianDesign(dropout=(0.4, 0.4, 0.4), xi=1.0).sample(
        np.random.default_rng(17), n=600)
    args = (s["X"], s["outcome"], s["treatment"])
    plain = MonotoneAIPW().fit(*args, short=s["short"])
    cap = float(np.nanquantile(plain.weights_[:, -1], 0.9))
    expected = np.sum(np.nan_to_num(plain.weights_) > cap, axis=0)
    assert expected[-1] > 0
    with pytest.warns(ClippingWarning, match="capped at"):
        capped = cls(weight_cap=cap).fit(*args, short=s["short"])
    np.testing.assert_array_equal(capped.n_capped_, expected)
    default = cls().fit(*args, short=s["short"])
    assert not default.n_capped_.any()
    assert cls(weight_cap=np.inf).fit(*args, short=s["short"]).ate_ == default.ate_
    if cls is MonotoneAIPW:
        assert np.nanmax(capped.weights_) <= cap


@pytest.mark.parametrize("cls", [MonotoneAIPW, SequentialTMLE])
@pytest.mark.parametrize("cap", [0, -1.0, "big"])
def test_bad_weight_cap_is_named(cls, cap):
    s = LinearGaussianDesign(dropout=(0.2, 0.2)).sample(np.random.default_rng(0), n=200)
    with pytest.raises(ValueError, match="weight_cap"):
        cls(weight_cap=cap).fit(s["X"], s["outcome"], s["treatment"], short=s["short"])
