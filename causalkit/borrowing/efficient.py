"""The efficient AIPW-type estimator of the trial ATE for a given set of borrowed controls.

With trial indicator :math:`R`, treatment :math:`A`, known (or trial-estimated) propensity
:math:`e(X)`, outcome regressions :math:`\\mu_a` fitted on the trial arms, the analysis sample
:math:`D_S` = trial :math:`\\cup` borrowed set :math:`S` of size :math:`N_S`,
:math:`\\hat p = n_R/N_S`, the trial-participation score :math:`\\pi_S(X)=P(R=1\\mid X, D_S)`
(logistic regression on :math:`D_S`) and the variance ratio :math:`r=\\sigma^2_0/\\sigma^2_E`:

.. math::

    \\hat\\varphi_i = \\frac{R_i}{\\hat p}\\{\\hat\\mu_1-\\hat\\mu_0\\}(X_i)
        + \\frac{R_iA_i}{\\hat p\\,e}\\{Y_i-\\hat\\mu_1(X_i)\\}
        - \\hat w_i\\{Y_i-\\hat\\mu_0(X_i)\\},
    \\qquad
    \\hat w_i = \\frac{1}{\\hat p}\\,
        \\frac{\\pi_S(X_i)\\{R_i(1-A_i) + (1-R_i)\\,r\\}}
             {\\pi_S(X_i)(1-e) + \\{1-\\pi_S(X_i)\\}\\,r},

:math:`\\hat\\tau_S = N_S^{-1}\\sum_{D_S}\\hat\\varphi_i`, influence values
:math:`\\psi_i = \\hat\\varphi_i - R_i\\hat\\tau_S/\\hat p` and
:math:`\\widehat{se} = \\sqrt{\\sum_i\\psi_i^2}/N_S`. The weight is the usual
:math:`q/(q(1-e)+r)` form with :math:`q=\\pi/(1-\\pi)` multiplied through by :math:`1-\\pi`, so it
stays bounded with no clipping; for :math:`S=\\emptyset` (:math:`\\pi\\equiv1`) it reduces exactly
to the trial-only AIPW estimator. :math:`\\mu_0` is fitted on the trial controls only (robust to
biased borrowed controls; it keeps the empty-set identity exact). The standard error treats
:math:`S` as fixed.

References: Li, Miao, Lu & Zhou (2023), "Improving efficiency of inference in clinical trials
with external control data", *Biometrics* 79(1); Yang, Li & Wu (2025), arXiv:2508.03282.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from causalkit.borrowing.models import fit_logistic, logistic_path

__all__ = ["EfficientBorrowing", "BorrowedFit", "trial_only_influence", "difference_se"]

#: Bounds of an estimated variance ratio (a tiny borrowed set makes it unstable).
RATIO_BOUNDS = (0.1, 10.0)
#: Ridge on the (standardised) slopes of the trial-participation model: keeps the fit finite
#: when the trial and the borrowed controls are separable (the weights then go to 0 smoothly).
SAMPLING_RIDGE = 1e-4


@dataclass
class BorrowedFit:
    """Result of the efficient estimator for one borrowed set."""

    value: float
    std_error: float
    influence: np.ndarray      # psi over D_S: trial rows first, then the borrowed controls
    weights: np.ndarray        # w over D_S
    variance_ratio: float
    beta: np.ndarray | None    # trial-participation coefficients (None for the empty set)
    n_borrowed: int

    @property
    def ess_external(self) -> float:
        """Effective sample size :math:`(\\sum w)^2/\\sum w^2` of the borrowed controls."""
        w = self.weights[self.weights.size - self.n_borrowed:]
        return float(w.sum() ** 2 / np.sum(w * w)) if w.size and np.any(w > 0) else 0.0


def trial_only_influence(base: BorrowedFit, fit: BorrowedFit) -> np.ndarray:
    """The trial-only influence values on the sample :math:`D_S` of ``fit``.

    ``base`` is the empty-set fit (its influence lives on the :math:`n_R` trial rows, scaled by
    :math:`1/n_R`); on :math:`D_S` (:math:`N_S` rows, scaled by :math:`1/N_S`) the same
    influence is :math:`(N_S/n_R)\\psi_0` on the trial rows and 0 on the borrowed controls, so
    that both estimators' influence values can be combined row by row.
    """
    N, n_trial = fit.influence.size, base.influence.size
    psi0 = np.zeros(N)
    psi0[:n_trial] = (N / n_trial) * base.influence
    return psi0


def difference_se(base: BorrowedFit, fit: BorrowedFit) -> float:
    """Standard error of :math:`\\hat\\tau_S - \\hat\\tau_\\emptyset` (borrowing minus trial
    only) from the difference of their influence values on the common sample,
    :math:`\\{\\sum_i(\\psi_{S,i} - \\psi_{\\emptyset,i})^2\\}^{1/2}/N_S`."""
    d = fit.influence - trial_only_influence(base, fit)
    return float(np.sqrt(np.sum(d * d)) / d.size)


class EfficientBorrowing:
    """Pre-computed pieces of the efficient estimator; :meth:`evaluate` prices one borrowed set.

    Parameters
    ----------
    data : HybridData
    y_external : ndarray of shape (nE,)
        External outcomes to use (calibrated ones for ACIB).
    mu1, mu0 : ndarray of shape (n,)
        Outcome-regression predictions for every row of ``data`` (trial rows first).
    e : ndarray of shape (n,)
        Treatment propensity for every row (the trial model evaluated at external rows).
    variance_ratio : "estimate" or float
        ``"estimate"``: :math:`\\hat r = \\widehat{var}(Y-\\hat\\mu_0\\mid\\text{trial controls}) /
        \\widehat{var}(Y-\\hat\\mu_0\\mid S)`, clipped to :data:`RATIO_BOUNDS` (1 for fewer
        than 2 borrowed controls or binary outcomes: under distributional exchangeability
        :math:`r\\equiv1`, Li et al. 2023); a number fixes :math:`r`.
    """

    def __init__(self, data, y_external, mu1, mu0, e, variance_ratio="estimate"):
        nT = data.n_trial
        self.n_trial = nT
        self.binary = data.binary
        self.variance_ratio = variance_ratio
        y = np.concatenate([data.y[:nT], y_external])
        self.Z = np.hstack([np.ones((data.X.shape[0], 1)), data.X])
        self.resid0 = y - mu0
        a_t = data.a[:nT]
        e_t = e[:nT]
        self.e = e
        # trial part of phi that does not depend on S, divided by 1/p
        self.trial_core = (mu1[:nT] - mu0[:nT]) + a_t * (y[:nT] - mu1[:nT]) / e_t
        self.trial_control = (1 - a_t).astype(float)
        self.var_trial_controls = float(np.var(self.resid0[:nT][a_t == 0], ddof=1)) \
            if np.sum(a_t == 0) > 1 else 1.0
        self.n_external = data.n_external
        self.warm_start = data.warm_start

    def _ratio(self, resid_external: np.ndarray) -> float:
        """Variance ratio given the borrowed controls' residuals :math:`Y-\\hat\\mu_0`."""
        if not isinstance(self.variance_ratio, str):
            return float(self.variance_ratio)
        if self.binary or resid_external.size < 2:
            return 1.0
        var_e = float(np.var(resid_external, ddof=1))
        if var_e <= 0:
            return RATIO_BOUNDS[1]
        return float(np.clip(self.var_trial_controls / var_e, *RATIO_BOUNDS))

    def evaluate(self, ext_idx) -> BorrowedFit:
        """Efficient estimate borrowing the external controls ``ext_idx`` (0-based, into the
        external rows). The trial-participation fit of the full set starts from, and leaves,
        ``data.warm_start["sampling-all"]`` (see :class:`~causalkit.borrowing._data.HybridData`)."""
        ext_idx = np.asarray(ext_idx, dtype=int)
        nT, nS = self.n_trial, ext_idx.size
        every = nS == self.n_external and np.array_equal(ext_idx, np.arange(nS))
        # every external control: the rows as stored, without an (n, p) copy of the design
        rows = slice(None) if every else np.concatenate([np.arange(nT), nT + ext_idx])
        if nS == 0:
            pi, beta = np.ones(nT), None
        else:
            Z = self.Z[rows]
            R = np.concatenate([np.ones(nT), np.zeros(nS)])
            start = self.warm_start.get("sampling-all") if nS == self.n_external else None
            if start is not None and start.shape != (Z.shape[1],):
                start = None
            beta, _ = fit_logistic(Z, R, ridge=SAMPLING_RIDGE, tol=1e-18, beta0=start)
            if nS == self.n_external:
                self.warm_start["sampling-all"] = beta
            pi = expit(Z @ beta)
        return self._assemble(pi, beta, self.e[rows], self.resid0[rows])

    def nested(self, order, sizes):
        """Efficient estimates of the nested sets ``order[:k]`` for ``k`` in ``sizes``.

        The same estimates as :meth:`evaluate` on each set, computed along the path: the rows
        are sorted once so that every set is a prefix, and the trial-participation fits share
        their work (:func:`~causalkit.borrowing.models.logistic_path`: warm starts, carried
        gradient/Hessian sums, quasi-Newton steps), each converged to about ``1e-9`` in the
        coefficients.

        Parameters
        ----------
        order : ndarray of int
            External controls (0-based), most comparable first.
        sizes : sequence of int
            Set sizes, strictly increasing, in ``0..len(order)``.

        Yields
        ------
        BorrowedFit
            One per size, in the order of ``sizes``.
        """
        sizes = np.asarray(sizes, dtype=int)
        order = np.asarray(order, dtype=int)
        if sizes.size and (sizes[0] < 0 or sizes[-1] > order.size or np.any(np.diff(sizes) <= 0)):
            raise ValueError(f"sizes must be strictly increasing set sizes in 0..{order.size}")
        nT = self.n_trial
        rows = np.concatenate([np.arange(nT), nT + order[:sizes[-1] if sizes.size else 0]])
        e, resid = self.e[rows], self.resid0[rows]
        R = np.concatenate([np.ones(nT), np.zeros(rows.size - nT)])
        fits = logistic_path(self.Z[rows], R, nT + sizes[sizes > 0], ridge=SAMPLING_RIDGE)
        for k in sizes:
            if k == 0:
                yield self._assemble(np.ones(nT), None, e[:nT], resid[:nT])
            else:
                beta, eta = next(fits)
                yield self._assemble(expit(eta), beta, e[:nT + k], resid[:nT + k])

    def _assemble(self, pi, beta, e, resid0) -> BorrowedFit:
        """Weights, estimate, influence values and SE on :math:`D_S` (trial rows first) from the
        trial-participation score ``pi`` and the rows' propensities and residuals."""
        nT = self.n_trial
        N = pi.size
        nS = N - nT
        p_hat = nT / N
        r = self._ratio(resid0[nT:])
        num = np.concatenate([self.trial_control, np.full(nS, r)])
        w = pi * num / (pi * (1.0 - e) + (1.0 - pi) * r) / p_hat
        phi = -w * resid0
        phi[:nT] += self.trial_core / p_hat
        tau = float(phi.mean())
        psi = phi                                # psi = phi - R tau / p_hat, in place
        psi[:nT] -= tau / p_hat
        se = float(np.sqrt(np.sum(psi * psi)) / N)
        return BorrowedFit(value=tau, std_error=se, influence=psi, weights=w, variance_ratio=r,
                           beta=beta, n_borrowed=nS)
