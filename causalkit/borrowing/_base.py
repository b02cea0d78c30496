"""Shared machinery of the borrowing estimators: the front end, nuisance fits, inference."""

from __future__ import annotations

import warnings
from abc import abstractmethod

import numpy as np
from sklearn.base import is_classifier

from causalkit._base import CausalEstimator, reject_positional_roles, resolve_roles
from causalkit._validation import seed_int
from causalkit.borrowing._data import prepare_data
from causalkit.borrowing.efficient import EfficientBorrowing
from causalkit.borrowing.models import LinearOutcomeModel, LogisticOutcomeModel, fit_logistic
from causalkit.exceptions import FallbackWarning
from causalkit.inference import Estimate
from causalkit.nuisance import clip_probabilities, predict_positive_proba, seeded

__all__ = ["BorrowingEstimator", "fit_nuisance", "fit_external_outcome", "outcome_regression",
           "predict_outcome"]

PROPENSITY = ("constant", "logistic")
OUTCOME_SPECS = ("auto", "linear", "logistic")


def outcome_regression(spec, binary: bool):
    """The unfitted outcome regression of an ``outcome_model=`` slot.

    ``None`` or ``"auto"``: least squares with intercept
    (:class:`~causalkit.borrowing.models.LinearOutcomeModel`), or logistic regression
    (:class:`~causalkit.borrowing.models.LogisticOutcomeModel`) for a 0/1 outcome;
    ``"linear"``/``"logistic"`` force one; any scikit-learn regressor, classifier (its
    probability of class 1 is the prediction) or Pipeline is used as given (cloned).
    """
    if spec is None or isinstance(spec, str):
        spec = "auto" if spec is None else spec
        if spec not in OUTCOME_SPECS:
            raise ValueError(f"outcome_model must be None, one of {OUTCOME_SPECS} or a "
                             f"scikit-learn estimator; got {spec!r}")
        if spec == "auto":
            spec = "logistic" if binary else "linear"
        return LogisticOutcomeModel() if spec == "logistic" else LinearOutcomeModel()
    if not (hasattr(spec, "fit") and hasattr(spec, "predict") and hasattr(spec, "get_params")):
        raise TypeError("outcome_model must be None, one of "
                        f"{OUTCOME_SPECS} or a scikit-learn estimator; got {type(spec).__name__}")
    return spec


def predict_outcome(model, X) -> np.ndarray:
    """Conditional mean from a fitted outcome regression (P(y = 1) for a classifier)."""
    return predict_positive_proba(model, X) if is_classifier(model) else model.predict(X)


def fit_nuisance(data, outcome_model, propensity: str, seed=None):
    """Outcome regressions on each trial arm and the trial propensity.

    Parameters
    ----------
    data : HybridData
    outcome_model : the ``outcome_model=`` slot (see :func:`outcome_regression`)
    propensity : {"constant", "logistic"}
    seed : int, optional
        Seed of models with an unset ``random_state`` (:func:`causalkit.nuisance.seeded`).

    Returns
    -------
    mu1, mu0 : ndarray of shape (n,)
        Predictions for every row.
    e : ndarray of shape (n,)
        ``"constant"``: :math:`n_1/n_R` (randomised trial); ``"logistic"``: logistic regression
        of treatment on covariates in the trial (slope ridge 1e-4, so aliased covariates keep it
        finite), clipped to [0.01, 0.99].
    models : dict
        The fitted outcome regressions, ``{"treated": ..., "control": ...}``.
    """
    if propensity not in PROPENSITY:
        raise ValueError(f"propensity must be one of {PROPENSITY}; got {propensity!r}")
    nT = data.n_trial
    at = data.a[:nT]
    model = outcome_regression(outcome_model, data.binary)
    X_all = data.frame()
    models, preds = {}, {}
    for arm, label in ((1, "treated"), (0, "control")):
        rows = np.flatnonzero(at == arm)
        models[label] = seeded(model, seed).fit(data.frame(rows), data.y[rows])
        preds[label] = predict_outcome(models[label], X_all)
    if propensity == "constant":
        e = np.full(data.n_rows, at.mean())
    else:
        Z = np.hstack([np.ones((data.n_rows, 1)), data.X])
        beta, _ = fit_logistic(Z[:nT], at.astype(float), ridge=1e-4)
        e = clip_probabilities(1.0 / (1.0 + np.exp(-(Z @ beta))), name="trial propensity")
    return preds["treated"], preds["control"], e, models


def fit_external_outcome(data, outcome_model, models: dict, seed=None):
    """The outcome regression of the ``outcome_model=`` slot fitted on the external controls,
    stored as ``models["external"]``; returns its predictions at the external rows."""
    X_ext = data.frame(slice(data.n_trial, None))
    model = outcome_regression(outcome_model, data.binary)
    models["external"] = seeded(model, seed).fit(X_ext, data.y[data.n_trial:])
    return predict_outcome(models["external"], X_ext)


class BorrowingEstimator(CausalEstimator):
    """Base class: ``fit(X, y, treatment, *, trial)`` then ``estimate()``.

    ``trial`` is 1 for trial units and 0 for external controls (whose ``treatment`` must be 0).
    With a DataFrame, roles may name its columns:
    ``fit(df, y="re78", treatment="treat", trial="trial", covariates=[...])``.

    Inference: ``"influence"`` is the normal interval from the influence function of the
    efficient estimator, treating the borrowed set as fixed; ``"bootstrap"`` refits the whole
    pipeline (scores, calibration, selection and estimator) on resamples drawn within trial arms
    and external controls. Estimators that choose the borrowed set from the outcomes default to
    the bootstrap (the influence SE ignores the choice and under-covers), the others to
    ``"influence"``. Of the bootstrap, the papers' selection rules and
    :class:`~causalkit.borrowing.SelectiveBorrowing` report the normal interval, the estimate
    plus or minus :math:`z_{1-\\alpha/2}` times the replicates' SD; the other estimators its
    percentile interval (``conf_int(method="percentile" | "normal")`` gives either). Why normal:
    200 resamples (the default) estimate an SD well but not the 2.5% and 97.5% points, and
    ``np.quantile``'s rule puts those of 200 (100) normal replicates inside the law's, so the
    percentile interval is 2.2% (3.9%) shorter even when the bootstrap law is normal, as it is
    here (the replicates' excess kurtosis averaged at most 0.05 in absolute value; check
    ``simulations/borrowing_bootstrap_interval_check.py``, which draws data sets no study uses).
    In 200 replications x 100 resamples of the Paper A design without bias (``causalkit simulate
    borrowing-bootstrap-paper-a``) the percentile interval covered 0.895 (AIB) and 0.885 (ACIB),
    the normal one 0.925 and 0.935; their bootstrap SEs were 0.90 and 0.93 of the estimates' SD.
    :class:`~causalkit.borrowing.SelectiveBorrowing`'s, in 200 replications x 200 resamples on
    six cells of the design grid (``causalkit simulate borrowing-bootstrap-selective``): the
    percentile interval 0.905, 0.91 and 0.915 with normal errors and none, 0.5 SD or 1 SD of bias
    on 30% of the controls, 0.94 with skewed errors and 0.935 for both binary cells; the normal
    interval 0.925-0.955 (SE/SD 0.92 in the three normal-error cells). On the check's 100 other
    draws per cell the percentile interval covered 0.93-0.95 and the normal one 0.94-0.97, and
    over both runs 45 fits were covered by the normal interval only against 7 by the percentile
    one. The rest of the shortfall is the bootstrap's: choosing the set size by a minimum over a
    noisy MSE path is not a smooth functional of the data, the case where the bootstrap can fail
    (Andrews 2000, *Econometrica* 68(2)). :class:`~causalkit.borrowing.AdaptiveBorrowing`
    defaults to a third kind, ``"fab"``: trial-only's tests inverted with their level split by
    an independent estimate from the external controls, exact for every bias
    (:mod:`causalkit.fab`; study ``borrowing-interval-adaptive``).

    Subclasses implement ``_borrow(data)``, returning ``(BorrowedFit, borrowed_mask, details)``.
    Without external controls every borrowing estimator falls back to :class:`TrialOnly`'s
    estimate with a :class:`~causalkit.exceptions.FallbackWarning`.

    Attributes (after ``fit``): ``result_``, ``borrowed_`` (over the external controls, in input
    order: a bool mask for estimators that select controls, a weight in [0, 1] for those that
    down-weight them), ``n_borrowed_`` (the count, or the effective number: sum of weights),
    ``details_``, ``n_trial_``, ``n_external_``, ``feature_names_in_``, ``n_features_in_``,
    ``data_`` (the validated data; to keep one copy of the covariates it shares the
    unstandardised ones with the ``X`` passed to ``fit`` when that is already a float array, so
    changing ``X`` in place after ``fit`` changes what a later bootstrap resamples).
    """

    _label = "Borrowing"
    _default_inference = "influence"
    _nuisance_slots = {"outcome_model": "regressor"}

    def fit(self, X, y=None, treatment=None, *args, trial=None, covariates=None):
        """Fit on trial units (``trial == 1``) and external controls (``trial == 0``).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, p)
            Covariates (with the DataFrame front end: the data, roles naming its columns).
        y : array-like of shape (n,) or str
            Outcome (continuous, or binary 0/1).
        treatment : array-like of shape (n,) or str
            1 treated, 0 control; must be 0 for every external control.
        trial : array-like of shape (n,) or str
            1 trial unit, 0 external control.
        covariates : list of str, optional
            Covariate columns of a DataFrame ``X`` (default: every column not used by a role).

        Returns
        -------
        self
        """
        reject_positional_roles(self, args, "trial=")
        X, roles = resolve_roles(X, {"y": y, "treatment": treatment, "trial": trial},
                                 covariates=covariates)
        self._check_params()
        return self._fit_data(prepare_data(X, roles["y"], roles["treatment"], roles["trial"]))

    def _check_params(self) -> None:
        """Validate constructor arguments that the fit does not check itself (override)."""

    def _fit(self, data) -> None:
        self.feature_names_in_ = np.asarray(data.feature_names, dtype=object)
        self.n_features_in_ = len(data.feature_names)
        self.n_trial_ = data.n_trial
        self.n_external_ = data.n_external
        if data.n_external == 0 and self._uses_external():
            warnings.warn(f"{type(self).__name__}: no external controls (trial == 0); falling "
                          "back to the trial-only estimator", FallbackWarning, stacklevel=4)
            mu1, mu0, e, models = fit_nuisance(data, getattr(self, "outcome_model", None),
                                               getattr(self, "propensity", "constant"),
                                               self._seed("outcome"))
            engine = EfficientBorrowing(data, data.y[data.n_trial:], mu1, mu0, e)
            fit, mask, details = engine.evaluate(np.arange(0)), np.zeros(0, bool), {}
            self.outcome_models_ = models
        else:
            fit, mask, details = self._borrow(data)
        self.result_ = fit
        self.borrowed_ = mask
        self.n_borrowed_ = int(mask.sum()) if mask.dtype == bool else float(mask.sum())
        self.details_ = {"n_borrowed": self.n_borrowed_, "n_external": data.n_external,
                         "ess_external": fit.ess_external, "variance_ratio": fit.variance_ratio,
                         **details}

    @abstractmethod
    def _borrow(self, data):
        """``(BorrowedFit, borrowed_mask, details)`` on validated data with external controls."""

    def _uses_external(self) -> bool:
        return True

    def _seed(self, purpose: str) -> int:
        """Integer seed for one named use (nested models), from :meth:`seed_for`."""
        return seed_int(self.seed_for(purpose))

    def _point_estimate(self, target=None) -> float:
        return self.result_.value

    def _influence_estimate(self, target=None) -> Estimate:
        fit = self.result_
        return Estimate(fit.value, fit.std_error, influence=fit.influence, name=self._estimand,
                        method=self._label,
                        n_obs=self.n_trial_ if fit.influence is None else fit.influence.size,
                        details=self._details())

    def _details(self) -> dict:
        return dict(self.details_)
