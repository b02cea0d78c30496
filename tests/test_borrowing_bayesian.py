"""RobustMixturePriorBorrowing: the conjugate mixture update against numerical integration, the
trial and external pieces against direct least squares, and the two limits of dynamic
borrowing (prior-data conflict -> trial only; exchangeable controls -> full borrowing)."""

import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from causalkit.borrowing import FullBorrowing, TrialOnly
from causalkit.borrowing.bayesian import RobustMixturePriorBorrowing, normal_mixture_posterior
from causalkit.exceptions import CausalkitWarning


def hybrid(seed, *, n_trial=200, n_ext=400, shift=0.0, p=3, binary=False):
    """Trial (1:1) and external controls with a covariate shift; ``shift`` is added to every
    external outcome (a prior-data conflict of that size)."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_trial, p)), rng.normal(0.3, 1.0, size=(n_ext, p))])
    a = np.r_[rng.permutation(np.repeat([0, 1], n_trial // 2)), np.zeros(n_ext, int)]
    s = np.r_[np.ones(n_trial, int), np.zeros(n_ext, int)]
    lin = 1.0 + X @ np.linspace(1.0, 0.5, p) + 1.5 * a
    if binary:
        y = (rng.random(a.size) < 1 / (1 + np.exp(-(lin - 1.5) / 2))).astype(float)
    else:
        y = lin + rng.normal(size=a.size)
    y = y + shift * (1 - s)
    return X, y, a, s


def fit(est, X, y, a, s):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        return est.fit(X, y, a, trial=s)


def quad_posterior(theta_hat, s2, prior):
    """Posterior weight of component 0, mean and variance of theta by quadrature."""
    def prior_k(t, k):
        w, m, sd = prior[k]
        return w * stats.norm.pdf(t, m, sd)

    def lik(t):
        return stats.norm.pdf(theta_hat, t, np.sqrt(s2))

    lo = min(theta_hat, *prior[:, 1]) - 12 * max(np.sqrt(s2), *prior[:, 2])
    hi = max(theta_hat, *prior[:, 1]) + 12 * max(np.sqrt(s2), *prior[:, 2])
    points = sorted({theta_hat, *prior[:, 1]})
    kw = dict(points=points, limit=400, epsabs=0, epsrel=1e-11)

    def moment(f):
        return integrate.quad(f, lo, hi, **kw)[0]

    z = moment(lambda t: (prior_k(t, 0) + prior_k(t, 1)) * lik(t))
    w0 = moment(lambda t: prior_k(t, 0) * lik(t)) / z
    mean = moment(lambda t: t * (prior_k(t, 0) + prior_k(t, 1)) * lik(t)) / z
    var = moment(lambda t: (t - mean) ** 2 * (prior_k(t, 0) + prior_k(t, 1)) * lik(t)) / z
    return w0, mean, var


@pytest.mark.parametrize("theta_hat", [0.0, 0.15, 0.3, 0.6, 1.5])
def test_mixture_update_matches_numerical_integration(theta_hat):
    prior = np.array([[0.8, 0.1, 0.05], [0.2, 0.1, 1.0]])
    s2 = 0.1 ** 2
    wp, mp, vp = normal_mixture_posterior(theta_hat, s2, prior[:, 0], prior[:, 1],
                                          prior[:, 2] ** 2)
    w0, mean, var = quad_posterior(theta_hat, s2, prior)
    assert wp.sum() == pytest.approx(1.0, abs=1e-14)
    assert wp[0] == pytest.approx(w0, rel=1e-7, abs=1e-12)
    assert wp @ mp == pytest.approx(mean, rel=1e-7, abs=1e-10)
    assert wp @ (vp + (mp - wp @ mp) ** 2) == pytest.approx(var, rel=1e-7)


@pytest.mark.parametrize("shift", [0.0, 0.4, 0.8])
def test_fitted_posterior_matches_numerical_integration(shift):
    X, y, a, s = hybrid(3, n_trial=60, n_ext=40, shift=shift)
    est = fit(RobustMixturePriorBorrowing(), X, y, a, s)
    d = est.details_
    w0, mean, var = quad_posterior(d["theta0_trial"], d["se_trial"] ** 2, est.prior_)
    assert est.posterior_weight_ == pytest.approx(w0, rel=1e-7, abs=1e-12)
    assert d["theta0_posterior"] == pytest.approx(mean, rel=1e-7)
    assert d["sd_posterior"] ** 2 == pytest.approx(var, rel=1e-7)
    # ATE = treated-arm AIPW mean - posterior mean of theta_0 = trial-only + (theta_hat - mean)
    trial = fit(TrialOnly(), X, y, a, s).estimate()
    res = est.estimate()
    assert res.value == pytest.approx(trial.value + d["theta0_trial"] - mean, rel=1e-10)
    np.testing.assert_allclose(est.borrowed_, est.posterior_weight_)
    assert est.n_borrowed_ == pytest.approx(est.posterior_weight_ * 40)


def test_trial_and_external_pieces_match_least_squares():
    """theta_0-hat = mean over the trial of the control-arm OLS fit, s_0^2 = RSS / n_C^2
    (constant propensity); the external estimate uses OLS on the external controls; the SE
    replaces exactly the control-residual part s_0^2 of the trial-only variance."""
    X, y, a, s = hybrid(5, n_trial=80, n_ext=120, shift=0.3)
    est = fit(RobustMixturePriorBorrowing(), X, y, a, s)
    d = est.details_
    Z = np.column_stack([np.ones(len(y)), X])
    ctrl = (s == 1) & (a == 0)
    beta_c, rss, *_ = np.linalg.lstsq(Z[ctrl], y[ctrl], rcond=None)
    assert d["theta0_trial"] == pytest.approx(Z[s == 1].mean(axis=0) @ beta_c, rel=1e-9)
    assert d["se_trial"] ** 2 == pytest.approx(rss[0] / ctrl.sum() ** 2, rel=1e-9)
    assert d["unit_sd"] ** 2 == pytest.approx(rss[0] / (ctrl.sum() - 1), rel=1e-9)
    beta_e = np.linalg.lstsq(Z[s == 0], y[s == 0], rcond=None)[0]
    resid_e = y[s == 0] - Z[s == 0] @ beta_e
    fitted_mean = Z[s == 1].mean(axis=0) @ beta_e
    # m_E - (mean OLS fit) is a convex combination of the external residuals
    assert resid_e.min() <= d["theta0_external"] - fitted_mean <= resid_e.max()
    assert d["se_external"] <= np.sqrt(np.sum(resid_e ** 2))
    trial = fit(TrialOnly(), X, y, a, s).estimate()
    res = est.estimate()
    np.testing.assert_allclose(res.std_error ** 2 - d["sd_posterior"] ** 2,
                               trial.std_error ** 2 - d["se_trial"] ** 2, rtol=1e-9)


def test_prior_data_conflict_falls_back_to_trial_only():
    """A conflict of 10 outcome SDs: the informative component gets no posterior weight and
    the estimate is the trial-only one up to the unit-information shrinkage
    s_0^2 (theta_hat - m_E) / (sigma^2 + s_0^2)."""
    X, y, a, s = hybrid(11, shift=10.0)
    est = fit(RobustMixturePriorBorrowing(), X, y, a, s)
    d = est.details_
    trial = fit(TrialOnly(), X, y, a, s).estimate()
    res = est.estimate()
    assert est.posterior_weight_ < 1e-12 and est.n_borrowed_ < 1e-9
    s02, sig2 = d["se_trial"] ** 2, d["unit_sd"] ** 2
    shrink = s02 * (d["theta0_trial"] - d["theta0_external"]) / (sig2 + s02)
    assert res.value == pytest.approx(trial.value + shrink, rel=1e-9)
    # s_0^2 / sigma^2 = (n_C - 1) / n_C^2 < 1 / n_C: one unit of information against n_C
    assert abs(res.value - trial.value) < abs(d["theta0_trial"] - d["theta0_external"]) / 100
    assert res.std_error == pytest.approx(trial.std_error, rel=0.02)
    full = fit(FullBorrowing(), X, y, a, s).estimate()
    assert abs(full.value - 1.5) > 10 * abs(res.value - 1.5)


def test_posterior_weight_decreases_with_the_conflict():
    """Both components are centred at m_E and s_E < sigma, so the informative weight is a
    decreasing function of |theta_hat - m_E|."""
    rows = []
    for shift in np.linspace(-1.5, 1.5, 13):
        est = fit(RobustMixturePriorBorrowing(), *hybrid(2, shift=shift))
        d = est.details_
        rows.append((abs(d["theta0_trial"] - d["theta0_external"]), est.posterior_weight_))
    rows = np.array(sorted(rows))
    assert np.all(np.diff(rows[:, 1]) <= 1e-12)
    assert rows[0, 1] > 0.9 and rows[-1, 1] < 1e-6


def test_exchangeable_controls_give_nearly_full_borrowing():
    """With n_C = 100 trial controls and 1,000 exchangeable external controls the prior odds
    4:1 times the Bayes factor (about 9 at no conflict) put a posterior weight of about 0.97 on
    the informative component at the median conflict; the estimates follow full borrowing."""
    weights, gap, err, err_trial = [], [], [], []
    for seed in range(40):
        X, y, a, s = hybrid(100 + seed, n_ext=1000)
        est = fit(RobustMixturePriorBorrowing(), X, y, a, s)
        full = fit(FullBorrowing(variance_ratio=1.0), X, y, a, s).estimate()
        trial = fit(TrialOnly(), X, y, a, s).estimate()
        weights.append(est.posterior_weight_)
        gap.append(abs(est.estimate().value - full.value) / full.std_error)
        err.append(est.estimate().value - 1.5)
        err_trial.append(trial.value - 1.5)
    assert np.median(weights) > 0.9
    assert np.median(gap) < 0.25
    assert np.sqrt(np.mean(np.square(err))) < 0.9 * np.sqrt(np.mean(np.square(err_trial)))


def test_robust_weight_limits():
    """robust_weight = 0: the informative prior alone (conjugate normal update, weight 1);
    robust_weight = 1: only the unit-information component."""
    X, y, a, s = hybrid(7, shift=0.3)
    informative = fit(RobustMixturePriorBorrowing(robust_weight=0.0), X, y, a, s)
    d = informative.details_
    assert informative.posterior_weight_ == 1.0
    prec = 1 / d["se_trial"] ** 2 + 1 / d["se_external"] ** 2
    mean = (d["theta0_trial"] / d["se_trial"] ** 2
            + d["theta0_external"] / d["se_external"] ** 2) / prec
    assert d["theta0_posterior"] == pytest.approx(mean, rel=1e-10)
    assert d["sd_posterior"] == pytest.approx(prec ** -0.5, rel=1e-10)
    vague = fit(RobustMixturePriorBorrowing(robust_weight=1.0), X, y, a, s)
    assert vague.posterior_weight_ == 0.0 and vague.n_borrowed_ == 0.0


def test_binary_outcome_normal_approximation():
    X, y, a, s = hybrid(9, n_ext=1000, binary=True)
    est = fit(RobustMixturePriorBorrowing(), X, y, a, s)
    res = est.estimate()
    assert 0 <= est.posterior_weight_ <= 1 and np.isfinite(res.std_error)
    assert 0 <= est.details_["theta0_posterior"] <= 1
    # external response rate 0.95 against a trial-control rate near 0.4
    rng = np.random.default_rng(1)
    y_conflict = np.where(s == 1, y, rng.random(len(y)) < 0.95)
    conflict = fit(RobustMixturePriorBorrowing(), X, y_conflict, a, s)
    assert y[(s == 1) & (a == 0)].mean() < 0.6
    assert conflict.posterior_weight_ < 1e-6


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.2", None])
def test_robust_weight_is_validated(bad):
    with pytest.raises(ValueError, match="robust_weight"):
        fit(RobustMixturePriorBorrowing(robust_weight=bad), *hybrid(0, n_ext=30))
