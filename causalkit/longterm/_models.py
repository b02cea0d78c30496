"""Nuisance models shared by the long-term estimators.

* propensity ``e(x) = P(A = 1 | X = x)``;
* stage-wise continuation probabilities ``lambda_t(H_t) = P(R_t = 1 | H_t, R_{t-1} = 1)``, each
  fitted on the units still at risk with features ``(X, A, S_1, ..., S_{t-1})``; cumulative
  selection scores ``r_t = prod_{s <= t} lambda_s`` (computed in log space);
* the backward outcome chain ``m_t(H_t) = E[m_{t+1}(H_{t+1}) | H_t, R_t = 1]`` with
  ``m_{T+1} = Y`` (iterated conditional expectations, Bang & Robins 2005, *Biometrics* 61(4)).

Every model is fitted on the rows where its inputs are observed and predicted only on the rows
where they are defined, so NaN never reaches a learner.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from causalkit._validation import child_seed, seed_int
from causalkit.exceptions import OverlapWarning
from causalkit.longterm._data import MonotoneData
from causalkit.longterm.balancing import BalancingLogit
from causalkit.nuisance import clip_probabilities, fit_clone, predict_positive_proba, seeded

__all__ = ["is_parametric", "default_classifier", "default_regressor", "fit_propensity",
           "SelectionModel", "OutcomeChain", "PerArmStage", "as_stage_learner", "cumulative_scores",
           "effective_sample_size", "ess_table", "selection_features", "unscaled"]

_MODES = ("impute_missing", "replace_all")


def default_classifier():
    """Logistic regression with negligible shrinkage (close to the maximum-likelihood fit),
    solved by Newton's method, on standardised columns (so that neither the shrinkage nor the
    solver depends on the units of the covariates)."""
    return make_pipeline(StandardScaler(),
                         LogisticRegression(C=1e4, solver="newton-cholesky", max_iter=200))


def default_regressor():
    """Ordinary least squares on standardised columns. The fitted values of OLS do not depend
    on the units of the columns, but scikit-learn's ``LinearRegression`` treats singular values
    below ``tol = 1e-6`` times the largest as zero, which one column in large units (dollars
    beside indicators) triggers on the raw design."""
    return make_pipeline(StandardScaler(), LinearRegression())


def is_parametric(model) -> bool:
    """Whether a nuisance model is a fixed-dimension parametric fit: ``None`` (the defaults),
    ``LinearRegression``, ``LogisticRegression``, :class:`~causalkit.longterm.BalancingLogit`,
    a dummy (constant) model, or a Pipeline of ``StandardScaler`` steps ending in one of them.
    Such fits may be evaluated on the units they were fitted on (no cross-fitting needed: their
    classes are Donsker)."""
    if model is None:
        return True
    return isinstance(unscaled(model), (LinearRegression, LogisticRegression, BalancingLogit,
                                        DummyClassifier, DummyRegressor))


def unscaled(model):
    """The model a Pipeline of ``StandardScaler`` steps ends in (nested Pipelines unwrapped; the
    model itself when it is no Pipeline), or None for a Pipeline with any other step. Scaling
    the columns reparameterises a linear or logistic fit without changing it."""
    if not isinstance(model, Pipeline):
        return model
    steps = [step for _, step in model.steps]
    return unscaled(steps[-1]) if all(isinstance(s, StandardScaler) for s in steps[:-1]) else None


def check_bounds(bounds, name: str) -> tuple[float, float]:
    """``(lower, upper)`` with ``0 <= lower < upper <= 1``."""
    try:
        lower, upper = (float(b) for b in bounds)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a pair (lower, upper); got {bounds!r}") from exc
    if not 0.0 <= lower < upper <= 1.0:
        raise ValueError(f"{name} must satisfy 0 <= lower < upper <= 1; got {bounds!r}")
    return lower, upper


def check_mode(mode) -> str:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}; got {mode!r}")
    return mode


class FittedPropensity:
    """A fitted propensity model with clipping bounds."""

    def __init__(self, model, bounds):
        self.model = model
        self.bounds = bounds

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Clipped ``P(A = 1 | X)``; warns (ClippingWarning) when clipping binds."""
        return clip_probabilities(predict_positive_proba(self.model, X), self.bounds,
                                  name="propensity")


def fit_propensity(model, data: MonotoneData, bounds=(0.01, 0.99)) -> FittedPropensity:
    """Fit ``P(A = 1 | X)`` on all units."""
    return FittedPropensity(fit_clone(model, data.X, data.a), bounds)


def selection_features(data: MonotoneData, k: int, rows) -> np.ndarray:
    """Features of the stage-``k`` continuation model: ``(X, A, Z_0, ..., Z_{k-1})``."""
    return np.column_stack([data.X[rows], data.a[rows], data.Z[rows, :k]])


class SelectionModel:
    """Stage-wise continuation probabilities ``lambda_t`` and their cumulative products.

    Parameters
    ----------
    model : sklearn classifier
        Cloned and fitted once per stage on the units at risk (target ``R_t``). A stage where
        nobody at risk drops out gets ``lambda_t = 1`` without fitting (a constant target).
    floor : float
        Each ``lambda_t`` is clipped below at ``floor`` (per-stage truncation), bounding the
        stage weight by ``1 / floor``.
    """

    def __init__(self, model, floor: float = 0.01):
        self.model = model
        self.floor = floor

    def fit(self, data: MonotoneData) -> SelectionModel:
        self.models_ = []
        for k in range(data.n_stages):
            rows = data.at_risk(k)
            target = data.R[rows, k]
            if target.min() == 1:
                self.models_.append(None)
            else:
                self.models_.append(fit_clone(self.model, selection_features(data, k, rows),
                                              target))
        return self

    def predict(self, data: MonotoneData) -> tuple[np.ndarray, np.ndarray]:
        """``(lam, n_clipped)``: ``lam`` (n, T) with NaN where a unit is not at risk (clipped
        to ``[floor, 1]``) and the number of clipped units per stage."""
        lam = np.full(data.R.shape, np.nan)
        clipped = np.zeros(data.n_stages, dtype=int)
        for k, model in enumerate(self.models_):
            rows = data.at_risk(k)
            if model is None:
                lam[rows, k] = 1.0
                continue
            p = predict_positive_proba(model, selection_features(data, k, rows))
            clipped[k] = int(np.sum(p < self.floor))
            if clipped[k]:
                p = clip_probabilities(p, (self.floor, 1.0), name=f"continuation stage {k + 1}")
            lam[rows, k] = p
        return lam, clipped


def cumulative_scores(lam: np.ndarray) -> np.ndarray:
    """``r_t = prod_{s <= t} lambda_s`` row-wise, in log space (NaN after drop-out)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.cumsum(np.log(lam), axis=1))


def effective_sample_size(w: np.ndarray) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2``."""
    w = np.asarray(w, dtype=float)
    return float(w.sum() ** 2 / np.sum(w ** 2)) if w.size else 0.0


def ess_table(data: MonotoneData, weights: np.ndarray, *, warn_below: float = 0.1,
              name: str = "weights") -> pd.DataFrame:
    """Effective sample size of the inverse-probability weights per stage and arm.

    ``weights`` (n, T) holds ``1 / (e_A(X) r_t(H_t))`` for the responders of stage ``t``. Warns
    (:class:`~causalkit.exceptions.OverlapWarning`) when the ESS of a stage and arm falls below
    ``warn_below`` times its number of responders.
    """
    rows = []
    for k in range(data.n_stages):
        for arm in (0, 1):
            sel = data.responders(k) & (data.a == arm)
            ess = effective_sample_size(weights[sel, k])
            rows.append({"stage": k + 1, "treatment": arm, "n_observed": int(sel.sum()),
                         "ess": ess, "ess_fraction": ess / max(int(sel.sum()), 1),
                         "max_weight": float(weights[sel, k].max())})
    table = pd.DataFrame(rows)
    low = table[table["ess_fraction"] < warn_below]
    if len(low):
        where = ", ".join(f"stage {r.stage} arm {r.treatment} (ESS {r.ess:.1f} of "
                          f"{r.n_observed})" for r in low.itertuples())
        warnings.warn(f"{name}: small effective sample size at {where}; the weights are "
                      "extreme (weak overlap or heavy drop-out)", OverlapWarning, stacklevel=3)
    return table


class PerArmStage:
    """Stage learner built from any sklearn regressor: one clone per treatment arm.

    This is the default implementation of the *stage-learner protocol* used by
    :class:`OutcomeChain`: ``fit_stage(H, treatment, y, labeled, sample_weight=None, stage=0)``
    returns a fitted object whose ``predict(H, arm)`` gives ``m_t`` at treatment ``arm`` (a
    scalar or an array of 0/1 per row). ``y`` is NaN where ``labeled`` is False; ``stage`` is
    the stage index ``k`` (0 = the first, ``H = X``), which this learner ignores. A learner
    that splits rows internally (a validation set) may also take ``groups``: on a bootstrap
    resample the chain passes the unit each row copies, so a split can keep copies together.
    """

    def __init__(self, model):
        self.model = model

    def fit_stage(self, H, treatment, y, labeled, sample_weight=None, stage=0):
        return _FittedPerArm([self._fit_arm(H, treatment, y, labeled, sample_weight, arm)
                              for arm in (0, 1)])

    def _fit_arm(self, H, treatment, y, labeled, sample_weight, arm):
        rows = labeled & (treatment == arm)
        if rows.sum() == 0:
            raise ValueError(f"no observed unit with treatment={arm} to fit a stage regression")
        w = None if sample_weight is None else sample_weight[rows]
        return fit_clone(self.model, H[rows], y[rows], sample_weight=w)


class _FittedPerArm:
    def __init__(self, models):
        self.models = models

    def predict(self, H, arm):
        arm = np.broadcast_to(np.asarray(arm), (H.shape[0],))
        out = np.empty(H.shape[0])
        for a in (0, 1):
            sel = arm == a
            if sel.any():
                out[sel] = self.models[a].predict(H[sel])
        return out


def _takes_groups(learner) -> bool:
    """Whether a stage learner's ``fit_stage`` accepts ``groups`` (the unit each row copies in
    a bootstrap resample, for learners that split rows internally, as scikit-learn's
    ``has_fit_parameter`` asks of ``sample_weight``)."""
    return "groups" in inspect.signature(learner.fit_stage).parameters


def as_stage_learner(model, seed: int | None = None):
    """Wrap a plain regressor as :class:`PerArmStage`; pass stage learners through.

    ``None`` means OLS. ``seed`` fills an unset ``random_state`` of the regressor (or of a stage
    learner with scikit-learn parameters); a ``random_state`` the user set is kept.
    """
    model = default_regressor() if model is None else model
    if hasattr(model, "fit_stage"):
        return seeded(model, seed) if hasattr(model, "get_params") else model
    if not hasattr(model, "fit") or not hasattr(model, "predict"):
        raise TypeError(f"outcome_model must be a regressor with fit/predict or a stage learner "
                        f"with fit_stage; got {type(model).__name__}")
    return PerArmStage(seeded(model, seed))


class OutcomeChain:
    """Backward nested regressions ``m_T, ..., m_1`` (sequential regression imputation).

    For ``t = T, ..., 1`` the stage-``t`` model is fitted on the responders of stage ``t`` with
    features ``H_t`` (per arm, or however the stage learner treats the arm) and target
    ``Y~^(t)``: ``Y`` at ``t = T``; below it, for units observed at stage ``t``,

    * ``"impute_missing"``: ``Y~^(t) = Y~^(t+1)`` if ``R_{t+1} = 1``, else ``m_{t+1}(H_{t+1})``
      (observed values are kept; without drop-out the chain reduces to the T-learner exactly);
    * ``"replace_all"``: ``Y~^(t) = m_{t+1}(H_{t+1})`` (plain iterated conditional expectation).

    Both identify ``m_t`` under sequential missingness. ``weights(k, rows)`` (optional) returns
    per-row sample weights for stage ``k``'s regression (the marginal structural model);
    ``update(k, rows, y, labeled, stage)`` (optional) returns the stage model that replaces the
    fitted one before it builds the next target (the targeting step of
    :class:`~causalkit.longterm.SequentialTMLE`).

    ``model`` is a regressor or a stage learner (see :func:`as_stage_learner`); with
    ``random_state`` (a ``SeedSequence``) each stage's learner gets its own seed, child ``k``.
    """

    def __init__(self, model, mode: str = "impute_missing", random_state=None):
        self.model = model
        self.mode = mode
        self.random_state = random_state
        as_stage_learner(model)                 # type check before any fitting

    def _learner(self, k: int):
        seed = None if self.random_state is None else seed_int(child_seed(self.random_state, k))
        return as_stage_learner(self.model, seed)

    def fit(self, data: MonotoneData, weights=None, update=None) -> OutcomeChain:
        T = data.n_stages
        target = data.Z[:, T - 1].copy()
        self.stages_ = [None] * T
        for k in range(T - 1, -1, -1):
            rows = data.at_risk(k)
            H = data.history(k, rows)
            labeled = data.responders(k)[rows]
            y = np.where(labeled, target[rows], np.nan)
            w = None if weights is None else weights(k, rows)
            learner = self._learner(k)
            units = ({} if data.units is None or not _takes_groups(learner)
                     else {"groups": data.units[rows]})
            stage = learner.fit_stage(H, data.a[rows], y, labeled, sample_weight=w, stage=k,
                                      **units)
            if update is not None:
                stage = update(k, rows, y, labeled, stage)
            self.stages_[k] = stage
            if k > 0:
                pred = stage.predict(H, data.a[rows])
                new = pred if self.mode == "replace_all" else np.where(labeled, y, pred)
                target = np.full(data.n, np.nan)
                target[rows] = new
        return self

    def predict(self, k: int, data: MonotoneData, rows, arm) -> np.ndarray:
        """``m_k`` at treatment ``arm`` for ``rows`` (which must be at risk at stage ``k``)."""
        return self.stages_[k].predict(data.history(k, rows), arm)

    def predict_effect(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(m_1(x, 0), m_1(x, 1))`` for new covariates."""
        return self.stages_[0].predict(X, 0), self.stages_[0].predict(X, 1)

