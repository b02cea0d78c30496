"""Each long-term estimator's own inference: the stacked sandwich of the least-squares chain
(checked against statsmodels' HC2 and by simulation), the leave-one-out residuals of the
substitution variance, the chain-estimation term of the AIPW interval (checked against the stacked
sandwich), the estimated-weights term of the IPW
influence function (checked against statsmodels' IPW and by simulation), bootstrap-only
plug-ins, and the unnormalised-IPW warning."""

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from statsmodels.treatment.treatment_effects import TreatmentEffect

from causalkit.exceptions import CausalkitWarning
from causalkit.longterm import (
    LinearGaussianDesign,
    MonotoneAIPW,
    SeqMSM,
    SequentialIPW,
    SequentialRegression,
)
from causalkit.longterm._data import check_monotone_data
from causalkit.longterm._sandwich import (
    chain_estimation_term,
    leverage,
    loo_residual,
    ols_influence,
)


def _regression_data(seed=0, n=300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = 1.0 + X @ [1.0, -0.5, 0.2] + rng.normal(size=n) * (1 + np.abs(X[:, 0]))
    return sm.add_constant(X), y, rng.uniform(0.5, 3.0, size=n)


@pytest.mark.parametrize("weighted", [False, True])
def test_ols_influence_is_hc2(weighted):
    """One stage: sum IF IF' / n^2 equals statsmodels' HC2 covariance (OLS and WLS)."""
    D, y, w = _regression_data()
    w = w if weighted else np.ones_like(y)
    fit = sm.WLS(y, D, weights=w).fit(cov_type="HC2")
    rows = np.ones(y.size, dtype=bool)
    infl = ols_influence(D, y - fit.fittedvalues, w, rows)
    np.testing.assert_allclose(infl.T @ infl / y.size ** 2, fit.cov_params(), rtol=1e-10)


def test_loo_residual_is_the_residual_of_the_fit_without_the_unit():
    """``e_i / (1 - h_ii)`` equals ``y_i`` minus the prediction of the least squares fitted on
    the other units, and the sandwich with these residuals is statsmodels' HC3 covariance; a
    unit fitted exactly (leverage 1: the only one with its value of a dummy) keeps 0."""
    D, y, _ = _regression_data(n=60)
    fit = sm.OLS(y, D).fit(cov_type="HC3")
    loo = loo_residual(y - fit.fittedvalues, leverage(D))
    for i in (0, 17, 59):
        others = np.delete(np.arange(y.size), i)
        beta = np.linalg.lstsq(D[others], y[others], rcond=None)[0]
        assert loo[i] == pytest.approx(y[i] - D[i] @ beta, rel=1e-9)
    bread = np.linalg.inv(D.T @ D)
    np.testing.assert_allclose(bread @ (D.T * loo ** 2) @ D @ bread, fit.cov_params(),
                               rtol=1e-10)
    alone = np.c_[D, np.eye(y.size)[:, 0]]
    exact = y - alone @ np.linalg.lstsq(alone, y, rcond=None)[0]
    assert loo_residual(exact, leverage(alone))[0] == 0.0


def test_ols_influence_on_a_subset():
    """Rows outside the fit carry no score of their own; the scaling is by all n units."""
    D, y, w = _regression_data(n=200)
    rows = np.zeros(400, dtype=bool)
    rows[::2] = True
    fit = sm.OLS(y, D).fit(cov_type="HC2")
    infl = ols_influence(D, y - fit.fittedvalues, np.ones(200), rows)
    assert np.all(infl[~rows] == 0)
    np.testing.assert_allclose(infl.T @ infl / 400 ** 2, fit.cov_params(), rtol=1e-10)


def test_flexible_outcome_model_is_bootstrap_only():
    s = LinearGaussianDesign(dropout=(0.2, 0.2, 0.2)).sample(np.random.default_rng(3), n=300)
    rf = RandomForestRegressor(n_estimators=10, min_samples_leaf=10, random_state=0)
    est = SequentialRegression(outcome_model=rf).fit(s["X"], s["outcome"], s["treatment"],
                                                     short=s["short"])
    assert est._default_inference == "bootstrap"
    with pytest.raises(ValueError, match="inference"):
        est.estimate(inference="influence")
    assert SequentialRegression()._default_inference == "influence"


def test_ipw_standard_error_with_estimated_propensity_matches_statsmodels():
    """No drop-out: the Hajek IPW with its estimated-weights influence function is statsmodels'
    IPW (propensity and weighted means solved jointly by GMM), estimate and SE."""
    rng = np.random.default_rng(5)
    n = 2000
    X = rng.normal(size=(n, 3))
    a = rng.binomial(1, 1 / (1 + np.exp(-(0.3 + X @ [0.8, -0.5, 0.3]))))
    y = 2 + X @ [1.0, 1.0, -1.0] + 1.5 * a + rng.normal(size=n)
    short = X[:, :1] + rng.normal(size=(n, 1))
    select = sm.Logit(a, sm.add_constant(X)).fit(disp=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # statsmodels: its outcome model is unused here
        reference = TreatmentEffect(sm.OLS(y, sm.add_constant(a)), a,
                                    results_select=select).ipw().summary_frame().loc["ATE"]
    result = SequentialIPW(normalize=True, variance="estimated_weights").fit(
        X, y, a, short=short).estimate()
    assert result.value == pytest.approx(reference["coef"], rel=1e-5)
    assert result.std_error == pytest.approx(reference["std err"], rel=1e-4)
    # treating the weights as known is conservative (Robins, Rotnitzky & Zhao 1994)
    known = SequentialIPW(normalize=True).fit(X, y, a, short=short).estimate()
    assert known.value == result.value and known.std_error > result.std_error
    forest = RandomForestClassifier(n_estimators=5, random_state=0)
    for bad in ({"propensity_model": forest}, {"selection_model": forest},
                {"variance": "sandwich"}):
        with pytest.raises(ValueError, match="variance"):
            SequentialIPW(**{"variance": "estimated_weights", **bad}).fit(X, y, a, short=short)


def test_ipw_standard_error_with_estimated_weights_matches_the_spread():
    """Light drop-out (10% per stage, n = 1000, 150 draws): the IPW influence function with the
    propensity and the three continuation models estimated gives SE/SD near 1 and nominal
    coverage, unnormalised and Hajek (where the weights-known SE is too wide)."""
    design = LinearGaussianDesign(dropout=(0.1,) * 3, xi=1.0)
    design.intercepts()
    out = {False: [], True: []}
    for r in range(150):
        s = design.sample(np.random.default_rng([31, r]), n=1000)
        for normalize in out:
            res = SequentialIPW(normalize=normalize, variance="estimated_weights").fit(
                s["X"], s["outcome"], s["treatment"], short=s["short"]).estimate()
            out[normalize].append((res.value - s["truth"], res.std_error))
    for normalize, rows in out.items():
        err, se = np.array(rows).T
        assert 0.85 < se.mean() / err.std(ddof=1) < 1.15, normalize
        assert 0.91 <= np.mean(np.abs(err) <= 1.959964 * se) <= 0.99, normalize


def test_unnormalised_ipw_warns_on_a_far_outcome():
    s = LinearGaussianDesign(dropout=(0.2, 0.2, 0.2)).sample(np.random.default_rng(4), n=400)
    args = (s["X"], s["outcome"] + 150.0, s["treatment"])
    with pytest.warns(CausalkitWarning, match="normalize=True"):
        SequentialIPW().fit(*args, short=s["short"])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*normalize=True.*")
        SequentialIPW(normalize=True).fit(*args, short=s["short"])
        SequentialIPW().fit(s["X"], s["outcome"] - s["outcome"][~np.isnan(s["outcome"])].mean(),
                            s["treatment"], short=s["short"])


def _coverage(cls, reps, seed0, rate=0.4, n=1000):
    design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)
    out = []
    for r in range(reps):
        s = design.sample(np.random.default_rng(seed0 + r), n=n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalkitWarning)
            est = cls().fit(s["X"], s["outcome"], s["treatment"], short=s["short"]).estimate()
        out.append((est.value - s["truth"], est.std_error))
    err, se = np.array(out).T
    return np.mean(np.abs(err) <= 1.959964 * se), se.mean() / err.std(ddof=1)


def _chain_term(flat, seed, n=2000):
    """MonotoneAIPW (default in-sample least-squares chain, right for the linear design) with
    flat (wrong) or default (right) weight models at 40% drop-out per stage, its influence
    function, its chain-estimation term and SequentialRegression's estimate on the same data."""
    s = LinearGaussianDesign(dropout=(0.4, 0.4, 0.4), xi=1.0).sample(
        np.random.default_rng(seed), n=n)
    args = (s["X"], s["outcome"], s["treatment"])
    flat_models = {"propensity_model": DummyClassifier(strategy="prior"),
                   "selection_model": DummyClassifier(strategy="prior")}
    aipw = MonotoneAIPW(**(flat_models if flat else {})).fit(*args, short=s["short"])
    data = check_monotone_data(*args, short=s["short"])
    W = np.zeros((n, data.n_stages, 2))
    for arm in (0, 1):
        W[:, :, arm] = np.nan_to_num(aipw.weights_) * (data.a == arm)[:, None]
    term = chain_estimation_term(data, aipw.fold_models_[0]["outcome"], "impute_missing", W)
    return aipw, term, SequentialRegression().fit(*args, short=s["short"]).estimate()


def test_chain_term_with_flat_weights_is_the_stacked_sandwich():
    """With flat weights and the least-squares chain MonotoneAIPW is SequentialRegression, and
    its influence function plus the chain-estimation term has the spread of
    SequentialRegression's stacked sandwich (an independent derivation: one M-estimator);
    without the term it is far short (seeds 7500-7502)."""
    for seed in (7500, 7501, 7502):
        aipw, term, regression = _chain_term(flat=True, seed=seed)
        n = term.size
        assert aipw.ate_ == pytest.approx(regression.value, rel=1e-9)
        corrected = np.std(aipw.influence_ + term) / np.sqrt(n)
        assert corrected == pytest.approx(regression.std_error, rel=0.05)
        assert np.std(aipw.influence_) / np.sqrt(n) < 0.85 * regression.std_error


def test_chain_term_is_shrunk_away_with_right_weights():
    """With the default (right) weight models the weights balance the history up to noise and
    the shrunk term is an order of magnitude smaller than with flat weights, where it is as
    large as the influence function itself: its SD is under 0.15 of the influence function's
    with the right weights and over 0.9 with flat ones (seeds 7503-7505; measured 0.06-0.09
    and 1.04-1.28)."""
    for seed in (7503, 7504, 7505):
        aipw, term, _ = _chain_term(flat=False, seed=seed)
        assert np.std(term) < 0.15 * np.std(aipw.influence_)
        aipw, term, _ = _chain_term(flat=True, seed=seed)
        assert np.std(term) > 0.9 * np.std(aipw.influence_)


def test_seqmsm_defaults_to_the_bootstrap():
    assert SeqMSM()._default_inference == "bootstrap"
    assert "influence" in SeqMSM()._inferences


def test_sandwich_calibrated_reduced():
    """Reduced check (60 replications, seeds 7100-7159): SE/SD and coverage in a wide band."""
    cover, ratio = _coverage(SequentialRegression, 60, 7100)
    assert 0.8 <= ratio <= 1.25
    assert cover >= 0.85


@pytest.mark.slow
def test_sandwich_calibrated_full():
    """200 replications (seeds 7200-7399), 40% drop-out per stage, n = 1000."""
    cover, ratio = _coverage(SequentialRegression, 200, 7200)
    assert 0.9 <= ratio <= 1.1
    assert 0.93 <= cover <= 0.97
