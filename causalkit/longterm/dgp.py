"""Simulated long-term data with a closed-form effect and short-term-outcome-driven drop-out.

Potential-outcome chain (``T`` stages, ``T - 1`` short-term outcomes):

    S_1(a) = X g_1 + d_1 a + e_1,
    S_t(a) = rho S_{t-1}(a) + X g_t + d_t a + e_t,          t = 2, ..., T-1,
    Y(a)   = kappa S_{T-1}(a) + X b + (d_T + X theta) a + e_T,

so ``tau(x) = d_T + x theta + kappa D_{T-1}`` with ``D_1 = d_1``, ``D_t = rho D_{t-1} + d_t``
(for ``T = 3``: ``d_3 + x theta + kappa (d_2 + rho d_1)``). Drop-out is monotone and sequentially
missing at random: ``R_1 ~ Bernoulli(sigma(alpha_1 + X eta + zeta A))`` and, for ``t >= 2``,
``R_t | R_{t-1} = 1 ~ Bernoulli(sigma(alpha_t + xi S_{t-1} + X eta + zeta A))``; the intercepts
``alpha_t`` are solved so that the stage-wise drop-out rates hit ``dropout``. Every nuisance is
linear or logistic-linear in its history, so OLS and logistic regression are correct models.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

from causalkit._validation import check_array, check_binary, check_fraction

__all__ = ["LinearGaussianDesign"]


class LinearGaussianDesign:
    """Linear-Gaussian long-term design with known ``tau(x)``.

    Parameters
    ----------
    n_features : int
        Covariates (used when ``sample`` draws ``X ~ N(0, I)``).
    dropout : sequence of float
        Drop-out rate among the units at risk at each stage; its length is ``T``.
    xi : float
        Effect of the latest short-term outcome on staying (``0``: drop-out ignores them).
    zeta : float
        Effect of treatment on staying.
    delta : sequence of float, optional
        ``(d_1, ..., d_T)``; default ``(1, 0.5, ..., 0.5, 2)``.
    rho, kappa : float
        Carry-over between short-term outcomes and from the last one to ``Y``.
    theta_scale : float
        Size of the effect modification ``X theta``.
    propensity_scale : float
        Size of the propensity coefficients (``0``: randomised with probability 1/2).
    seed : int
        Seed of the coefficient draws (fixed design across replications).
    """

    def __init__(self, n_features=5, dropout=(0.2, 0.2, 0.2), xi=1.0, zeta=0.3, delta=None,
                 rho=0.5, kappa=1.0, theta_scale=0.5, propensity_scale=0.4, noise=1.0, seed=7):
        self.T = len(dropout)
        if self.T < 1:
            raise ValueError("dropout needs one rate per stage")
        self.dropout = tuple(check_fraction(d, "dropout") for d in dropout)
        if max(self.dropout) >= 1:
            raise ValueError("dropout rates must be below 1")
        self.p = int(n_features)
        self.xi, self.zeta, self.rho, self.kappa, self.noise = xi, zeta, rho, kappa, noise
        T = self.T
        self.delta = np.asarray(delta if delta is not None
                                else [1.0] + [0.5] * (T - 2) + [2.0] if T > 1 else [2.0], float)
        if self.delta.size != T:
            raise ValueError(f"delta needs {T} values; got {self.delta.size}")
        rng = np.random.default_rng(seed)
        p = self.p
        self.gamma = rng.uniform(-0.6, 0.6, size=(max(T - 1, 0), p))
        self.beta = rng.uniform(-1.0, 1.0, size=p)
        self.theta = theta_scale * rng.uniform(-1.0, 1.0, size=p)
        self.eta = rng.uniform(-0.3, 0.3, size=p)
        self.psi = propensity_scale * rng.uniform(-1.0, 1.0, size=p)
        self.seed = seed
        self._alpha_cache = {}

    # -- truth -------------------------------------------------------------------------------
    def short_effects(self) -> np.ndarray:
        """``D_t = S_t(1) - S_t(0)`` for ``t = 1, ..., T-1``."""
        D = np.zeros(max(self.T - 1, 0))
        for t in range(self.T - 1):
            D[t] = self.delta[t] + (self.rho * D[t - 1] if t else 0.0)
        return D

    def tau(self, X) -> np.ndarray:
        """Closed-form ``tau(x)``."""
        X = check_array(X, "X")
        carry = self.kappa * self.short_effects()[-1] if self.T > 1 else 0.0
        return self.delta[-1] + X @ self.theta + carry

    def ate(self) -> float:
        """Population ATE for ``X ~ N(0, I)`` (``E[X] = 0``)."""
        return float(self.tau(np.zeros((1, self.p)))[0])

    def _chain_mean(self, X, a, t, previous):
        """``m_t = E[Y(a) | X, Z_1, ..., Z_{t-1}]`` for stage ``t`` (0-based) with the stage
        ``t - 1`` outcome ``previous`` (``None`` at the first stage): the chain's conditional
        means carried forward with zero noise."""
        s = previous
        for u in range(t, self.T - 1):
            s = (self.rho * s if s is not None else 0.0) + X @ self.gamma[u] + self.delta[u] * a
        last = self.kappa * s if self.T > 1 else 0.0
        return last + X @ self.beta + (self.delta[-1] + X @ self.theta) * a

    def efficient_influence(self, sample: dict) -> np.ndarray:
        """Efficient influence function of the population ATE at the true nuisances, per unit
        of a ``sample(rng, n=...)`` draw (``X ~ N(0, I)``, treatment from the design's
        propensity):

        .. math::

            \\varphi = \\sum_{a=0}^{1} (2a - 1)\\Big[m_1(X, a) + \\frac{I(A = a)}{e_a(X)}
                       \\sum_{t=1}^{T} \\frac{R_t}{\\prod_{s \\le t} \\lambda_s(H_s)}
                       \\{m_{t+1}(H_{t+1}) - m_t(H_t)\\}\\Big] - \\tau,
            \\qquad m_{T+1} = Y,

        with the design's propensity :math:`e_1(X) = \\sigma(X\\psi)`, continuation
        probabilities :math:`\\lambda_t` and chain means :math:`m_t(H_t) = E[Y(a) \\mid X,
        Z_1, \\dots, Z_{t-1}]`. :math:`\\operatorname{Var}(\\varphi)/n` is the semiparametric
        efficiency bound for the ATE when the drop-out and treatment mechanisms are known, or
        modelled parametrically, and the outcome law is otherwise unrestricted (Robins,
        Rotnitzky & Zhao 1994, *JASA* 89(427); Tsiatis 2006, *Semiparametric Theory and
        Missing Data*, Thm. 10.1 and 10.4): no regular estimator that stays consistent with a
        wrong outcome chain when the weights are right has a smaller asymptotic variance. A
        parametric plug-in such as :class:`~causalkit.longterm.SequentialRegression` can,
        because it also assumes the chain's linear form.
        """
        X, R = sample["X"], sample["observed"]
        treatment = np.asarray(sample["treatment"])
        Z = np.nan_to_num(np.column_stack([sample["short"], sample["outcome"]]))
        alpha = self.intercepts()
        e1 = expit(X @ self.psi)
        phi = np.full(X.shape[0], -self.ate())
        for a in (0, 1):
            augmentation, stay = np.zeros(X.shape[0]), np.ones(X.shape[0])
            for t in range(self.T):
                previous = Z[:, t - 1] if t else None
                stay = stay * expit(alpha[t] + self._stay_index(X, treatment, Z, t))
                following = (Z[:, t] if t == self.T - 1
                             else self._chain_mean(X, a, t + 1, Z[:, t]))
                step = following - self._chain_mean(X, a, t, previous)
                augmentation += np.where((R[:, t] == 1) & (treatment == a), step / stay, 0.0)
            e_a = e1 if a else 1.0 - e1
            phi += (2 * a - 1) * (self._chain_mean(X, a, 0, None) + augmentation / e_a)
        return phi

    def efficient_variance(self, rng, n_mc=1_000_000) -> float:
        """:math:`\\operatorname{Var}(\\varphi)` of :meth:`efficient_influence`, with the
        drop-out and the chain's noise integrated out: the stage terms are martingale
        differences, so

        .. math::

            \\operatorname{Var}(\\varphi) = \\lVert\\theta\\rVert^2 + \\sum_{a=0}^{1}
                \\sum_{t=1}^{T} c_t^2\\sigma^2\\,
                E\\Big[\\frac{1}{e_a(X)\\prod_{s \\le t}\\lambda_s(H_s(a))}\\Big],

        where :math:`c_t` is the weight of the stage-``t`` outcome in :math:`m_{t+1}`
        (:math:`\\kappa\\rho^{T-1-t}` for a short-term outcome, 1 for ``Y``),
        :math:`\\sigma` the noise SD and :math:`H_s(a)` the history with treatment set to
        ``a``. The expectation is a Monte Carlo mean over ``n_mc`` complete chains from
        ``rng``; under heavy drop-out it converges far faster than the sample variance of
        :math:`\\varphi`, whose log-normal-like weight tails make it erratic."""
        X = rng.normal(size=(int(n_mc), self.p))
        S, _ = self._potential(X, rng)
        alpha = self.intercepts()
        e1 = expit(X @ self.psi)
        coefficients = [self.kappa * self.rho ** (self.T - 2 - t) for t in range(self.T - 1)]
        total = float(self.theta @ self.theta)
        for a in (0, 1):
            A = np.full(X.shape[0], a)
            inverse = 1.0 / (e1 if a else 1.0 - e1)
            for t, c in enumerate(coefficients + [1.0]):
                inverse = inverse / expit(alpha[t] + self._stay_index(X, A, S[a], t))
                total += c ** 2 * self.noise ** 2 * float(inverse.mean())
        return total

    # -- sampling ----------------------------------------------------------------------------
    def _potential(self, X, rng):
        n, T = X.shape[0], self.T
        eps = self.noise * rng.normal(size=(n, T))
        S = np.zeros((2, n, max(T - 1, 0)))
        Y = np.zeros((2, n))
        for a in (0, 1):
            for t in range(T - 1):
                prev = self.rho * S[a, :, t - 1] if t else 0.0
                S[a, :, t] = prev + X @ self.gamma[t] + self.delta[t] * a + eps[:, t]
            last = self.kappa * S[a, :, -1] if T > 1 else 0.0
            Y[a] = last + X @ self.beta + (self.delta[-1] + X @ self.theta) * a + eps[:, -1]
        return S, Y

    def _stay_index(self, X, A, S, t):
        lin = X @ self.eta + self.zeta * A
        return lin + (self.xi * S[:, t - 1] if t else 0.0)

    def intercepts(self, X=None, treatment=None) -> tuple:
        """Stage intercepts ``alpha_t`` hitting the drop-out rates, solved on a 200,000-unit
        pilot drawn like ``sample`` (from ``X`` and ``treatment`` when they are fixed; cached)."""
        key = None if X is None else (X.shape, float(np.sum(X)), float(np.sum(X ** 2)),
                                      None if treatment is None else int(np.sum(treatment)))
        if key not in self._alpha_cache:
            self._alpha_cache[key] = _solve_intercepts(self, X, treatment)
        return self._alpha_cache[key]

    def sample(self, rng, n=None, X=None, treatment=None) -> dict:
        """One data set: ``X, treatment, short, outcome`` (NaN after drop-out), ``observed``,
        ``tau`` (per unit), ``truth`` (``mean tau`` over the sample when ``X`` is given, else
        the population ATE) and ``complete`` potential outcomes ``y0, y1``."""
        X_fixed = X
        if X is None:
            if n is None:
                raise ValueError("give n or X")
            X = rng.normal(size=(int(n), self.p))
            truth = self.ate()
        else:
            X = check_array(X, "X")
            truth = float(self.tau(X).mean())
        if treatment is None:
            A = rng.binomial(1, expit(X @ self.psi))
        else:
            A = check_binary(treatment, "treatment", n=X.shape[0])
        S_pot, Y_pot = self._potential(X, rng)
        S = np.where(A[:, None] == 1, S_pot[1], S_pot[0])
        Y = np.where(A == 1, Y_pot[1], Y_pot[0])
        alpha = self.intercepts(X_fixed, None if treatment is None else A)
        R = np.ones((X.shape[0], self.T), dtype=int)
        for t in range(self.T):
            stay = rng.uniform(size=X.shape[0]) < expit(alpha[t] + self._stay_index(X, A, S, t))
            R[:, t] = stay & (R[:, t - 1] == 1 if t else True)
        Z = np.column_stack([S, Y]).astype(float)
        Z[R == 0] = np.nan
        return {"X": X, "treatment": A, "short": Z[:, :-1], "outcome": Z[:, -1], "observed": R,
                "tau": self.tau(X), "truth": truth, "y0": Y_pot[0], "y1": Y_pot[1]}


def _solve_intercepts(design: LinearGaussianDesign, X, treatment) -> tuple:
    rng = np.random.default_rng(12345)
    if X is None:
        X = rng.normal(size=(200_000, design.p))
    else:
        reps = max(1, 200_000 // X.shape[0])
        X = np.tile(X, (reps, 1))
        treatment = None if treatment is None else np.tile(treatment, reps)
    A = rng.binomial(1, expit(X @ design.psi)) if treatment is None else treatment
    S_pot, _ = design._potential(X, rng)
    S = np.where(A[:, None] == 1, S_pot[1], S_pot[0])
    at_risk = np.ones(X.shape[0], dtype=bool)
    alphas = []
    for t in range(design.T):
        index = design._stay_index(X[at_risk], A[at_risk], S[at_risk], t)
        target = 1.0 - design.dropout[t]
        alpha = (np.inf if target == 1.0 else
                 brentq(lambda c, idx=index, p=target: expit(c + idx).mean() - p, -30, 30))
        alphas.append(alpha)
        stay = rng.uniform(size=at_risk.sum()) < expit(alpha + index)
        idx = np.flatnonzero(at_risk)
        at_risk = np.zeros_like(at_risk)
        at_risk[idx[stay]] = True
    return tuple(alphas)

