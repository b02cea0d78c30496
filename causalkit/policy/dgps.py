"""Reference data-generating processes for covariate-shift policy evaluation and learning.

All designs draw source covariates :math:`X \\sim N(0, I_3)` and target covariates
:math:`X \\sim N(m, I_3)`, so the true density ratio is :math:`w(x) = \\exp(m^\\top x -
\\|m\\|^2/2)` and a logistic domain classifier on :math:`x` is correctly specified. Outcomes are
:math:`Y = \\mu(A, X) + N(0, 1)`, the same function in both domains (pure covariate shift), so
true target values follow from :math:`\\mu` by Monte Carlo over target covariates alone.

* ``"estimation"`` (binary, K = 2): :math:`e(1|x) = \\sigma(0.5x_1 - 0.5x_2)`,
  :math:`\\mu(a, x) = 1 + x_1 + 0.5x_2 + a(0.5 + x_1 - x_3)`.
* ``"estimation3"`` (K = 3): multinomial-logit propensity with logits
  :math:`(0,\\ 0.5x_1 - 0.5x_2,\\ -0.25 + 0.5x_2)` and :math:`\\mu(a, x) = 1 + x_1 + 0.5x_2 +
  \\tau_a(x)`, :math:`\\tau_0 = 0`, :math:`\\tau_1 = 0.5 + x_1 - x_3`,
  :math:`\\tau_2 = 0.25 - 0.5x_1 + x_2`.
* ``"learning"`` (K = 2, restricted policy classes): :math:`e(1|x) = \\sigma(0.5x_1 -
  0.5x_2)`, :math:`\\mu(a, x) = 1 + x_1 + 0.5x_2 + a\\,\\tau(x)` with the regime-switching effect
  :math:`\\tau(x) = x_2\\,\\sigma\\{-4(x_1 - 1.5)\\} - x_3\\,\\sigma\\{4(x_1 - 1.5)\\}`: driven by
  :math:`x_2` where the source lives and by :math:`x_3` where a shifted target lives, so the best
  shallow tree differs between the two populations.
* ``"nonlinear"`` (K = 2): the ``"estimation"`` design plus a curved baseline,
  :math:`\\mu(a, x) = 1 + x_1 + 0.5x_2 + 0.5x_1^2 + a(0.5 + x_1 - x_3)`, so a linear outcome
  model extrapolates wrongly into target regions the source does not cover.

The overlap grid (:data:`OVERLAP_GRID`) shifts the target mean of :math:`x_1` by 0 to 8 SD, or
moves a share of the target (``outside_share``) :data:`OUTSIDE_SHIFT` SD beyond the source
along :math:`x_1` (partial non-support).

The first two generalise the standard linear-Gaussian covariate-shift design; shift vectors
are :data:`SHIFTS` (``"none"``, ``"moderate"``, ``"strong"``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax

__all__ = ["SHIFTS", "LEARNING_SHIFTS", "OVERLAP_GRID", "OUTSIDE_SHIFT", "simulate",
           "mean_outcome", "true_value",
           "optimal_policy", "soft_policy"]

#: Target mean vectors of the estimation designs.
SHIFTS = {"none": (0.0, 0.0, 0.0), "moderate": (0.5, 0.5, 0.0), "strong": (1.0, 1.0, 0.0)}
#: Overlap grid: name -> (target mean vector, share of the target moved OUTSIDE_SHIFT SD out).
OVERLAP_GRID = {"0 SD": ((0.0, 0.0, 0.0), 0.0), "1 SD": ((1.0, 0.0, 0.0), 0.0),
                "2 SD": ((2.0, 0.0, 0.0), 0.0), "4 SD": ((4.0, 0.0, 0.0), 0.0),
                "8 SD": ((8.0, 0.0, 0.0), 0.0), "10% outside": ((0.0, 0.0, 0.0), 0.1),
                "30% outside": ((0.0, 0.0, 0.0), 0.3)}
#: Shift of :math:`x_1` (in SD) of the target units placed outside the source support.
OUTSIDE_SHIFT = 5.0
#: Target mean vectors of the learning design.
LEARNING_SHIFTS = {"none": (0.0, 0.0, 0.0), "moderate": (0.75, 0.0, 0.0),
                   "strong": (1.5, 0.0, 0.0)}

_DESIGNS = ("estimation", "estimation3", "learning", "nonlinear")


def _effects(design, X):
    """(n, K) matrix of :math:`\\mu(a, X)`."""
    base = 1.0 + X[:, 0] + 0.5 * X[:, 1]
    if design == "nonlinear":
        base = base + 0.5 * X[:, 0] ** 2
    if design in ("estimation", "nonlinear"):
        tau = [np.zeros(len(X)), 0.5 + X[:, 0] - X[:, 2]]
    elif design == "estimation3":
        tau = [np.zeros(len(X)), 0.5 + X[:, 0] - X[:, 2], 0.25 - 0.5 * X[:, 0] + X[:, 1]]
    elif design == "learning":
        gate = expit(4.0 * (X[:, 0] - 1.5))
        tau = [np.zeros(len(X)), X[:, 1] * (1.0 - gate) - X[:, 2] * gate]
    else:
        raise ValueError(f"design must be one of {_DESIGNS}; got {design!r}")
    return base[:, None] + np.column_stack(tau)


def mean_outcome(design, X):
    """True :math:`\\mu(a, X)` as an (n, K) matrix."""
    return _effects(design, np.asarray(X, dtype=float))


def _propensity(design, X):
    if design == "estimation3":
        logits = np.column_stack([np.zeros(len(X)), 0.5 * X[:, 0] - 0.5 * X[:, 1],
                                  -0.25 + 0.5 * X[:, 1]])
        return softmax(logits, axis=1)
    p1 = expit(0.5 * X[:, 0] - 0.5 * X[:, 1])
    return np.column_stack([1 - p1, p1])


def _target_covariates(rng, n, shift, outside_share):
    """Target draws :math:`N(m, I_3)`, each moved :data:`OUTSIDE_SHIFT` SD further along
    :math:`x_1` with probability ``outside_share`` (independently, so the target sample is iid
    from the mixture the estimand averages over; a fixed count would be a stratified sample,
    whose spread the iid standard errors overstate)."""
    X = rng.normal(size=(n, 3)) + np.asarray(shift, dtype=float)
    if outside_share > 0:
        X[rng.random(n) < outside_share, 0] += OUTSIDE_SHIFT
    return X


def simulate(design, rng, *, n_source=2000, n_target=2000, shift=(0.5, 0.5, 0.0),
             outside_share=0.0):
    """One data set: ``dict(X_source, treatment, y, X_target)``.

    Parameters
    ----------
    design : {"estimation", "estimation3", "learning", "nonlinear"}
    rng : numpy.random.Generator
    n_source, n_target : int
    shift : sequence of 3 floats
        Target covariate mean :math:`m`.
    outside_share : float
        Share of the target units moved :data:`OUTSIDE_SHIFT` SD further along :math:`x_1`.
    """
    if not 0.0 <= outside_share <= 1.0:
        raise ValueError(f"outside_share must be in [0, 1]; got {outside_share!r}")
    Xs = rng.normal(size=(n_source, 3))
    Xt = _target_covariates(rng, n_target, shift, outside_share)
    e = _propensity(design, Xs)
    u = rng.random(n_source)
    a = (u[:, None] > np.cumsum(e, axis=1)[:, :-1]).sum(axis=1)
    mu = _effects(design, Xs)
    y = mu[np.arange(n_source), a] + rng.normal(size=n_source)
    return {"X_source": Xs, "treatment": a, "y": y, "X_target": Xt}


def true_value(design, policy, shift, *, outside_share=0.0, region=None, n_mc=2_000_000,
               seed=20240):
    """Target value :math:`E_T[\\sum_a \\pi(a|X)\\mu(a, X)]` of a policy.

    The linear baseline part :math:`E_T[1 + X_1 + 0.5X_2] = 1 + m_1 + 0.5m_2` (plus
    ``outside_share`` times :data:`OUTSIDE_SHIFT` for :math:`X_1`) is exact; the rest
    :math:`E_T[\\sum_a \\pi(a|X)\\{\\mu(a, X) - 1 - X_1 - 0.5X_2\\}]` is a Monte Carlo mean over
    ``n_mc`` target draws with a fixed ``seed`` (common random numbers across policies).
    ``policy(X)`` returns (n, K) probabilities; ``None`` gives the unrestricted optimum
    :math:`E_T[\\max_a \\mu(a, X)]`. ``region(X)``, a boolean mask, restricts the target to a
    subset :math:`R`: the value is then :math:`E_T[\\sum_a \\pi(a|X)\\mu(a, X) \\mid X \\in R]`,
    all by Monte Carlo.
    """
    m = np.asarray(shift, dtype=float)
    rng = np.random.default_rng(seed)
    total, count, chunk = 0.0, 0, 500_000
    for start in range(0, n_mc, chunk):
        X = _target_covariates(rng, min(chunk, n_mc - start), m, outside_share)
        mu = _effects(design, X)
        if region is None:
            mu = mu - (1.0 + X[:, 0] + 0.5 * X[:, 1])[:, None]
        else:
            keep = np.asarray(region(X), dtype=bool)
            X, mu = X[keep], mu[keep]
        count += len(X)
        if policy is None:
            total += mu.max(axis=1).sum()
        else:
            total += np.sum(np.asarray(policy(X), dtype=float) * mu)
    if region is not None:
        if count == 0:
            raise ValueError("region contains none of the Monte Carlo target draws")
        return float(total / count)
    return float(1.0 + m[0] + OUTSIDE_SHIFT * outside_share + 0.5 * m[1] + total / n_mc)


class optimal_policy:
    """The unrestricted optimal rule :math:`\\arg\\max_a \\mu(a, x)` as a one-hot policy."""

    def __init__(self, design):
        self.design = design

    def __call__(self, X):
        mu = _effects(self.design, np.asarray(X, dtype=float))
        return np.eye(mu.shape[1])[mu.argmax(axis=1)]


class soft_policy:
    """A stochastic policy: :math:`\\pi(1|x) = \\sigma(2x_1)` (K = 2) or
    :math:`\\operatorname{softmax}(0, 2x_1, x_2)` (K = 3)."""

    def __init__(self, design):
        self.design = design

    def __call__(self, X):
        X = np.asarray(X, dtype=float)
        if self.design == "estimation3":
            return softmax(np.column_stack([np.zeros(len(X)), 2 * X[:, 0], X[:, 1]]), axis=1)
        p = expit(2 * X[:, 0])
        return np.column_stack([1 - p, p])
