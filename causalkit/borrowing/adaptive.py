"""The package's recommended borrowing estimator: full borrowing, moved toward the trial-only
estimate by the posterior mean of its bias under a prior that puts weight on exchangeability, on a
few bias sizes, and on any bias at all.

Let :math:`\\hat\\tau_0` be the trial-only AIPW estimate and :math:`\\hat\\tau_E` the efficient
estimate borrowing every external control (:mod:`causalkit.borrowing.efficient`, variance ratio
1), :math:`\\hat D = \\hat\\tau_E - \\hat\\tau_0`, :math:`s_D` the standard error of
:math:`\\hat D` from the difference of the two influence functions on the common sample, and
:math:`z = \\hat D/s_D`. Then

.. math::

    \\hat\\tau = \\hat\\tau_E - s_D\\,\\eta(z), \\qquad
    \\eta(z) = \\frac{z + \\sum_{k\\ge1} m_k\\theta_k
                     \\{\\phi(z-\\theta_k) - \\phi(z+\\theta_k)\\}}
                    {1 + m_0\\phi(z) + \\sum_{k\\ge1} m_k
                     \\{\\phi(z-\\theta_k) + \\phi(z+\\theta_k)\\}},

the posterior mean of the standardised bias :math:`\\theta = \\delta/s_D` of full borrowing given
:math:`z \\sim N(\\theta, 1)`, under the (improper) prior made of a flat density (any bias) plus
point masses :math:`m_0` at 0 (exchangeable external controls) and :math:`m_k` at
:math:`\\pm\\theta_k` (``bias_prior``). Near :math:`z = 0` the mass at 0 dominates and
:math:`\\eta \\approx 0`: full borrowing. For large :math:`|z|` the flat part dominates and
:math:`\\eta(z) \\to z`: back to trial-only, however large the bias. Equivalently
:math:`\\hat\\tau = (1-\\hat\\lambda)\\hat\\tau_0 + \\hat\\lambda\\hat\\tau_E` with
:math:`\\hat\\lambda = \\min\\{1, \\max(0, 1 - \\eta(z)/z)\\}`: every external control gets the
weight :math:`\\hat\\lambda` (``borrowed_``), the effective number borrowed is
:math:`\\hat\\lambda n_E` (``n_borrowed_``).

Why this rule and this prior. Write :math:`\\hat\\tau_E = \\hat\\tau_0 + \\hat D`, with
:math:`\\hat D \\approx N(\\delta, s_D^2)` and, because full borrowing is efficient under
exchangeability, its noise nearly uncorrelated with :math:`\\hat D`. Then the MSE of any rule
:math:`\\hat\\tau_E - s_D g(z)` is :math:`V_E + s_D^2 R_g(\\delta/s_D)`, with
:math:`R_g(\\theta)=E\\{g(Z)-\\theta\\}^2`, :math:`Z\\sim N(\\theta,1)`: trial-only is
:math:`g(z)=z` (:math:`R\\equiv1`), full borrowing :math:`g\\equiv0` (:math:`R=\\theta^2`). No rule
does well at :math:`\\theta=0` without paying somewhere else: a smaller risk at 0 forces a
larger maximum risk, and the rules on that frontier are Bayes rules against priors with atoms
(Bickel 1983). Hence the search over priors: the flat part (which returns the rule to
trial-only) plus masses on :math:`\\{0, 0.5, 1, \\dots, 8\\}`. For a bound :math:`M` on the
risk, the masses minimise :math:`R(0)` subject to :math:`R(\\theta) \\le M` for every
:math:`\\theta` and :math:`R(20) \\le 1.005` (plainly incompatible external controls must cost
nothing), by Gauss-Hermite quadrature. :math:`M` is then chosen where :math:`s_D` is estimated
and the normal approximation is not exact: on a tuning design that no study or test uses, and
over exchangeable and biased cells, the prior with the smallest worst-case regret against the
better of trial-only and full borrowing (measured MSEs, regret
:math:`R - \\min(1, R_{\\text{full}})`) is the default (``simulations/borrowing_bias_prior.py``,
results in ``simulations/results/borrowing/borrowing_bias_prior.csv``). That is
:math:`M = 1.27`: masses at 0, 2, 2.5, 4.5, 6, 6.5 and 8 (``BIAS_PRIOR``); its risk is 0.363 at
:math:`\\theta = 0` (it keeps 64% of full borrowing's gain on the :math:`\\hat D` component
under exchangeability) and at most 1.27 anywhere, and its measured worst regret on the tuning
design was 0.327. The limited-translation rule it replaces (full borrowing while
:math:`|z| \\le 0.7`, then a translation limit :math:`0.7\\,e^{-(|z|-0.7)/4}`, Efron & Morris
1972) has risk 0.375 at 0 and up to 1.36, and measured worst regret 0.381. A looser bound
does better in the normal-means problem alone (:math:`M = 1.33`: risk 0.321 at 0) but lost in
finite samples when the bias was large (measured worst regret 0.401). The estimate never
moves more than :math:`0.73\\,s_D` from trial-only and is back to it for :math:`|z| \\ge 12`.

What the rule deliberately does not do: it never selects individual external controls. Every
rule that keeps or drops a control by its own residual selects on the outcome, and is biased
under exchangeability as soon as the outcome distribution is skewed (AIB borrowed controls with
a response rate of 0.15 against 0.93 for the others on a binary outcome); this rule only looks at
:math:`\\hat D`, whose sampling distribution is close to symmetric, so it stays close to
unbiased for any outcome law. Close, not exact: under skewed errors :math:`\\hat D` is
slightly skewed and :math:`\\eta` is not linear, and :math:`s_D` moves with :math:`\\hat D`
(skewed residuals raise their mean and spread together), two effects of opposite sign. In many
exchangeable draws with exponential and log-normal errors the paired difference from trial-only
(which is unbiased) was clearly different from 0, but a small fraction of the estimator's SD;
with :math:`s_D` held fixed the sign flipped, so a scale estimate that ignores :math:`\\hat D`
would not remove it (``simulations/borrowing_skewed_bias_check.py``). The price: when only a
subset of the external controls is biased it cannot keep the unbiased ones, and falls back
toward trial-only (the borrowing study tables report the oracle set of unbiased controls beside
it).

Inference: the default interval (``inference="fab"``) keeps its level whatever the bias. Let
:math:`\\hat v = \\hat\\tau_0 + k\\hat D` be the combination of trial-only and full borrowing
that is uncorrelated with trial-only (``indirect_estimate``; when full borrowing is
efficient :math:`k = s_0^2/s_D^2`). It estimates the ATE from what the external controls add,
is unbiased when they are exchangeable, and, being independent of :math:`\\hat\\tau_0` in the
normal approximation, may decide how each trial-only test of :math:`\\tau = \\tau'` splits its
level between its two tails without changing that level. The FAB interval of
:mod:`causalkit.fab` (Yu & Hoff 2018) inverts those tests, spending more of the level on the
side of :math:`\\tau'` away from :math:`\\hat v`: its coverage is :math:`1-\\alpha` for every
bias, it is shorter than trial-only's when :math:`\\hat v` is right, and a floor on the split
keeps it at most 1.090 times as long when :math:`\\hat v` is far off (the module says how both
settings were chosen). In ``causalkit simulate borrowing-interval-adaptive`` (every cell of
the design grid, 500 replications each, MC SE about 0.01) it covered 0.930-0.956 in all 23
cells, with a mean length of 0.89-0.94 of trial-only's in the exchangeable cells and at most
1.09 of it in the biased ones; the interval with :math:`\\hat\\lambda` held fixed
(``inference="influence"``, conditional on the amount borrowed) covered 0.83-0.94. The
estimate itself is the shrinkage rule above; the reported standard error is the interval's
normal equivalent (its 95% length over :math:`2 z_{0.975}`) and the p-value that of the same
tests. The pipeline bootstrap (``inference="bootstrap"``: both fits and the rule refitted on
every resample) is kept for comparison: in the study ``borrowing-bootstrap-adaptive`` its
percentile interval covered less than its level in several cells, exchangeable and biased.
What the external controls cannot buy: an interval centred on this estimate that is valid for
every bias and shorter than trial-only's (the size-corrected hybrid of McCloskey 2017 never
was, ``simulations/borrowing_interval_check.py``), or power for a one-sided test of a fixed
null (Kopp-Schneider et al. 2020). What they can: for a two-sided interval, an independent
estimate may choose the side on which each test spends its level (Pratt 1963), which is all
the FAB interval does.

References: Efron & Morris (1972), "Limiting the risk of Bayes and empirical Bayes estimators",
*JASA* 67(337); Bickel (1983), "Minimax estimation of the mean of a normal distribution subject
to doing well at a point", in *Recent Advances in Statistics*; Oberst, D'Amour, Chen, Wang,
Sontag & Yadlowsky (2022), "Understanding the risks and rewards of combining unbiased and
possibly biased estimators", arXiv:2205.10467; Schmidli et al. (2014), *Biometrics* 70(4) (a
vague component that lets the data overrule an informative prior); Li, Miao, Lu & Zhou (2023),
*Biometrics* 79(1) (the efficient estimator); Pratt (1961), "Length of confidence intervals",
*JASA* 56(295); Pratt (1963), "Shorter confidence intervals for the mean of a normal
distribution with known variance", *Ann. Math. Statist.* 34(2); Yu & Hoff (2018), "Adaptive
multigroup confidence intervals with constant coverage", *Biometrika* 105(2); McCloskey (2017),
"Bonferroni-based size-correction for nonstandard testing problems", *Journal of
Econometrics* 200(1); Kopp-Schneider, Calderazzo & Wiesenfarth (2020),
"Power gains by using external information in clinical trials are typically not possible when
requiring strict type I error control", *Biometrical Journal* 62(2).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm
from sklearn.utils.validation import check_is_fitted

from causalkit.borrowing._base import BorrowingEstimator, fit_nuisance
from causalkit.borrowing.efficient import (
    BorrowedFit,
    EfficientBorrowing,
    difference_se,
    trial_only_influence,
)
from causalkit.fab import FABInterval
from causalkit.inference import Estimate

__all__ = ["AdaptiveBorrowing", "BIAS_PRIOR", "bias_posterior_mean", "indirect_estimate"]

#: Default ``bias_prior``: atoms :math:`\\theta_k` and their masses :math:`m_k` (relative to the
#: flat density 1) of the prior on the standardised bias (module docstring for the choice;
#: ``simulations/borrowing_bias_prior.py`` computes them).
BIAS_PRIOR = ((0.0, 2.0, 2.5, 4.5, 6.0, 6.5, 8.0), (171.0, 6.81, 35.5, 11.2, 2.24, 1.61, 1.18))


def bias_posterior_mean(z, bias_prior=BIAS_PRIOR):
    """:math:`\\eta(z)`: posterior mean of :math:`\\theta` given :math:`z \\sim N(\\theta, 1)`
    under the flat density plus point masses at :math:`\\pm` each atom (once at an atom 0); the
    formula is in ``causalkit.borrowing.adaptive``.

    Parameters
    ----------
    z : float or array_like
        Standardised differences :math:`\\hat D/s_D`.
    bias_prior : pair of sequences (atoms, masses)
        Atoms :math:`\\theta_k \\ge 0` and masses :math:`m_k \\ge 0`, relative to the flat
        density 1.

    Returns
    -------
    ndarray
        :math:`\\eta(z)`, of the shape of ``z``; :math:`\\eta(z) = z` when every mass is 0.
    """
    atoms, masses = (np.asarray(v, dtype=float) for v in bias_prior)
    z = np.asarray(z, dtype=float)
    zz = z[..., None]
    plus, minus = norm.pdf(zz - atoms), norm.pdf(zz + atoms)
    minus = np.where(atoms == 0, 0.0, minus)      # the atom at 0 is counted once
    num = z + (masses * atoms * (plus - minus)).sum(axis=-1)
    den = 1.0 + (masses * (plus + minus)).sum(axis=-1)
    return num / den


def indirect_estimate(trial_value: float, difference: float, psi_trial: np.ndarray,
                      psi_full: np.ndarray) -> tuple[float, float]:
    """The estimate of the ATE from the external controls that is uncorrelated with trial-only,
    :math:`\\hat v = \\hat\\tau_0 + k\\hat D`, and its standard error.

    With influence values :math:`\\psi_0` (trial-only) and :math:`\\psi_E` (full borrowing) on
    the common sample of :math:`N` rows, :math:`s_0^2 = \\sum\\psi_0^2/N^2`,
    :math:`c = \\sum\\psi_0(\\psi_E-\\psi_0)/N^2` (the covariance of :math:`\\hat\\tau_0` and
    :math:`\\hat D`) and :math:`s_D^2 = \\sum(\\psi_E-\\psi_0)^2/N^2`, the choice
    :math:`k = -s_0^2/c` makes :math:`\\operatorname{Cov}(\\hat\\tau_0, \\hat v) = 0`, and
    :math:`\\operatorname{Var}(\\hat v) = k^2 s_D^2 - s_0^2` (positive by Cauchy-Schwarz). When
    full borrowing is efficient, :math:`c = -s_D^2` and :math:`\\hat v = \\hat\\tau_E +
    (s_E^2/s_D^2)\\hat D`. It is unbiased when the external controls are exchangeable and
    carries :math:`k` times full borrowing's bias otherwise. Where :math:`c \\ge 0` (the
    external controls carry no information the trial lacks) it is ``(nan, inf)``: no
    indirect information."""
    n = psi_trial.size
    d = psi_full - psi_trial
    s0 = np.sum(psi_trial * psi_trial) / n ** 2
    cov = np.sum(psi_trial * d) / n ** 2
    var_d = np.sum(d * d) / n ** 2
    if not cov < 0:
        return float("nan"), float("inf")
    k = -s0 / cov
    var = k * k * var_d - s0
    if not var > 0:
        return float("nan"), float("inf")
    return float(trial_value + k * difference), float(np.sqrt(var))


def _check_bias_prior(bias_prior):
    try:
        atoms, masses = (np.asarray(v, dtype=float) for v in bias_prior)
    except (TypeError, ValueError):
        raise ValueError("bias_prior must be a pair (atoms, masses) of equal-length sequences "
                         f"of numbers; got {bias_prior!r}") from None
    if atoms.ndim != 1 or atoms.shape != masses.shape:
        raise ValueError("bias_prior must be a pair (atoms, masses) of equal-length sequences "
                         f"of numbers; got shapes {atoms.shape} and {masses.shape}")
    if not (np.all(np.isfinite(atoms)) and np.all(atoms >= 0) and np.unique(atoms).size
            == atoms.size):
        raise ValueError(f"bias_prior atoms must be distinct finite numbers >= 0; got {atoms}")
    if not (np.all(np.isfinite(masses)) and np.all(masses >= 0)):
        raise ValueError(f"bias_prior masses must be finite numbers >= 0; got {masses}")


class AdaptiveBorrowing(BorrowingEstimator):
    """Recommended estimator: full borrowing moved toward trial-only by the posterior mean of its
    standardised bias, under a prior on exchangeability, a few bias sizes and any bias (see
    ``causalkit.borrowing.adaptive`` for the formula and why).

    Parameters
    ----------
    outcome_model : None, {"auto", "linear", "logistic"} or scikit-learn estimator
        Outcome regression fitted on each trial arm (as in :class:`TrialOnly`).
    bias_prior : pair of sequences (atoms, masses)
        Point masses :math:`m_k \\ge 0` at :math:`\\pm\\theta_k` (``atoms``, distinct, >= 0; an
        atom 0 once) added to the flat density 1 in the prior on the standardised bias of full
        borrowing. Default ``BIAS_PRIOR`` (the module docstring says how it was chosen).
        All masses 0 gives trial-only; a larger mass at 0 borrows more.
    variance_ratio : float
        :math:`r` in the efficient weights of full borrowing (default 1, as every borrowing
        estimator here: distributional exchangeability).
    propensity : {"constant", "logistic"}
        Trial treatment propensity.
    random_state : None, int or SeedSequence
        Seed of the nested models and of the bootstrap.

    Attributes
    ----------
    borrowed_ : ndarray of float, shape (n_external,)
        :math:`\\hat\\lambda` for every external control (the weight of full borrowing).
    n_borrowed_ : float
        Effective number borrowed, :math:`\\hat\\lambda n_E`.
    borrowing_fraction_ : float
        :math:`\\hat\\lambda`.
    bias_statistic_ : float
        :math:`\\hat D/s_D`, the standardised difference of full borrowing and trial-only.
    difference_se_ : float
        :math:`s_D`, the standard error of :math:`\\hat D`.
    trial_only_, full_borrowing_ : BorrowedFit
        The two fits that are combined.
    indirect_estimate_, indirect_se_ : float
        :math:`\\hat v` and its standard error (``indirect_estimate``; ``nan`` and ``inf``
        when the external controls add no information), behind the default FAB interval.
    outcome_models_ : dict
        The outcome regressions fitted on the trial arms.

    Examples
    --------
    >>> import numpy as np
    >>> from causalkit.borrowing import AdaptiveBorrowing
    >>> from causalkit.borrowing.designs import paper_a_design
    >>> d = paper_a_design(np.random.default_rng(1))
    >>> est = AdaptiveBorrowing(random_state=0).fit(d["X"], d["y"], d["a"], trial=d["s"])
    >>> 0 <= est.borrowing_fraction_ <= 1
    True
    """

    _label = "Adaptive borrowing"
    _default_inference = "fab"
    _inferences = ("fab", "influence", "bootstrap")

    def __init__(self, outcome_model=None, bias_prior=BIAS_PRIOR, variance_ratio=1.0,
                 propensity="constant", random_state=None):
        self.outcome_model = outcome_model
        self.bias_prior = bias_prior
        self.variance_ratio = variance_ratio
        self.propensity = propensity
        self.random_state = random_state

    def _check_params(self) -> None:
        _check_bias_prior(self.bias_prior)

    def _borrow(self, data):
        mu1, mu0, e, self.outcome_models_ = fit_nuisance(data, self.outcome_model,
                                                         self.propensity, self._seed("outcome"))
        engine = EfficientBorrowing(data, data.y[data.n_trial:], mu1, mu0, e, self.variance_ratio)
        base = engine.evaluate(np.arange(0))
        full = engine.evaluate(np.arange(data.n_external))
        diff = full.value - base.value
        s_d = difference_se(base, full)
        z = diff / s_d if s_d > 0 else (0.0 if diff == 0 else np.inf * np.sign(diff))
        if z == 0:
            lam = 1.0
        elif np.isfinite(z):
            lam = float(np.clip(1.0 - bias_posterior_mean(z, self.bias_prior) / z, 0.0, 1.0))
        else:
            lam = 0.0
        psi0 = trial_only_influence(base, full)
        psi = (1.0 - lam) * psi0 + lam * full.influence
        n = psi.size
        self.indirect_estimate_, self.indirect_se_ = indirect_estimate(base.value, diff, psi0,
                                                                       full.influence)
        fit = BorrowedFit(value=float(base.value + lam * diff),
                          std_error=float(np.sqrt(np.sum(psi * psi)) / n), influence=psi,
                          weights=lam * full.weights, variance_ratio=full.variance_ratio,
                          beta=full.beta, n_borrowed=full.n_borrowed)
        self.trial_only_, self.full_borrowing_ = base, full
        self.borrowing_fraction_, self.bias_statistic_ = lam, float(z)
        self.difference_se_ = s_d
        mask = np.full(data.n_external, lam)
        return fit, mask, {"borrowing_fraction": lam, "bias_statistic": float(z)}

    def _analytic_estimate(self, inference: str, target=None) -> Estimate:
        out = self._influence_estimate(target)
        if inference == "fab" and hasattr(self, "trial_only_"):
            base = self.trial_only_
            out.ci_method = "fab"
            out.interval = FABInterval(base.value, base.std_error, self.indirect_estimate_,
                                       self.indirect_se_ ** 2)
            lo, hi = out.interval.conf_int(0.05)
            out.std_error = (hi - lo) / (2.0 * norm.ppf(0.975))
        return out

    def plot(self, ax=None, **estimate_kwargs):
        """Trial-only, full borrowing and the adaptive estimate with their intervals; the title
        gives the share of full borrowing's weight the rule kept. Keyword arguments go to
        :meth:`estimate` for the adaptive estimate. Returns the Figure."""
        from causalkit.plotting import plot_estimates

        check_is_fitted(self, "result_")
        if not hasattr(self, "full_borrowing_"):          # no external controls: trial only
            return super().plot(ax=ax, **estimate_kwargs)
        fits = {"Trial only": self.trial_only_, "Full borrowing": self.full_borrowing_}
        rows = {label: Estimate(f.value, f.std_error, method=label) for label, f in fits.items()}
        rows[self._label] = self.estimate(**estimate_kwargs)
        ax = plot_estimates(rows, ax=ax)
        ax.set_title(f"{self._label}: {100 * self.borrowing_fraction_:.0f}% of full borrowing "
                     f"(effective {self.n_borrowed_:.0f} of {self.n_external_} controls; "
                     f"z = {self.bias_statistic_:.2f})")
        return ax.figure
