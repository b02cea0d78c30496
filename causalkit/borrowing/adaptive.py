"""The package's recommended borrowing estimator: full borrowing, moved back toward the
trial-only estimate unless their difference is small (a limited-translation rule whose limit
decays as the evidence of bias grows).

Let :math:`\\hat\\tau_0` be the trial-only AIPW estimate and :math:`\\hat\\tau_E` the efficient
estimate borrowing every external control (:mod:`causalkit.borrowing.efficient`, variance ratio
1), :math:`\\hat D = \\hat\\tau_E - \\hat\\tau_0`, :math:`s_D` the standard error of
:math:`\\hat D` from the difference of the two influence functions on the common sample, and
:math:`z = \\hat D/s_D`. Then

.. math::

    \\hat\\tau = \\hat\\tau_E - s_D\\,\\eta(z)
               = \\hat\\tau_0 + \\mathrm{sign}(z)\\,s_D\\min\\{|z|,\\ t(|z|)\\},
    \\qquad \\eta(z) = \\mathrm{sign}(z)\\max\\{|z| - t(|z|),\\ 0\\},
    \\qquad t(a) = c\\,e^{-\\max(a - c,\\,0)/b}:

full borrowing when :math:`|z| \\le c`; beyond, the estimate stays within :math:`t(|z|)\\,s_D`
of trial-only, a limit that decays to 0 as :math:`|z|` grows. :math:`b=\\infty` is the soft
threshold (Efron & Morris 1972's limited translation). Equivalently
:math:`\\hat\\tau = (1-\\hat\\lambda)\\hat\\tau_0 + \\hat\\lambda\\hat\\tau_E` with
:math:`\\hat\\lambda = \\min\\{1, t(|z|)/|z|\\}`: every external control gets the weight
:math:`\\hat\\lambda` (``borrowed_``), the effective number borrowed is
:math:`\\hat\\lambda n_E` (``n_borrowed_``).

Why this rule and these constants. Write :math:`\\hat\\tau_E = \\hat\\tau_0 + \\hat D`, with
:math:`\\hat D \\approx N(\\delta, s_D^2)` (:math:`\\delta` the bias of full borrowing) and,
because full borrowing is efficient under exchangeability, its noise nearly uncorrelated with
:math:`\\hat D`. Then the MSE of any rule :math:`\\hat\\tau_E - s_D g(z)` is
:math:`V_E + s_D^2 R_g(\\delta/s_D)`, with :math:`R_g(\\theta)=E\\{g(Z)-\\theta\\}^2`,
:math:`Z\\sim N(\\theta,1)`: trial-only is :math:`g(z)=z` (:math:`R\\equiv1`), full borrowing
:math:`g\\equiv0` (:math:`R=\\theta^2`). No rule does well at :math:`\\theta=0` without
paying somewhere else (Bickel 1983); we take the smallest worst-case regret against the better of
the two, :math:`\\max_\\theta\\{R(\\theta)-\\min(1,\\theta^2)\\}`. Over :math:`c` on a 0.05 grid
and :math:`b\\in\\{1,2,3,4,6,8\\}`, among the rules that are back to trial-only's risk by
:math:`\\theta=20` (:math:`R\\le1.005`), the minimiser is :math:`(c, b) = (0.7, 4)`, regret
0.375: it keeps :math:`1-R(0)=62.5\\%` of full borrowing's gain on the :math:`\\hat D`
component under exchangeability and its risk peaks at :math:`1.36` near :math:`\\theta=2.7`.
The plain soft threshold (:math:`c=0.6`, regret 0.36) keeps a bias of :math:`c\\,s_D` however
large :math:`\\delta` is, which loses to trial-only whenever the external controls are plainly
incompatible (as PSID or CPS controls are for the NSW trial). The constants come from this
normal-means calculation alone: no simulation design was used to choose them
(``tests/test_borrowing_adaptive.py`` recomputes the choice).

What the rule deliberately does not do: it never selects individual external controls. Every
rule that keeps or drops a control by its own residual selects on the outcome, and is biased
under exchangeability as soon as the outcome distribution is skewed (AIB borrowed controls with
a response rate of 0.15 against 0.93 for the others on a binary outcome); this rule only looks at
:math:`\\hat D`, whose sampling distribution is close to symmetric, so it stays unbiased for any
outcome law. The price: when only a subset of the external controls is biased it cannot keep the
unbiased ones, and falls back toward trial-only (the borrowing study tables report the oracle
set of unbiased controls beside it).

Inference: :math:`\\hat\\lambda` depends on the data, so ``estimate()`` defaults to the pipeline
bootstrap (both fits and the rule refitted on every resample); ``inference="influence"`` gives
the interval of :math:`(1-\\hat\\lambda)\\psi_0 + \\hat\\lambda\\psi_E` with
:math:`\\hat\\lambda` held fixed (conditional on the amount borrowed).

References: Efron & Morris (1972), "Limiting the risk of Bayes and empirical Bayes estimators",
*JASA* 67(337); Bickel (1983), "Minimax estimation of the mean of a normal distribution subject
to doing well at a point", in *Recent Advances in Statistics*; Oberst, D'Amour, Chen, Wang,
Sontag & Yadlowsky (2022), "Understanding the risks and rewards of combining unbiased and
possibly biased estimators", arXiv:2205.10467; Li, Miao, Lu & Zhou (2023), *Biometrics* 79(1)
(the efficient estimator).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from causalkit.borrowing._base import BorrowingEstimator, fit_nuisance
from causalkit.borrowing.efficient import (
    BorrowedFit,
    EfficientBorrowing,
    difference_se,
    trial_only_influence,
)
from causalkit.inference import Estimate

__all__ = ["AdaptiveBorrowing", "DEFAULT_THRESHOLD", "DEFAULT_DECAY", "translation_limit"]

#: :math:`c`: full borrowing while :math:`|z| \\le c` (module docstring for the choice).
DEFAULT_THRESHOLD = 0.7
#: :math:`b`: scale of the decay of the translation limit beyond :math:`c`.
DEFAULT_DECAY = 4.0


def translation_limit(z, threshold=DEFAULT_THRESHOLD, decay=DEFAULT_DECAY):
    """:math:`\\min\\{|z|, t(|z|)\\}`, :math:`t(a) = c\\,e^{-\\max(a-c,0)/b}`: how far (in
    :math:`s_D`) the estimate moves from trial-only toward full borrowing."""
    a = np.abs(np.asarray(z, dtype=float))
    with np.errstate(invalid="ignore"):         # inf - inf when both c and |z| are infinite
        excess = np.where(a > threshold, (a - threshold) / decay, 0.0)
    return np.minimum(a, threshold * np.exp(-excess))


class AdaptiveBorrowing(BorrowingEstimator):
    """Recommended estimator: full borrowing while it agrees with trial-only to within
    ``threshold`` standard errors of their difference; beyond, trial-only moved toward full
    borrowing by a limit that decays as the disagreement grows (see
    ``causalkit.borrowing.adaptive`` for the formula and why).

    Parameters
    ----------
    outcome_model : None, {"auto", "linear", "logistic"} or scikit-learn estimator
        Outcome regression fitted on each trial arm (as in :class:`TrialOnly`).
    threshold : float >= 0
        :math:`c`: full borrowing when :math:`|z| \\le c`, and the estimate never moves more than
        :math:`c\\,s_D` from trial-only. 0 gives trial-only, ``inf`` full borrowing.
    decay : float > 0
        :math:`b`: the limit :math:`c\\,e^{-(|z|-c)/b}` beyond :math:`c`; ``inf`` gives the plain
        soft threshold. The defaults (0.7, 4) minimise the worst-case regret against the better
        of trial-only and full borrowing (module docstring).
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
    _default_inference = "bootstrap"

    def __init__(self, outcome_model=None, threshold=DEFAULT_THRESHOLD, decay=DEFAULT_DECAY,
                 variance_ratio=1.0, propensity="constant", random_state=None):
        self.outcome_model = outcome_model
        self.threshold = threshold
        self.decay = decay
        self.variance_ratio = variance_ratio
        self.propensity = propensity
        self.random_state = random_state

    def _check_params(self) -> None:
        for name, low, strict in (("threshold", 0, False), ("decay", 0, True)):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)) \
                    or np.isnan(v) or v < low or (strict and v == low):
                raise ValueError(f"{name} must be a number {'>' if strict else '>='} {low} "
                                 f"(inf allowed); got {v!r}")

    def _borrow(self, data):
        mu1, mu0, e, self.outcome_models_ = fit_nuisance(data, self.outcome_model,
                                                         self.propensity, self._seed("outcome"))
        engine = EfficientBorrowing(data, data.y[data.n_trial:], mu1, mu0, e, self.variance_ratio)
        base = engine.evaluate(np.arange(0))
        full = engine.evaluate(np.arange(data.n_external))
        diff = full.value - base.value
        s_d = difference_se(base, full)
        z = diff / s_d if s_d > 0 else (0.0 if diff == 0 else np.inf * np.sign(diff))
        step = float(translation_limit(z, self.threshold, self.decay))
        lam = 1.0 if step == abs(z) else step / abs(z)
        psi = (1.0 - lam) * trial_only_influence(base, full) + lam * full.influence
        n = psi.size
        fit = BorrowedFit(value=float(base.value + lam * diff),
                          std_error=float(np.sqrt(np.sum(psi * psi)) / n), influence=psi,
                          weights=lam * full.weights, variance_ratio=full.variance_ratio,
                          beta=full.beta, n_borrowed=full.n_borrowed)
        self.trial_only_, self.full_borrowing_ = base, full
        self.borrowing_fraction_, self.bias_statistic_ = lam, float(z)
        self.difference_se_ = s_d
        mask = np.full(data.n_external, lam)
        return fit, mask, {"borrowing_fraction": lam, "bias_statistic": float(z)}

    def plot(self, ax=None, **estimate_kwargs):
        """Trial-only, full borrowing and the adaptive estimate with their intervals, and the band
        :math:`\\hat\\tau_0 \\pm t(|z|)\\,s_D` the adaptive estimate is confined to (its edge
        toward full borrowing is the estimate). Keyword arguments go to :meth:`estimate` for the
        adaptive estimate. Returns the Figure."""
        from causalkit.plotting import plot_estimates

        check_is_fitted(self, "result_")
        if not hasattr(self, "full_borrowing_"):          # no external controls: trial only
            return super().plot(ax=ax, **estimate_kwargs)
        fits = {"Trial only": self.trial_only_, "Full borrowing": self.full_borrowing_}
        rows = {label: Estimate(f.value, f.std_error, method=label) for label, f in fits.items()}
        rows[self._label] = self.estimate(**estimate_kwargs)
        ax = plot_estimates(rows, ax=ax)
        limit = float(translation_limit(self.bias_statistic_, self.threshold, self.decay))
        half = limit * self.difference_se_
        if np.isfinite(half):
            ax.axvspan(self.trial_only_.value - half, self.trial_only_.value + half,
                       color="tab:blue", alpha=0.12,
                       label=f"trial only ± {limit:.2g} SE of the difference")
            ax.legend(loc="best", frameon=False)
        ax.set_title(f"{self._label}: {100 * self.borrowing_fraction_:.0f}% of full borrowing "
                     f"(effective {self.n_borrowed_:.0f} of {self.n_external_} controls)")
        return ax.figure
