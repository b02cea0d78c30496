"""Shared interface of the long-term estimators: ``fit`` / ``estimate`` / ``effect``."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from causalkit._validation import check_array, check_positive_int
from causalkit.exceptions import CausalkitWarning
from causalkit.inference import Estimate, bootstrap
from causalkit.longterm._data import MonotoneData, check_monotone_data
from causalkit.longterm._models import (
    SelectionModel,
    check_bounds,
    default_classifier,
    fit_propensity,
)

__all__ = ["MonotoneEstimator"]

_INFERENCE = ("influence", "bootstrap")


class MonotoneEstimator(BaseEstimator):
    """Base class: validates the monotone data, fits, and reports the long-term ATE.

    Subclasses implement ``_fit(data, with_influence)``, setting ``ate_``, ``mu_`` (the arm means
    ``(mu_0, mu_1)``) and, when ``with_influence``, ``influence_`` (one value per unit).
    """

    _method = "long-term estimator"
    _default_inference = "influence"

    def fit(self, X, treatment, short, outcome, observed=None):
        """Fit on covariates ``X``, binary ``treatment``, short-term outcomes ``short`` (n, T-1;
        NaN after drop-out; ``None`` for a single stage) and the long-term ``outcome`` (NaN when
        missing). ``observed`` (n, T; 1 = observed) overrides the NaN pattern.

        Returns
        -------
        self
        """
        data = check_monotone_data(X, treatment, short, outcome, observed)
        self._fit(data, with_influence=True)
        self.data_ = data
        self.n_stages_ = data.n_stages
        self.n_features_in_ = data.X.shape[1]
        return self

    def _fit_probability_models(self, data: MonotoneData):
        """Fitted propensity and stage-wise continuation models."""
        bounds = check_bounds(self.propensity_clip, "propensity_clip")
        floor = check_bounds((self.selection_floor, 1.0), "selection_floor")[0]
        prop = fit_propensity(self.propensity_model or default_classifier(), data, bounds)
        selection = SelectionModel(self.selection_model or default_classifier(), floor).fit(data)
        return prop, selection

    @staticmethod
    def _predict_probabilities(models, data: MonotoneData):
        """``(e1, lam, n_clipped)``: propensities (n,), continuation probabilities (n, T)."""
        prop, selection = models
        lam, clipped = selection.predict(data)
        return prop.predict(data.X), lam, clipped

    def _nuisance_probabilities(self, data: MonotoneData):
        """Probability models fitted and evaluated on the same units."""
        return self._predict_probabilities(self._fit_probability_models(data), data)

    def estimate(self, inference=None, *, n_boot: int = 200, random_state=None,
                 n_jobs: int = 1) -> Estimate:
        """The long-term ATE ``E[Y(1) - Y(0)]`` with its standard error.

        Parameters
        ----------
        inference : {"influence", "bootstrap"}, optional
            ``"influence"``: the SE from the estimator's influence values (see the class
            notes). ``"bootstrap"``: the nonparametric bootstrap over units, refitting every
            nuisance model (stratified by treatment; percentile interval). The default is
            ``"influence"`` except for :class:`SeqMSM` (``"bootstrap"``).
        n_boot, random_state, n_jobs
            Bootstrap replicates, seed and joblib workers.
        """
        check_is_fitted(self, "ate_")
        inference = self._default_inference if inference is None else inference
        if inference not in _INFERENCE:
            raise ValueError(f"inference must be one of {_INFERENCE}; got {inference!r}")
        details = {"mu_0": float(self.mu_[0]), "mu_1": float(self.mu_[1])}
        details.update(self._details())
        if inference == "influence":
            return Estimate.from_influence(self.ate_, self.influence_, name="ATE",
                                           method=self._method, details=details)
        n_boot = check_positive_int(n_boot, "n_boot", minimum=2)
        d = self.data_
        parts = {"X": d.X, "a": d.a, "Z": d.Z, "R": d.R}
        out = bootstrap(_Refit(self), parts, n_boot, random_state, n_jobs, strata=d.a,
                        method=self._method, name="ATE")
        out.details.update(details)
        return out

    def effect(self, X) -> np.ndarray:
        """Conditional average treatment effect ``tau(x) = E[Y(1) - Y(0) | X = x]``."""
        check_is_fitted(self, "ate_")
        X = check_array(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns; the model was fitted with "
                             f"{self.n_features_in_}")
        return self._effect(X)

    def _details(self) -> dict:
        return {}


class _Refit:
    """Bootstrap replicate: refit a clone of the estimator on resampled rows, return its ATE."""

    def __init__(self, estimator):
        self.estimator = estimator

    def __call__(self, parts) -> float:
        Z = parts["Z"]
        data = check_monotone_data(parts["X"], parts["a"], Z[:, :-1], Z[:, -1], parts["R"])
        est = clone(self.estimator)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalkitWarning)
            est._fit(data, with_influence=False)
        return est.ate_
