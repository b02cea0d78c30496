"""Simulated trials with external controls, for the studies, tests and vignette.

Each design takes a ``numpy.random.Generator`` and returns a dict with ``X, y, a, s`` (covariates,
outcome, treatment, trial indicator; trial rows first), ``biased`` (boolean mask over the
external controls: which ones are not exchangeable) and ``truth`` (the trial-population ATE).
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.optimize import brentq
from scipy.special import expit

__all__ = ["paper_a_design", "gao_design", "OUTCOMES", "ERRORS"]

OUTCOMES = ("linear", "nonlinear", "binary")
#: Outcome error laws of :func:`paper_a_design`, each with mean 0 and variance 1.
ERRORS = ("normal", "t5", "exponential", "lognormal")
_BETA = np.array([1.0, 0.8, 0.6, 0.4, 0.2, 0.0, 0.0, 0.0])


def paper_a_design(rng: np.random.Generator, *, outcome: str = "linear", bias: float = 0.0,
                   frac_biased: float = 0.3, n_trial: int = 400, n_treated: int = 300,
                   n_external: int = 800, n_features: int = 8, shift: float = 0.3,
                   errors: str = "normal") -> dict:
    """Design of Yang, Li & Wu (2025) (sizes as their code; outcome models as the notes' grid).

    * Trial: :math:`X\\sim N(0, I_p)`, ``n_treated`` of ``n_trial`` units randomised to treatment.
    * External controls: :math:`X\\sim N(\\delta 1, I_p)` (``shift`` :math:`=\\delta`).
    * Control outcome: linear :math:`Y(0) = 1 + X^\\top\\beta + \\varepsilon`; nonlinear
      :math:`Y(0) = e^{X^\\top\\beta/2} + \\sin X_1 + \\varepsilon`; binary
      :math:`P(Y(0)=1) = \\mathrm{expit}(X^\\top\\beta/2 - 0.5)`. :math:`\\varepsilon\\sim N(0,1)`,
      :math:`\\beta = (1, .8, .6, .4, .2, 0, \\dots)`.
    * ``errors``: the law of :math:`\\varepsilon`, standardised to mean 0 and variance 1:
      ``"normal"``, ``"t5"`` (Student t with 5 df), ``"exponential"`` (centred Exp(1), skewness 2)
      or ``"lognormal"`` (centred, :math:`\\log\\varepsilon\\sim N(0, 0.5^2)`, skewness 1.75).
    * Effect :math:`\\tau(X) = 1 + 0.5X_1` (binary: :math:`Y(1)` has logit shifted by 1), truth
      the trial-population mean (1 for continuous outcomes).
    * Non-exchangeability: a random ``frac_biased`` of the external controls get
      :math:`Y + \\text{bias}` (binary: logit + 4·bias).
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}; got {outcome!r}")
    if errors not in ERRORS:
        raise ValueError(f"errors must be one of {ERRORS}; got {errors!r}")
    beta = np.resize(_BETA, n_features) if n_features > _BETA.size else _BETA[:n_features]
    Xt = rng.normal(size=(n_trial, n_features))
    Xe = rng.normal(loc=shift, size=(n_external, n_features))
    a = rng.permutation(np.r_[np.ones(n_treated, int), np.zeros(n_trial - n_treated, int)])
    biased = np.zeros(n_external, bool)
    chosen = rng.choice(n_external, int(round(frac_biased * n_external)), replace=False)
    biased[chosen] = bias != 0
    X = np.vstack([Xt, Xe])
    A = np.r_[a, np.zeros(n_external, int)]
    shift_y = np.r_[np.zeros(n_trial), bias * biased]
    if outcome == "binary":
        eta0 = X @ beta / 2 - 0.5 + 4 * shift_y
        y = rng.binomial(1, expit(eta0 + A * 1.0)).astype(float)
        truth = _binary_truth(beta)
    else:
        mu0 = 1 + X @ beta if outcome == "linear" else np.exp(X @ beta / 2) + np.sin(X[:, 0])
        y = mu0 + A * (1 + 0.5 * X[:, 0]) + shift_y + _errors(rng, errors, X.shape[0])
        truth = 1.0
    s = np.r_[np.ones(n_trial, int), np.zeros(n_external, int)]
    return {"X": X, "y": y, "a": A, "s": s, "biased": biased, "truth": truth}


def _errors(rng: np.random.Generator, law: str, n: int) -> np.ndarray:
    """``n`` draws of a mean-0, variance-1 error law (see :data:`ERRORS`)."""
    if law == "normal":
        return rng.normal(size=n)
    if law == "t5":
        return rng.standard_t(5, size=n) / np.sqrt(5 / 3)
    if law == "exponential":
        return rng.exponential(size=n) - 1.0
    s2 = 0.25                                        # lognormal with log-SD 0.5
    mean, var = np.exp(s2 / 2), (np.exp(s2) - 1) * np.exp(s2)
    return (rng.lognormal(sigma=np.sqrt(s2), size=n) - mean) / np.sqrt(var)


def _binary_truth(beta) -> float:
    """Trial-population risk difference of the binary design, by Gauss-Hermite quadrature
    over the normal linear predictor (mean -0.5, SD ||beta||/2)."""
    sd = np.linalg.norm(beta) / 2
    nodes, weights = hermegauss(80)
    z = -0.5 + sd * nodes
    return float(np.sum(weights * (expit(z + 1.0) - expit(z))) / np.sqrt(2 * np.pi))


def _gao_constants(n_rct: int, n_ec: int, p_treat: float):
    """Intercepts solving E[trial] = n_rct/(n_rct+n_ec) and P(A=1 | trial) = p_treat, and the
    truth 0.3 E[X1+X2 | trial]; Z = X1+X2 ~ N(0, 2), integrated by Gauss-Hermite."""
    nodes, weights = hermegauss(120)
    z, w = np.sqrt(2.0) * nodes, weights / np.sqrt(2 * np.pi)
    share = n_rct / (n_rct + n_ec)
    alpha0 = brentq(lambda c: w @ expit(c - 2 * z) - share, -30, 30)
    sel = w * expit(alpha0 - 2 * z)
    eta0 = brentq(lambda c: sel @ expit(c - 1 - z) / sel.sum() - p_treat, -30, 30)
    truth = 0.3 * float(sel @ z / sel.sum())
    return alpha0, eta0, truth


def gao_design(rng: np.random.Generator, *, omega: float = 0.3, n_rct: int = 200,
               n_ec: int = 500, p_treat: float = 0.5) -> dict:
    """Reference design of Gao et al. (2025) (``SelectiveIntegrative`` README, small version).

    Population :math:`X_1, X_2\\sim N(0,1)`, :math:`N = n_{rct}+n_{ec}`; trial membership
    :math:`\\delta\\sim\\mathrm{Bern}\\{\\mathrm{expit}(\\alpha_0 - 2X_1 - 2X_2)\\}`; in the trial
    :math:`A\\sim\\mathrm{Bern}\\{\\mathrm{expit}(\\eta_0 - 1 - X_1 - X_2)\\}`. Outcomes, with
    :math:`\\tilde X = (1, X_1, X_2)`: trial :math:`Y = 1 + \\tilde X^\\top 1 + 0.3A(X_1+X_2) +
    N(0,1) + \\omega N(0,1)`; external :math:`Y = 1 + \\tilde X^\\top 1 + \\omega N(1,1) + N(0,1)`,
    so every external control is shifted by :math:`\\omega`. Truth
    :math:`0.3\\,E(X_1+X_2\\mid\\delta=1)`.
    """
    alpha0, eta0, truth = _gao_constants(n_rct, n_ec, p_treat)
    N = n_rct + n_ec
    X = rng.normal(size=(N, 2))
    zsum = X.sum(axis=1)
    s = rng.binomial(1, expit(alpha0 - 2 * zsum))
    a = np.where(s == 1, rng.binomial(1, expit(eta0 - 1 - zsum)), 0)
    base = 2 + zsum
    y_trial = base + 0.3 * a * zsum + rng.normal(size=N) + omega * rng.normal(size=N)
    y_ext = base + omega * rng.normal(1.0, 1.0, size=N) + rng.normal(size=N)
    y = np.where(s == 1, y_trial, y_ext)
    order = np.r_[np.flatnonzero(s == 1), np.flatnonzero(s == 0)]
    n_external = int(N - s.sum())
    return {"X": X[order], "y": y[order], "a": a[order], "s": s[order],
            "biased": np.full(n_external, omega != 0), "truth": truth}
