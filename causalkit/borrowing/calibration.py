"""Outcome calibration of external controls by an R-learner bias model (the ACIB step).

On the pooled controls :math:`C` (trial controls and external controls) with source indicator
:math:`D = 1\\{\\text{external}\\}`, the working model
:math:`Y = \\mu_0(X) + D\\,b(X) + \\varepsilon`
gives :math:`m(X) = E(Y\\mid X, C) = \\mu_0(X) + \\rho(X)b(X)` with
:math:`\\rho(X) = P(D=1\\mid X, C)`. The R-learner (Robinson 1988; Nie & Wager 2021, *Biometrika*
108(2)) estimates the systematic difference :math:`b` by

.. math:: \\hat b = \\arg\\min_b \\sum_{i\\in C}\\big[\\{Y_i-\\hat m(X_i)\\} -
          \\{D_i-\\hat\\rho(X_i)\\}\\,b(X_i)\\big]^2 + \\Lambda(b),

with :math:`\\hat m` and :math:`\\hat\\rho` cross-fitted (out-of-fold). ``method="linear"``:
:math:`b(x) = \\gamma_0 + x^\\top\\gamma`, the ridge regression of :math:`Y-\\hat m` on
:math:`(D-\\hat\\rho)(1, x)` without a free intercept and with
:math:`\\Lambda(b) = \\lambda(\\gamma_0^2 + \\|\\gamma\\|^2)` (covariates standardised);
``method="constant"``: :math:`b(x) = \\gamma_0`, a pure mean shift,
:math:`\\hat\\gamma_0 = \\sum(D-\\hat\\rho)(Y-\\hat m)/\\{\\sum(D-\\hat\\rho)^2 + \\lambda\\}`.
In both, :math:`\\lambda` minimises the exact leave-one-out error of the ridge fit
(:class:`sklearn.linear_model.RidgeCV`, Golub, Heath & Wahba 1979) over :data:`RIDGE_GRID`. The
penalty covers the intercept on purpose: when the two sources agree the LOO error is smallest
for large :math:`\\lambda` and :math:`\\hat b \\to 0`, so calibration does not add back the
trial controls' noise through a freely estimated shift (an unpenalised
:math:`\\hat\\gamma_0` is a difference of two sample means and carries the full trial-control
variance into every calibrated outcome); when there is a systematic shift the LOO error
favours a small :math:`\\lambda` and :math:`\\hat b` recovers it. ``method="kernel"``:
Gaussian-kernel ridge regression (no intercept, so it also shrinks to 0) of the
pseudo-outcomes :math:`(Y-\\hat m)/(D-\\hat\\rho)` with weights :math:`(D-\\hat\\rho)^2` (the
same objective written as a weighted regression), bandwidth :math:`\\gamma = 1/p` on
standardised covariates as in KRLS, penalty chosen by 3-fold cross-validation over
:data:`RIDGE_GRID`. The calibrated external
outcomes are :math:`\\tilde Y_j = Y_j - \\hat b(X_j)`.

The working model, cross-fitting and the KRR weighting are a reconstruction of the calibration
of Yang, Li, Wu & Yang (2026), arXiv:2604.13973.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LinearRegression, LogisticRegression, RidgeCV
from sklearn.model_selection import GridSearchCV

from causalkit._validation import check_array, check_binary, check_vector
from causalkit.nuisance import cross_fit, make_folds

__all__ = ["OutcomeCalibrator", "CALIBRATIONS"]

CALIBRATIONS = ("linear", "constant", "kernel")
#: Above this many pooled controls the kernel model would need an n x n kernel matrix.
KERNEL_MAX_ROWS = 5000
#: Penalties searched for the bias model (leave-one-out for the ridge forms, CV for the kernel);
#: the top end makes :math:`\\hat b \\approx 0` reachable.
RIDGE_GRID = np.logspace(-3, 6, 28)


class OutcomeCalibrator(BaseEstimator):
    """R-learner model of the systematic outcome difference of external controls.

    Parameters
    ----------
    method : {"linear", "constant", "kernel"}
        Bias model :math:`b(x)`: linear, constant, or Gaussian kernel ridge (at most
        ``causalkit.borrowing.calibration.KERNEL_MAX_ROWS`` pooled controls).
    cv : int, scikit-learn splitter or precomputed folds
        Cross-fitting folds for :math:`\\hat m` and :math:`\\hat\\rho`
        (``causalkit.nuisance.make_folds``; an int stratifies on the source).
    random_state : None, int or SeedSequence
        Seed of the fold split.

    Attributes
    ----------
    intercept_, coef_ : float, ndarray
        The linear bias model :math:`\\hat b(x) = \\hat\\gamma_0 + x^\\top\\hat\\gamma`.
    bias_model_ : KernelRidge or None
        The fitted kernel bias model (``method="kernel"``).
    alpha_ : float
        The chosen penalty :math:`\\lambda`.
    folds_ : list of (train, test) index arrays
        The cross-fitting folds (rows of the pooled controls).
    fold_models_ : dict
        The fitted fold models of :math:`\\hat m` (``"outcome"``) and :math:`\\hat\\rho`
        (``"external"``).
    """

    def __init__(self, method: str = "linear", cv=5, random_state=None):
        self.method = method
        self.cv = cv
        self.random_state = random_state

    def fit(self, X, y, external, *, groups=None):
        """Fit on pooled controls; ``external`` is 1 for external controls, 0 for trial ones.

        ``groups`` (optional, one label per row) keeps rows of one unit in one fold: the copies
        of a unit in a bootstrap resample (see ``causalkit.nuisance.make_folds``)."""
        if self.method not in CALIBRATIONS:
            raise ValueError(f"method must be one of {CALIBRATIONS}; got {self.method!r}")
        X = check_array(X, "X")
        y = check_vector(y, "y", n=X.shape[0])
        d = check_binary(external, "external", n=X.shape[0]).astype(float)
        if self.method == "kernel" and X.shape[0] > KERNEL_MAX_ROWS:
            raise ValueError(f"method='kernel' supports at most {KERNEL_MAX_ROWS} pooled controls "
                             f"(got {X.shape[0]}); use method='linear'")
        n_ext, n_trial = int(d.sum()), int((1 - d).sum())
        if isinstance(self.cv, numbers.Integral) and min(n_ext, n_trial) < self.cv:
            raise ValueError(f"calibration with cv={self.cv} needs at least {self.cv} trial "
                             f"controls and {self.cv} external controls (trial == 1 and 0); "
                             f"got {n_trial} and {n_ext}")
        self.folds_ = make_folds(self.cv, X.shape[0], stratify=d, groups=groups,
                                 random_state=self.random_state)
        if any(np.ptp(d[train]) == 0 for train, _ in self.folds_):
            raise ValueError("calibration: every cross-fitting fold needs trial controls and "
                             "external controls (trial == 1 and 0) to train on")
        m_model = (LinearRegression() if self.method != "kernel"
                   else KernelRidge(kernel="rbf", gamma=1.0 / X.shape[1], alpha=0.1))
        m_hat, _, m_models = cross_fit(m_model, X, y, cv=self.folds_, return_models=True)
        rho, _, rho_models = cross_fit(LogisticRegression(max_iter=1000), X, d, cv=self.folds_,
                                       method="predict_proba", return_models=True)
        self.fold_models_ = {"outcome": m_models, "external": rho_models}
        resid, lever = y - m_hat, d - rho
        if self.method != "kernel":
            design = np.ones((X.shape[0], 1))
            if self.method == "linear":
                design = np.hstack([design, X])
            Z = lever[:, None] * design
            ridge = RidgeCV(alphas=RIDGE_GRID, fit_intercept=False).fit(Z, resid)
            coef = ridge.coef_
            self.alpha_ = float(ridge.alpha_)
            self.intercept_ = float(coef[0])
            self.coef_ = coef[1:] if self.method == "linear" else np.zeros(X.shape[1])
            self.bias_model_ = None
        else:
            search = GridSearchCV(KernelRidge(kernel="rbf", gamma=1.0 / X.shape[1]),
                                  {"alpha": RIDGE_GRID[::3]}, cv=3)
            search.fit(X, resid / lever, sample_weight=lever ** 2)
            self.bias_model_ = search.best_estimator_
            self.alpha_ = float(search.best_params_["alpha"])
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        """Estimated systematic difference :math:`\\hat b(x)`."""
        X = check_array(X, "X")
        if self.bias_model_ is None:
            return self.intercept_ + X @ self.coef_
        return self.bias_model_.predict(X)

    def transform(self, X, y):
        """Calibrated outcomes :math:`y - \\hat b(x)`."""
        return check_vector(y, "y") - self.predict(X)
