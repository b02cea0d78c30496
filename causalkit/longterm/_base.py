"""Shared interface of the long-term estimators on the estimator core: ``fit`` / ``estimate`` /
``effect``."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from causalkit._base import CausalEstimator, reject_positional_roles, resolve_roles
from causalkit._validation import check_array, child_seed, seed_int
from causalkit.inference import Estimate
from causalkit.longterm._data import MonotoneData, check_monotone_data
from causalkit.longterm._models import (
    SelectionModel,
    check_bounds,
    default_classifier,
    fit_propensity,
)
from causalkit.nuisance import default_if_none, seeded

__all__ = ["MonotoneEstimator"]


def _reject_old_order(estimator, y, treatment) -> None:
    """The old order ``fit(X, treatment, short, outcome)`` called with three positional
    arguments puts the treatment in ``y`` and the short-term outcomes in ``treatment``: a binary
    ``y`` with a two-column or non-binary ``treatment`` is reported as that slip."""
    if y is None or treatment is None or isinstance(y, str) or isinstance(treatment, str):
        return
    try:
        yv = np.asarray(y, dtype=float)
        tv = np.asarray(treatment, dtype=float)
    except (TypeError, ValueError):
        return
    if yv.ndim != 1 or yv.size == 0 or not np.isin(yv, (0.0, 1.0)).all():
        return
    if (tv.ndim == 2 and tv.shape[1] > 1) or not np.isin(tv, (0.0, 1.0)).all():
        name = type(estimator).__name__
        raise TypeError(
            f"{name}.fit: treatment is not a binary vector (shape {tv.shape}) while y is binary: "
            f"this looks like the old argument order fit(X, treatment, short, outcome). Write "
            f"{name}().fit(X, y, treatment, short=short)")


class MonotoneEstimator(CausalEstimator):
    """Base class: validates the monotone data, fits, and reports the long-term ATE.

    Subclasses implement ``_fit(data)``, setting ``ate_``, ``mu_`` (the arm means
    ``(mu_0, mu_1)``) and ``influence_`` (one value per unit), and ``_effect(X)``.
    """

    _label = "long-term estimator"
    _estimand = "ATE"
    _nuisance_slots: dict = {}

    def fit(self, X, y=None, treatment=None, *args, short=None, observed=None, covariates=None):
        """Fit on covariates ``X``, the long-term outcome ``y`` (NaN when missing), binary
        ``treatment`` and the short-term outcomes ``short`` (n, T-1; NaN after drop-out;
        ``None`` for a single stage).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, p)
            Baseline covariates (complete). With a DataFrame, ``y``, ``treatment``, ``short``
            and ``observed`` may name its columns (``short=["s1", "s2"]``) and ``covariates``
            selects the covariate columns (default: every column no role uses).
        y : array-like of shape (n,) or str
            Long-term outcome, NaN when missing.
        treatment : array-like of shape (n,) or str
            Binary treatment (0/1 or boolean).
        short : array-like of shape (n, T-1), list of str, or None
            Short-term outcomes in stage order, NaN after drop-out.
        observed : array-like of shape (n, T), optional
            Response indicators (1 = observed) overriding the NaN pattern of ``short`` and
            ``y``.
        covariates : list of str, optional
            Covariate columns of a DataFrame ``X``.

        Returns
        -------
        self

        Raises
        ------
        TypeError
            More than three positional arguments (the old order ``fit(X, treatment, short,
            outcome)``), or three positional arguments in that old order (a binary ``y`` with a
            two-column or non-binary ``treatment``); non-numeric columns.
        ValueError
            Invalid data (see :func:`~causalkit.longterm.check_monotone_data`).
        """
        reject_positional_roles(self, args, "short=, observed=")
        _reject_old_order(self, y, treatment)
        X, roles = resolve_roles(X, {"y": y, "treatment": treatment, "short": short,
                                     "observed": observed}, covariates=covariates)
        data = check_monotone_data(X, roles["y"], roles["treatment"], short=roles["short"],
                                   observed=roles["observed"])
        self._fit_data(data)
        self.n_stages_ = data.n_stages
        self.n_features_in_ = data.X.shape[1]
        if isinstance(X, pd.DataFrame):
            self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self

    # -- nuisance models
    def _seeded(self, purpose: str, model, default, fold: int = 0):
        """An unfitted clone of ``model`` (``default()`` when None) whose unset
        ``random_state`` is derived from the estimator's seed for ``purpose`` and ``fold``."""
        return seeded(default_if_none(model, default),
                      seed_int(child_seed(self.seed_for(purpose), fold)))

    def _fit_probability_models(self, data: MonotoneData, fold: int = 0):
        """Fitted propensity and stage-wise continuation models."""
        bounds = check_bounds(self.propensity_clip, "propensity_clip")
        floor = check_bounds((self.selection_floor, 1.0), "selection_floor")[0]
        prop = fit_propensity(
            self._seeded("propensity", self.propensity_model, default_classifier, fold),
            data, bounds)
        selection = SelectionModel(
            self._seeded("selection", self.selection_model, default_classifier, fold),
            floor).fit(data)
        return prop, selection

    @staticmethod
    def _predict_probabilities(models, data: MonotoneData):
        """``(e1, lam, n_clipped)``: propensities (n,), continuation probabilities (n, T)."""
        prop, selection = models
        lam, clipped = selection.predict(data)
        return prop.predict(data.X), lam, clipped

    def _nuisance_probabilities(self, data: MonotoneData):
        """Probability models fitted and evaluated on the same units (stored as
        ``propensity_model_`` and ``selection_model_``)."""
        models = self._fit_probability_models(data)
        self.propensity_model_, self.selection_model_ = models[0].model, models[1].models_
        return self._predict_probabilities(models, data)

    # -- estimator core
    def _point_estimate(self, target=None) -> float:
        return self.ate_

    def _influence_estimate(self, target=None) -> Estimate:
        """The SE is ``sqrt(variance_ / n)`` when the fit set ``variance_`` (a substitution
        estimate of the influence function's variance), else the empirical one."""
        variance = getattr(self, "variance_", None)
        if variance is None:
            return Estimate.from_influence(self.ate_, self.influence_, name=self._estimand,
                                           method=self._label, details=self._details())
        return Estimate(self.ate_, float(np.sqrt(variance / self.influence_.size)),
                        influence=self.influence_, name=self._estimand, method=self._label,
                        details=self._details())

    def _details(self) -> dict:
        return {"mu_0": float(self.mu_[0]), "mu_1": float(self.mu_[1])}

    def plot(self, ax=None, **estimate_kwargs):
        """The estimate and its interval; for the weighting estimators (those with ``ess_``)
        beside the inverse-probability weights and the effective sample sizes per stage
        (:func:`~causalkit.longterm.plots.plot_weights`,
        :func:`~causalkit.longterm.plots.plot_ess`). Returns the matplotlib Figure."""
        check_is_fitted(self, "data_")
        if ax is not None or not hasattr(self, "ess_"):
            return super().plot(ax=ax, **estimate_kwargs)
        import matplotlib.pyplot as plt

        from causalkit.longterm.plots import plot_ess, plot_weights
        fig, axes = plt.subplots(1, 3, figsize=(16, 3.6))
        super().plot(ax=axes[0], **estimate_kwargs)
        plot_weights(self, ax=axes[1])
        plot_ess(self, ax=axes[2])
        fig.tight_layout()
        return fig

    def effect(self, X) -> np.ndarray:
        """Conditional average treatment effect ``tau(x) = E[Y(1) - Y(0) | X = x]``.

        ``X`` has the covariate columns of the fit (a DataFrame is matched by column name when
        the fit was on one)."""
        check_is_fitted(self, "data_")
        names = getattr(self, "feature_names_in_", None)
        if names is not None and isinstance(X, pd.DataFrame):
            missing = [c for c in names if c not in X.columns]
            if missing:
                raise ValueError(f"X lacks the covariate column(s) {missing} of the fit")
            X = X[list(names)]
        X = check_array(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns; the model was fitted with "
                             f"{self.n_features_in_}")
        return self._effect(X)
