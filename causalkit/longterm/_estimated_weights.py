"""The term that estimating logistic inverse-probability weights adds to an influence function.

A weighting estimator's influence function with the weights treated as known, ``phi_i``, omits
the variation of the fitted propensity ``e(X) = expit(X~' gamma)`` and continuation probabilities
``lambda_t(H_t) = expit(H~_t' theta_t)``. Stacking their maximum-likelihood scores
``psi_e = X~ (A - e)`` and ``psi_t = I(at risk at t) H~_t (R_t - lambda_t)`` with the estimator
(M-estimation; Stefanski & Boos 2002, *Amer. Statist.* 56(1)) gives

.. math::

    \\mathrm{IF}_i = \\phi_i - G_e H_e^{-1} \\psi_{e,i} - \\sum_t G_t H_t^{-1} \\psi_{t,i},
    \\qquad G = P_n[\\partial \\phi / \\partial \\gamma^\\top], \\quad
    H = P_n[\\partial \\psi / \\partial \\gamma^\\top] = -P_n[p(1 - p) \\tilde X \\tilde X^\\top].

The weight of a unit of arm ``a`` is ``W = 1 / (e_a r_T)``, so
``d log W / d gamma = -(1 - e) X~`` (arm 1), ``e X~`` (arm 0) and
``d log W / d theta_t = -(1 - lambda_t) H~_t``; the estimator's dependence on the weights
enters through ``u_a = d phi_a / d log W``: ``u_a = W Y`` for the unnormalised mean and
``u_a = W (Y - mu_a) / mean(W)`` for the Hajek ratio. Under correct specification
``G = -P_n[phi psi']`` and ``H = -P_n[psi psi']``, so the term is minus the projection of
``phi`` on the scores, which can only lower the variance: estimated weights give a smaller
asymptotic variance than the true ones (Robins, Rotnitzky & Zhao 1994, *JASA* 89(427),
Thm. 1; Lunceford & Davidian 2004, *Statist. Med.* 23(19), sec. 3.2). The sandwich form used
here also holds when the selection models are misspecified (then ``G`` is no projection).

It applies to maximum-likelihood logistic fits: ``LogisticRegression`` (its penalty is ignored,
which is exact for the default's ``C = 1e4`` on standardised columns to within rounding, and
approximate for strong penalties), alone or after ``StandardScaler`` steps (a linear
reparameterisation, which leaves the term unchanged), and ``DummyClassifier(strategy="prior")``
(the intercept-only fit). A probability clipped at a bound does not move with the coefficients:
its derivative is taken as zero.
"""

from __future__ import annotations

import numpy as np
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression

from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import selection_features, unscaled
from causalkit.longterm._sandwich import Design

__all__ = ["logistic_kind", "weight_estimation_term"]


def logistic_kind(model) -> str | None:
    """``"logistic"`` for a (scaled) ``LogisticRegression`` with an intercept, ``"intercept"``
    for ``DummyClassifier(strategy="prior")``, ``None`` for any other (fitted) classifier."""
    model = unscaled(model)
    if isinstance(model, LogisticRegression) and model.fit_intercept:
        return "logistic"
    if isinstance(model, DummyClassifier) and model.strategy == "prior":
        return "intercept"
    return None


def _term(features: np.ndarray, kind: str, p: np.ndarray, target: np.ndarray,
          dphi_deta: np.ndarray, n: int) -> np.ndarray:
    """``G H^{-1} psi_i`` of one logistic model fitted on ``features`` (its rows), where
    ``dphi_deta`` is the derivative of ``phi`` with respect to the model's linear predictor."""
    design = Design(features, intercept_only=kind == "intercept")
    Z = design(features)
    G = Z.T @ dphi_deta / n
    H = -(Z * (p * (1.0 - p))[:, None]).T @ Z / n
    return (Z * (target - p)[:, None]) @ np.linalg.solve(H, G)


def weight_estimation_term(data: MonotoneData, e1: np.ndarray, lam: np.ndarray,
                           u1: np.ndarray, u0: np.ndarray, propensity_model, selection_models,
                           propensity_bounds: tuple[float, float],
                           selection_floor: float) -> np.ndarray:
    """``sum_j G_j H_j^{-1} psi_{j,i}`` (n,), to be subtracted from the weights-known influence
    function of an ATE ``mu_1 - mu_0``. Every fitted model must be a logistic
    maximum-likelihood fit (:func:`logistic_kind` not None; see the module docstring).

    Parameters
    ----------
    data : MonotoneData
        The data the models were fitted on.
    e1, lam : ndarray
        Fitted (clipped) ``P(A = 1 | X)`` (n,) and continuation probabilities (n, T).
    u1, u0 : ndarray
        ``d phi_a / d log W`` for each arm (n,), zero outside the arm's complete cases.
    propensity_model, selection_models :
        The fitted propensity model and the per-stage selection models (``None`` for a stage
        without drop-out).
    propensity_bounds, selection_floor :
        The clipping bounds; a clipped probability has derivative zero.
    """
    n = data.n
    lower, upper = propensity_bounds
    free = (e1 > lower) & (e1 < upper)
    dphi = np.where(free, -(u1 * (1.0 - e1) + u0 * e1), 0.0)
    term = _term(data.X, logistic_kind(propensity_model), e1, data.a, dphi, n)
    for k, model in enumerate(selection_models):
        if model is None:
            continue
        rows = data.at_risk(k)
        p = lam[rows, k]
        dphi = np.where(p > selection_floor, -(u1 - u0)[rows] * (1.0 - p), 0.0)
        term[rows] += _term(selection_features(data, k, rows), logistic_kind(model), p,
                            data.R[rows, k], dphi, n)
    return term
