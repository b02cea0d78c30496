"""Comparators for adaptive borrowing: no, full, calibrated-full, power-prior and
adaptive-lasso selective borrowing. All share ``fit(X, y, treatment, *, trial)`` /
``estimate()``.
"""

from __future__ import annotations

import warnings

import numpy as np

from causalkit.borrowing._base import BorrowingEstimator, fit_external_outcome, fit_nuisance
from causalkit.borrowing.efficient import EfficientBorrowing, trial_only_influence
from causalkit.borrowing.estimators import _Calibrated
from causalkit.borrowing.models import identified_columns
from causalkit.exceptions import FewBorrowedWarning

__all__ = ["TrialOnly", "FullBorrowing", "CalibratedFullBorrowing", "PowerPriorBorrowing",
           "SelectiveBorrowing"]


class _FixedSetBorrowing(BorrowingEstimator):
    """Efficient estimator on a borrowed set fixed in advance (none or all)."""

    def __init__(self, outcome_model=None, variance_ratio=1.0, propensity="constant",
                 random_state=None):
        self.outcome_model = outcome_model
        self.variance_ratio = variance_ratio
        self.propensity = propensity
        self.random_state = random_state

    def _external_outcomes(self, data):
        return data.y[data.n_trial:]

    def _borrow_all(self) -> bool:
        return True

    def _borrow(self, data):
        y_ext = self._external_outcomes(data)
        mu1, mu0, e, self.outcome_models_ = fit_nuisance(data, self.outcome_model,
                                                         self.propensity, self._seed("outcome"))
        engine = EfficientBorrowing(data, y_ext, mu1, mu0, e, self.variance_ratio)
        n = data.n_external if self._borrow_all() else 0
        return engine.evaluate(np.arange(n)), np.full(data.n_external, n > 0), {}


class TrialOnly(_FixedSetBorrowing):
    """Trial-only AIPW estimator (no borrowing).

    .. math:: \\hat\\tau = n_R^{-1}\\sum_{R=1}\\Big[\\hat\\mu_1-\\hat\\mu_0
        + \\frac{A(Y-\\hat\\mu_1)}{e} - \\frac{(1-A)(Y-\\hat\\mu_0)}{1-e}\\Big],

    SE = sd of the terms (ddof 0) over :math:`\\sqrt{n_R}`; external controls, if given, are
    ignored. It is the efficient estimator of ``causalkit.borrowing.efficient`` with an empty
    borrowed set. Reference: Tsiatis et al. (2008), *Stat. Med.* 27(23).

    Parameters
    ----------
    outcome_model : None, {"auto", "linear", "logistic"} or scikit-learn estimator
        Outcome regression fitted on each trial arm: any scikit-learn regressor, classifier
        (probability of class 1) or Pipeline; ``None``/``"auto"``: least squares, or logistic
        regression for a 0/1 outcome.
    variance_ratio : float or "estimate"
        Ratio :math:`r` of trial-control to external outcome variance in the efficient weights
        of the borrowing estimators (unused by trial-only, which borrows nothing). Default 1 for
        every estimator, so that they are compared like for like: :math:`r = 1` under
        distributional exchangeability (Li et al. 2023). ``"estimate"`` divides the
        trial controls' in-sample residual variance by the external controls' out-of-sample
        one, which gives :math:`\\hat r \\approx 0.85` under exact exchangeability in the Paper A
        design (the in-sample residuals are too small).
    propensity : {"constant", "logistic"}
        Trial treatment propensity.
    random_state : None, int or SeedSequence
        Seed of the nested models and of ``estimate(inference="bootstrap")``.
    """

    _label = "Trial only"

    def _uses_external(self) -> bool:
        return False

    def _borrow_all(self) -> bool:
        return False


class FullBorrowing(_FixedSetBorrowing):
    """Efficient estimator borrowing every external control (valid only under exchangeability).

    Parameters as :class:`TrialOnly`; see ``causalkit.borrowing.efficient`` for the formula.
    """

    _label = "Full borrowing"


class CalibratedFullBorrowing(_Calibrated, _FixedSetBorrowing):
    """Full borrowing after R-learner outcome calibration of the external controls.

    The calibration reuses the trial-control outcomes, which the influence SE ignores (in the
    Paper A design its 95% intervals covered about 80% of the time), so ``estimate()``
    defaults to the pipeline bootstrap, which refits the calibration on every resample. The
    calibration's cross-fitting folds follow the row order, so a permutation of the rows moves
    the estimate within its noise.

    Parameters
    ----------
    calibration : {"linear", "constant", "kernel"}
        Bias model of :class:`~causalkit.borrowing.calibration.OutcomeCalibrator`.
    cv : int, scikit-learn splitter or precomputed folds
        Cross-fitting folds of the calibration (over the pooled controls: trial controls, then
        external controls, each in input order).
    (others as :class:`TrialOnly`)

    Attributes
    ----------
    calibration_model_ : OutcomeCalibrator
    calibrated_outcomes_ : ndarray of shape (n_external,)
    folds_ : list of (train, test) index arrays
        The calibration folds, as rows of the data passed to ``fit``.
    """

    _label = "Calibrated full borrowing"
    _default_inference = "bootstrap"
    _row_order_dependent = True

    def __init__(self, outcome_model=None, calibration="linear", cv=5,
                 variance_ratio=1.0, propensity="constant", random_state=None):
        super().__init__(outcome_model=outcome_model, variance_ratio=variance_ratio,
                         propensity=propensity, random_state=random_state)
        self.calibration = calibration
        self.cv = cv


class PowerPriorBorrowing(BorrowingEstimator):
    """Bayesian power prior on the external controls, normal linear control model.

    With design :math:`\\tilde X = (1, X)`, trial controls :math:`(X_C, Y_C)`, external controls
    :math:`(X_E, Y_E)`, flat initial prior and plug-in :math:`\\sigma^2_0` (trial-control residual
    variance), the posterior of the control coefficients given power :math:`a_0` is normal with

    .. math:: \\hat\\beta_{a_0} = (X_C^\\top X_C + a_0X_E^\\top X_E)^{-1}(X_C^\\top Y_C +
              a_0X_E^\\top Y_E), \\qquad \\Sigma_{a_0} = \\sigma^2_0(X_C^\\top X_C +
              a_0X_E^\\top X_E)^{-1}.

    The treated arm uses OLS (posterior mean under a flat prior). The ATE is
    :math:`\\hat\\tau = \\bar x_R^\\top(\\hat\\beta_1-\\hat\\beta_{a_0})` and its SE
    :math:`\\{\\bar x_R^\\top(\\Sigma_1+\\Sigma_{a_0})\\bar x_R + s^2_{\\hat\\tau(X)}/n_R\\}^{1/2}`
    (posterior spread plus the spread of the fitted effects over the trial covariates).

    ``a0="eb"`` chooses :math:`a_0\\in(0,1]` by empirical Bayes: it maximises the closed-form
    marginal likelihood of the trial controls given the external data,
    :math:`Y_C \\sim N(X_C\\hat\\beta_E,
    \\sigma^2_0\\{I + a_0^{-1}X_C(X_E^\\top X_E)^{-1}X_C^\\top\\})`,
    over a grid of 200 values. A binary outcome is treated as a linear probability model.
    Reference: Ibrahim & Chen (2000), *Stat. Sci.* 15(1); Gravestock & Held (2017),
    *Pharm. Stat.* 16(3) for the empirical-Bayes power.

    Covariates aliased on the rows of a fit (the treated arm; the trial controls, pooled with
    the external controls when :math:`a_0 > 0`) are dropped from it, with a
    :class:`~causalkit.exceptions.RankDeficientWarning`, as R's ``lm`` does; each arm needs more
    units than identified parameters for its residual variance.

    Inference: the model gives no influence function; ``inference="influence"`` (the default)
    is the normal interval with the posterior SD above, ``"bootstrap"`` the pipeline bootstrap.

    Parameters
    ----------
    a0 : float in [0, 1] or "eb"
        Power of the external likelihood.
    random_state : None, int or SeedSequence
        Seed of ``estimate(inference="bootstrap")``.

    Attributes
    ----------
    a0_ : float
        The power used. ``n_borrowed_`` counts external controls with a positive power and the
        estimate's ``details`` report the effective number :math:`a_0 n_E`.
    coef_control_ : ndarray
        Posterior mean of the control coefficients (intercept first; 0 for aliased columns).
    """

    _label = "Power prior"
    _nuisance_slots = {}

    def __init__(self, a0="eb", random_state=None):
        self.a0 = a0
        self.random_state = random_state

    def _check_params(self) -> None:
        if not (self.a0 == "eb" or (np.isscalar(self.a0) and not isinstance(self.a0, str)
                                    and 0 <= self.a0 <= 1)):
            raise ValueError(f"a0 must be a number in [0, 1] or 'eb'; got {self.a0!r}")

    def _borrow(self, data):
        nT = data.n_trial
        Z = np.hstack([np.ones((data.n_rows, 1)), data.X])
        Zt, yt, at = Z[:nT], data.y[:nT], data.a[:nT]
        Z1, y1, Zc, yc = Zt[at == 1], yt[at == 1], Zt[at == 0], yt[at == 0]
        Ze, ye = Z[nT:], data.y[nT:]
        beta1, cov1, *_ = _ols(Z1, y1, data.names, "treated arm")
        _, _, sigma0, keep = _ols(Zc, yc, data.names, "control arm")
        a0 = self._empirical_bayes(Zc, yc, Ze, ye, sigma0) if self.a0 == "eb" else float(self.a0)
        if a0 > 0:
            keep = identified_columns(np.vstack([Zc, Ze]), data.names,
                                      "PowerPriorBorrowing (control arm and external controls)")
        Gc, Ge = Zc.T @ Zc, Ze.T @ Ze
        prec = (Gc + a0 * Ge)[np.ix_(keep, keep)]
        beta0 = np.zeros(Z.shape[1])
        beta0[keep] = np.linalg.solve(prec, (Zc.T @ yc + a0 * (Ze.T @ ye))[keep])
        cov0 = np.zeros((Z.shape[1], Z.shape[1]))
        cov0[np.ix_(keep, keep)] = sigma0 * np.linalg.inv(prec)
        xbar = Zt.mean(axis=0)
        effects = Zt @ (beta1 - beta0)
        tau = float(effects.mean())
        se = float(np.sqrt(xbar @ (cov1 + cov0) @ xbar + effects.var(ddof=1) / nT))
        self.a0_ = a0
        self.coef_control_ = beta0
        fit = _PosteriorFit(tau, se, a0, data.n_external)
        return fit, np.full(data.n_external, a0 > 0), {"a0": a0,
                                                       "effective_n_borrowed": a0 * data.n_external}

    @staticmethod
    def _empirical_bayes(Zc, yc, Ze, ye, sigma2) -> float:
        beta_e, *_ = np.linalg.lstsq(Ze, ye, rcond=None)
        lev = Zc @ np.linalg.pinv(Ze.T @ Ze) @ Zc.T
        lam, U = np.linalg.eigh((lev + lev.T) / 2)
        lam = np.clip(lam, 0.0, None)
        u2 = (U.T @ (yc - Zc @ beta_e)) ** 2
        grid = np.linspace(0.0, 1.0, 201)[1:]
        var = sigma2 * (1.0 + lam[None, :] / grid[:, None])
        loglik = -0.5 * np.sum(np.log(var) + u2[None, :] / var, axis=1)
        return float(grid[np.argmax(loglik)])



def _ols(Z, y, names, arm):
    """Least squares of one trial arm on its identified columns: coefficients (0 where
    aliased), their covariance :math:`\\hat\\sigma^2(Z^\\top Z)^{-1}`, :math:`\\hat\\sigma^2`
    and the kept columns."""
    keep = identified_columns(Z, names, f"PowerPriorBorrowing ({arm})")
    df = Z.shape[0] - keep.size
    if df < 1:
        raise ValueError(f"PowerPriorBorrowing: the {arm} of the trial (treatment, trial == 1) "
                         f"has {Z.shape[0]} units for {keep.size} identified parameters; its "
                         "residual variance needs more units than parameters")
    Zk = Z[:, keep]
    beta = np.zeros(Z.shape[1])
    beta[keep] = np.linalg.lstsq(Zk, y, rcond=None)[0]
    sigma2 = float(np.sum((y - Zk @ beta[keep]) ** 2) / df)
    cov = np.zeros((Z.shape[1], Z.shape[1]))
    cov[np.ix_(keep, keep)] = sigma2 * np.linalg.pinv(Zk.T @ Zk)
    return beta, cov, sigma2, keep


class _PosteriorFit:
    """Minimal stand-in of :class:`~causalkit.borrowing.efficient.BorrowedFit` for a posterior."""

    def __init__(self, value, std_error, a0, n_external):
        self.value, self.std_error = value, std_error
        self.influence = None
        self.variance_ratio = 1.0
        self.ess_external = a0 * n_external


class SelectiveBorrowing(BorrowingEstimator):
    """Adaptive-lasso selective borrowing (Gao, Yang, Shan, Ye, Lipkovich & Faries 2025,
    *Biometrika* 112(2), asae069).

    Each external control gets a bias :math:`b_j`, estimated from the pseudo-observations
    :math:`\\tilde b_j = Y_j - \\hat\\mu_0(X_j)` (trial-control outcome model) by the adaptive lasso
    on an identity design, whose closed form is soft thresholding:

    .. math:: \\hat b_j = \\mathrm{sign}(\\tilde b_j)\\max(|\\tilde b_j| -
              \\hat\\sigma_0 n_E\\lambda w_j, 0),
              \\qquad w_j \\propto |\\hat\\gamma_j|^{-\\nu},\\ \\textstyle\\sum_j w_j = n_E,

    with :math:`\\hat\\gamma_j = \\hat\\mu_E(X_j) - \\hat\\mu_0(X_j)` from an outcome model
    fitted on the external controls and :math:`\\hat\\sigma_0` the residual SD of the trial
    controls (ddof 1). Controls with :math:`\\hat b_j = 0` are borrowed. The threshold is in
    units of :math:`\\hat\\sigma_0`, as in a lasso on standardised outcomes, so the borrowed set
    does not depend on the units of :math:`Y` (an unscaled threshold borrowed 69, 1,269 and
    3,384 CPS controls on NSW with 1978 earnings in cents, dollars and thousands).
    :math:`(\\nu,\\lambda)`,
    :math:`\\nu\\in\\{1,2\\}` and 100 values of :math:`\\lambda` from :math:`n_E^{-(1+\\nu/5)}/2` to
    :math:`n_E^{-0.1}`, minimise the estimated MSE
    :math:`(N_S^{-1}\\sum_{j\\in S}\\hat w_j\\tilde b_j)^2 + \\hat V_S` (squared borrowed-bias
    contribution plus variance). The final estimate is the GLS combination
    :math:`d^\\top(\\hat\\tau_{trial}, \\hat\\tau_S)`,
    :math:`d = \\Sigma^{-1}1/1^\\top\\Sigma^{-1}1`, with
    :math:`\\Sigma` from the two influence functions on the common sample; nothing selected gives
    the trial-only estimate.

    Difference from the authors' code: the borrowed set enters the efficient estimator of
    ``causalkit.borrowing.efficient`` (logistic trial-participation score) rather than
    entropy-balancing calibration weights; the selection rule is theirs.

    Parameters
    ----------
    outcome_model
        Outcome regression of the trial arms and of the external controls (as in
        :class:`TrialOnly`: any scikit-learn regressor, classifier or Pipeline).
    variance_ratio, propensity, random_state
        As in :class:`InfluenceBorrowing` (``variance_ratio`` defaults to 1 for the same reason:
        the selected controls are those with small residuals).

    Attributes
    ----------
    outcome_models_ : dict
        The fitted outcome regressions: ``"treated"``, ``"control"`` (trial arms) and
        ``"external"``.
    residual_sd_ : float
        :math:`\\hat\\sigma_0`, the unit of the threshold.
    """

    _label = "Selective borrowing (adaptive lasso)"
    _default_inference = "bootstrap"
    _bootstrap_ci = "normal"  # BorrowingEstimator's docstring: why not the percentile interval

    def __init__(self, outcome_model=None, variance_ratio=1.0, propensity="constant",
                 random_state=None):
        self.outcome_model = outcome_model
        self.variance_ratio = variance_ratio
        self.propensity = propensity
        self.random_state = random_state

    def _borrow(self, data):
        nT, nE = data.n_trial, data.n_external
        mu1, mu0, e, models = fit_nuisance(data, self.outcome_model, self.propensity,
                                           self._seed("outcome"))
        y_ext = data.y[nT:]
        mu_ext = fit_external_outcome(data, self.outcome_model, models,
                                      self._seed("external-outcome"))
        self.outcome_models_ = models
        btil = y_ext - mu0[nT:]
        gamma = np.abs(mu_ext - mu0[nT:])
        engine = EfficientBorrowing(data, y_ext, mu1, mu0, e, self.variance_ratio)
        self.residual_sd_ = sigma = float(np.sqrt(engine.var_trial_controls))
        base = engine.evaluate(np.arange(0))
        best, best_mse, best_set = base, base.std_error ** 2, np.arange(0)
        for nu in (1, 2):
            w = np.where(gamma > 0, gamma, np.finfo(float).tiny) ** (-float(nu))
            w = np.where(np.isfinite(w), w, 1e300)
            w = w * nE / w.sum()
            lo, hi = nE ** -(1 + nu / 5) / 2, nE ** -0.1
            if hi < lo:
                hi = max(0.9, lo + 0.1)
            # b_j = 0 iff |b~_j| / w_j <= sigma n_E lambda: the sets grow along the lambda grid,
            # each a prefix of the controls sorted by that ratio (one warm-started path)
            with np.errstate(divide="ignore"):
                ratio = np.abs(btil) / w
            order = np.argsort(ratio, kind="stable")
            sizes = np.unique(np.searchsorted(ratio[order], sigma * nE * np.linspace(lo, hi, 100),
                                              side="right"))
            sizes = sizes[sizes > 0]
            for k, fit in zip(sizes, engine.nested(order, sizes), strict=True):
                chosen = order[:k]
                contrib = np.sum(fit.weights[nT:] * btil[chosen]) / (nT + k)
                mse = contrib ** 2 + fit.std_error ** 2
                if mse < best_mse:
                    best, best_mse, best_set = fit, mse, chosen
        mask = np.zeros(nE, dtype=bool)
        mask[best_set] = True
        if best_set.size == 0:
            warnings.warn("SelectiveBorrowing borrowed no external controls", FewBorrowedWarning,
                          stacklevel=3)
            return base, mask, {}
        return _gls_combine(base, best), mask, {}


def _gls_combine(base, fit):
    """GLS combination of the trial-only and borrowing estimates via their influence values."""
    N = fit.influence.size
    Psi = np.vstack([trial_only_influence(base, fit), fit.influence])
    sigma = Psi @ Psi.T / N ** 2
    ones = np.ones(2)
    d = np.linalg.pinv(sigma) @ ones
    d = d / (ones @ d)
    psi = d @ Psi
    value = float(d @ np.array([base.value, fit.value]))
    se = float(np.sqrt(np.sum(psi * psi)) / N)
    return type(fit)(value=value, std_error=se, influence=psi, weights=fit.weights,
                     variance_ratio=fit.variance_ratio, beta=fit.beta, n_borrowed=fit.n_borrowed)
