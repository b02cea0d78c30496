"""Can an interval centred on ``AdaptiveBorrowing``'s estimate be valid whatever the bias of
full borrowing and still be shorter than the trial-only interval? Measured answer: no (an
interval not centred on it can: see the end of this docstring).

In the normal approximation of ``causalkit.borrowing.adaptive`` (:math:`s_D` the SE of
:math:`\\hat D = \\hat\\tau_E - \\hat\\tau_0`, :math:`\\theta = \\delta/s_D` the standardised bias,
:math:`U = z - \\theta \\sim N(0,1)`, :math:`\\kappa = \\mathrm{cov}(\\hat\\tau_E,\\hat D)/s_D^2`),

.. math::

    (\\hat\\tau - \\tau)/s_D = W + \\kappa U + \\theta - \\eta(\\theta + U),
    \\qquad W \\sim N(0, \\omega^2),\\ \\omega^2 = s_E^2/s_D^2 - \\kappa^2,

so the error law is known for each :math:`\\theta`. The best-known construction that is valid
for every :math:`\\theta` and adapts to small biases is the size-corrected hybrid of McCloskey
(2017): take the :math:`1-\\beta` confidence set :math:`C(z) = z \\pm z_{1-\\beta/2}` for
:math:`\\theta` and report
:math:`[\\hat\\tau - s_D\\max_{C(z)} q_{1-a/2}(\\theta),\\
\\hat\\tau - s_D\\min_{C(z)} q_{a/2}(\\theta)]`,
with :math:`a` set by root finding so that the smallest coverage over :math:`\\theta` is exactly
0.95 (coverage and length by Gauss-Hermite quadrature; no simulated data). For
:math:`\\omega \\in \\{0.5, 0.8, 1.2, 2\\}` (0.8 is the Paper A design, 2 Gao et al.'s) and
:math:`\\beta` from 0.01 to 0.3, the expected length divided by the trial-only interval's
:math:`2 z_{0.975}\\sqrt{1+\\omega^2}` is never below 1, at :math:`\\theta = 0` included.

The limit is the centring, not validity itself. With the bias unrestricted, the hypotheses
:math:`\\{\\tau = \\tau'\\}` are lines in the mean of :math:`(\\hat\\tau_E, \\hat D)`, and the most
powerful test of one of them against a single alternative uses only
:math:`\\hat\\tau_E - \\hat D = \\hat\\tau_0`, one-sided; but which side it rejects on depends on
the alternative, and an estimate independent of :math:`\\hat\\tau_0` may choose it. Inverting
trial-only's tests with the level split that way gives an interval valid for every bias and
shorter than trial-only's when the external controls are exchangeable (Pratt 1963; Yu & Hoff
2018): ``AdaptiveBorrowing``'s default FAB interval (``causalkit.fab``;
``simulations/borrowing_fab_interval_check.py``).

Writes ``simulations/results/borrowing/borrowing_interval_check.csv``.
Usage: ``python simulations/borrowing_interval_check.py`` (about 15 seconds).

References: McCloskey (2017), *Journal of Econometrics* 200(1); Pratt (1963), *Ann. Math.
Statist.* 34(2); Yu & Hoff (2018), *Biometrika* 105(2).
"""
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.polynomial.hermite_e import hermegauss
from scipy.ndimage import maximum_filter1d, minimum_filter1d
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

from causalkit.borrowing.adaptive import BIAS_PRIOR, bias_posterior_mean

OUT = Path(__file__).parent / "results" / "borrowing" / "borrowing_interval_check.csv"
OMEGAS = (0.5, 0.8, 1.2, 2.0)
BETAS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3)
THETAS = (0.0, 1.0, 2.0, 3.0, 5.0, 10.0)
_NODES, _WEIGHTS = hermegauss(80)
_WEIGHTS = _WEIGHTS / np.sqrt(2 * np.pi)
_STEP = 0.1               # grid of theta
_FLAT = 20.0              # beyond |theta| = 20 the adaptive rule is trial-only: the law is flat


def _error_draws(theta, kappa, bias_prior):
    """:math:`\\kappa u_j + \\theta - \\eta(\\theta + u_j)` at the quadrature nodes, shape
    ``theta.shape + (n_nodes,)``."""
    t = np.asarray(theta, dtype=float)[..., None]
    return kappa * _NODES + t - bias_posterior_mean(t + _NODES, bias_prior)


def _quantiles(p, g, omega):
    """:math:`p`-quantile of :math:`W + g(U)` for each row of ``g`` (vectorised bisection)."""
    lo = g.min(axis=-1) - 9 * omega
    hi = g.max(axis=-1) + 9 * omega
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        below = (_WEIGHTS * ndtr((mid[..., None] - g) / omega)).sum(axis=-1) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


class _Envelope:
    """Quantile envelopes of the error law over the confidence set, for one
    :math:`(\\omega, \\kappa)` and prior."""

    def __init__(self, omega, kappa, bias_prior, beta):
        self.omega, self.kappa, self.bias_prior = omega, kappa, bias_prior
        self.reach = float(ndtri(1 - beta / 2))
        half = int(np.ceil((_FLAT + self.reach) / _STEP))
        self.grid = _STEP * np.arange(-half, half + 1)
        self.g = _error_draws(self.grid, kappa, bias_prior)
        self.width = 2 * int(round(self.reach / _STEP)) + 1
        self._cache = {}

    def bounds(self, a):
        """``(lower(z), upper(z))`` callables: min of :math:`q_{a/2}` and max of
        :math:`q_{1-a/2}` over :math:`C(z)`."""
        if a not in self._cache:
            # the law at -theta mirrors the law at theta: q_p(-theta) = -q_{1-p}(theta)
            upper = _quantiles(1 - a / 2, self.g, self.omega)
            lower = -upper[::-1]
            self._cache[a] = (minimum_filter1d(lower, self.width, mode="nearest"),
                              maximum_filter1d(upper, self.width, mode="nearest"))
        low, up = self._cache[a]
        limit = _FLAT
        return (lambda z: np.interp(np.clip(z, -limit, limit), self.grid, low),
                lambda z: np.interp(np.clip(z, -limit, limit), self.grid, up))

    def coverage(self, a, thetas):
        """Coverage of the interval with quantile level ``a`` at each standardised bias."""
        low, up = self.bounds(a)
        thetas = np.asarray(thetas, dtype=float)
        z = thetas[:, None] + _NODES
        g = _error_draws(thetas, self.kappa, self.bias_prior)
        inside = (ndtr((up(z) - g) / self.omega) - ndtr((low(z) - g) / self.omega))
        return (_WEIGHTS * inside).sum(axis=-1)


def _size_corrected_level(env, alpha):
    """Quantile level :math:`a` whose smallest coverage over :math:`\\theta \\ge 0` (the
    coverage is symmetric in :math:`\\theta`) is :math:`1-\\alpha`."""
    thetas = np.arange(0.0, _FLAT + _STEP / 2, _STEP)

    def gap(a):
        return env.coverage(a, thetas).min() - (1 - alpha)

    lo, hi = alpha / 20, min(0.5, 4 * alpha)
    if gap(hi) >= 0:
        return hi
    if gap(lo) <= 0:
        return lo
    return brentq(gap, lo, hi, xtol=1e-4 * alpha)


def interval_properties(thetas, omega, beta, alpha=0.05, kappa=0.0):
    """Exact coverage and expected length (in units of :math:`s_D`) of the hybrid interval at
    standardised biases ``thetas`` (absolute values), for the default prior."""
    env = _Envelope(omega, kappa, BIAS_PRIOR, beta)
    a = _size_corrected_level(env, alpha)
    thetas = np.abs(np.asarray(thetas, dtype=float))
    low, up = env.bounds(a)
    length = (_WEIGHTS * (up(thetas[:, None] + _NODES) - low(thetas[:, None] + _NODES))).sum(-1)
    return env.coverage(a, thetas), length


def main():
    grid = np.arange(0.0, 20.05, 0.1)
    rows = []
    for omega in OMEGAS:
        trial = 2 * ndtri(0.975) * np.sqrt(1 + omega ** 2)
        for beta in BETAS:
            cover, _ = interval_properties(grid, omega, beta=beta)
            _, length = interval_properties(THETAS, omega, beta=beta)
            rows.append({"omega": omega, "beta": beta, "min_coverage": cover.min(),
                         "max_coverage": cover.max(),
                         **{f"length_theta{t:g}": v / trial
                            for t, v in zip(THETAS, length, strict=True)}})
    table = pd.DataFrame(rows)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False)
    print(table.round(4).to_string(index=False))
    lengths = table.filter(like="length_")
    print(f"shortest expected length / trial-only interval: {lengths.min().min():.4f}")


if __name__ == "__main__":
    main()
