"""Longitudinal targeted maximum likelihood (sequential regression with targeting)."""

from __future__ import annotations

import numpy as np

from causalkit.longterm._base import MonotoneEstimator
from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import OutcomeChain
from causalkit.longterm._sandwich import least_squares_kind
from causalkit.longterm._scores import (
    aipw_components,
    check_variance,
    check_weight_cap,
    combine_aipw,
    count_capped,
    inverse_weights,
    least_squares_chain_variance,
    substitution_variance,
    warn_capped,
)

__all__ = ["SequentialTMLE"]


class _Shifted:
    """A fitted stage model plus a per-arm constant (the fluctuation ``epsilon_t``)."""

    def __init__(self, stage, shift):
        self.stage = stage
        self.shift = shift

    def predict(self, H, arm):
        return self.stage.predict(H, arm) + self.shift[np.asarray(arm, dtype=int)]


class SequentialTMLE(MonotoneEstimator):
    """Longitudinal TMLE of the long-term ATE (targeted iterated conditional expectations).

    The form of ``ltmle`` (van der Laan & Gruber 2012, *Int. J. Biostat.* 8(1); Schwab,
    Lendle, Petersen & van der Laan, R package ``ltmle``): an intercept-only fluctuation of
    each stage regression fitted with the cumulative inverse probabilities as weights, as
    ``ltmle`` and ``lmtp::lmtp_tmle`` do, here on the identity scale (they fit it on the logit
    scale of a bounded outcome). For each arm ``a`` and ``t = T, ..., 1``:

    1. regress the target ``Y~_t`` (``Y`` at ``T``, else the targeted ``m*_{t+1}(H_{t+1})``) on
       ``H_t`` among the arm's responders of stage ``t``: ``m_t``;
    2. target it: ``m*_t = m_t + epsilon_t`` with

       .. math:: \\epsilon_t = \\frac{\\sum_i W_{ti} (\\tilde Y_{ti} - m_t(H_{ti}))}
                                     {\\sum_i W_{ti}}, \\qquad
                 W_{ti} = \\frac{I(A_i = a) R_{ti}}{e_a(X_i)\\, r_t(H_{ti})},

       which solves the stage-``t`` term of the efficient influence function
       (:mod:`causalkit.longterm._scores`) exactly.

    Then :math:`\\hat\\mu_a = n^{-1}\\sum_i m^*_1(X_i, a)`; the plug-in equals the mean of the
    efficient influence function at the targeted chain, and the standard error is that
    function's (Bang & Robins 2005; Tsiatis 2006, ch. 10). It is consistent when, at every
    stage, the outcome chain from there on or the propensity and continuation models up to
    there are correct (sequential double robustness; Luedtke, Sofrygin, van der Laan & Carone
    2017, arXiv:1705.02459). Being a plug-in, it stays within the range of the targets; the
    linear (not logistic) fluctuation is the usual one for an unbounded continuous outcome.

    The standard error is that of the efficient influence function, its variance estimated by
    substitution (``variance``; see :class:`MonotoneAIPW`): the empirical variance of the
    influence function gave intervals too short at heavy drop-out, where a few large weights
    dominate (linear design, n = 1000, 150 replications each, no cap: coverage 0.953, SE/SD
    0.99, at 20% drop-out per stage, seeds 840000-840149; 0.90, SE/SD 0.83, at 40%, seeds
    830000-830149). The substitution SE follows the asymptotic variance, which at heavy
    drop-out a sample of 1000 seldom reaches (:class:`MonotoneAIPW`'s Notes on the efficiency
    bound): in ``causalkit simulate longterm-linear`` its mean is 0.28 and 0.52 at 30% and 40%
    drop-out per stage, against the bound's SD of 0.28 and 0.52
    (``simulations/results/longterm/longterm_efficiency_bound.csv``), while the estimates'
    SD is 0.22 and 0.33; hence the coverage of 0.9875 there.

    With least-squares stage regressions (with an intercept, as the default OLS) the linear
    fluctuation shifts each stage by the weighted mean residual, which is the ratio (Hajek)
    correction, so the estimate equals ``MonotoneAIPW(normalize=True)``'s; with a constant
    outcome chain it equals ``SequentialIPW(normalize=True)``'s and with constant weights
    :class:`~causalkit.longterm.SequentialRegression`'s (identities to rounding, visible in the
    rows of ``causalkit simulate longterm-linear``). It therefore shares the normalised form's
    smaller spread under heavy weights and the Hajek form's finite-sample bias when the chain is
    wrong. That bias vanishes as n grows, faster than the SD: with a constant chain on the
    linear design (400 draws per cell no study uses, ``simulations/longterm_dr_by_n.py``,
    ``simulations/results/longterm/longterm_dr_by_n.csv``) it is -0.127, -0.046 and -0.015 at
    n = 1000, 4000 and 16,000 at 40% drop-out per stage (-4.4, -2.6 and -1.3 MC SE), and
    -0.033, -0.009 and -0.002 at 30%.

    The default interval also covers with a wrong chain. Its substitution variance models each
    stage residual's conditional mean as well as its spread
    (:func:`~causalkit.longterm._scores.substitution_variance` says why), so with a wrong chain
    it estimates the variance of the influence function at that chain, which bounds the
    estimator's from above. In the same check its coverage with a constant chain is 0.9525,
    0.965 and 0.95 at 30% drop-out and n = 1000, 4000 and 16,000 (0.97, 0.9675 and 0.965 at
    40%), against 0.9625, 0.9775 and 0.945 (0.9775, 0.9825 and 0.96) with the right chain; the
    empirical variance (``variance="empirical"``) gives 0.945, 0.9425 and 0.9225 with the
    constant chain and is short with the right one at heavy drop-out (0.87 at 40% and
    n = 1000). With the weights wrong and the chain right the substitution variance adds the
    least-squares chain's estimation term, as :class:`MonotoneAIPW`'s does (its ``variance``
    parameter gives the coverage, which is the same here).

    All nuisance models are fitted on the whole sample, which the default parametric models
    (OLS per stage and arm, logistic regression) allow; for flexible learners use the
    cross-fitted :class:`MonotoneAIPW`.

    Parameters
    ----------
    outcome_model : sklearn regressor or stage learner, optional
        Default OLS per stage and arm.
    propensity_model, selection_model : sklearn classifiers, optional
        Default logistic regression (C = 1e4). ``selection_model=BalancingLogit()`` gives
        stage-wise balancing (calibration) weights (:class:`~causalkit.longterm.BalancingLogit`).
    propensity_clip, selection_floor
        As in :class:`SequentialIPW`.
    weight_cap : float
        Cap on the cumulative weight ``1 / (e_A(X) r_t(H_t))`` in the targeting step and the
        influence function (reported as ``n_capped_``, with a ``ClippingWarning`` when it
        binds); default none. A cap trades double robustness for variance: ``ltmle``'s
        default bound 0.01 on the cumulative probability (a cap of 100) lowered the SD from
        0.33 to 0.28 in the linear design at 40% drop-out per stage, n = 1000 (150
        replications, seeds 830000-830149), but with a wrong outcome chain it biased the
        estimate by -0.21 (5 MC SE; 60 replications, seeds 8100-8159), against -0.01 uncapped (200
        replications, seeds 800000-800199).
    variance : {"substitution", "empirical"}
        As in :class:`MonotoneAIPW` (the substitution variance uses the uncapped weights).
    random_state : None, int or SeedSequence
        Seeds the nuisance models whose ``random_state`` is unset and the bootstrap.

    Attributes
    ----------
    ate_, mu_, influence_, scores_ ((n, 2) uncentred efficient-influence-function scores),
    chain_ (the targeted chain), fluctuation_ ((T, 2) ``epsilon_t`` per stage and arm),
    n_clipped_ (continuation probabilities floored, per stage), variance_, n_capped_ (weights
    capped, per stage), propensity_model_, selection_model_.
    """

    _label = "Sequential TMLE"
    _nuisance_slots = {"outcome_model": "regressor", "propensity_model": "classifier",
                       "selection_model": "classifier"}

    def __init__(self, outcome_model=None, propensity_model=None, selection_model=None,
                 propensity_clip=(0.01, 0.99), selection_floor=0.01, weight_cap=np.inf,
                 variance="substitution", random_state=None):
        self.outcome_model = outcome_model
        self.propensity_model = propensity_model
        self.selection_model = selection_model
        self.propensity_clip = propensity_clip
        self.selection_floor = selection_floor
        self.weight_cap = weight_cap
        self.variance = variance
        self.random_state = random_state

    def _fit(self, data: MonotoneData):
        cap = check_weight_cap(self.weight_cap)
        check_variance(self.variance)
        e1, lam, self.n_clipped_ = self._nuisance_probabilities(data)
        raw = inverse_weights(data, e1, lam)
        self.n_capped_ = count_capped(raw, cap)
        warn_capped(self._label, self.n_capped_, cap)
        W = np.nan_to_num(np.minimum(raw, cap))
        eps = np.zeros((data.n_stages, 2))

        def target(k, rows, y, labeled, stage):
            H, arm = data.history(k, rows), data.a[rows]
            residual = np.where(labeled, y - stage.predict(H, arm), 0.0)
            w = W[rows, k] * labeled
            for a in (0, 1):
                total = np.sum(w[arm == a])
                eps[k, a] = np.sum((w * residual)[arm == a]) / total if total > 0 else 0.0
            return _Shifted(stage, eps[k].copy())

        self.chain_ = OutcomeChain(self.outcome_model, "replace_all",
                                   random_state=self.seed_for("outcome")).fit(data,
                                                                               update=target)
        self.fluctuation_ = eps
        m_first, W_stage, D = aipw_components(data, e1, lam, self.chain_, cap)
        scores = combine_aipw(m_first, W_stage, D)
        self.variance_ = None
        if self.variance == "substitution":
            self.variance_ = (least_squares_chain_variance(
                data, e1, lam, m_first, D, W_stage, scores[:, 1] - scores[:, 0], self.chain_,
                "replace_all") if least_squares_kind(self.outcome_model)
                else substitution_variance(data, e1, lam, m_first, D))
        everyone = np.ones(data.n, dtype=bool)
        self.mu_ = np.array([self.chain_.predict(0, data, everyone, a).mean() for a in (0, 1)])
        self.ate_ = float(self.mu_[1] - self.mu_[0])
        self.scores_ = scores
        self.influence_ = scores[:, 1] - scores[:, 0]

    def _details(self) -> dict:
        return {**super()._details(), "n_capped": int(self.n_capped_.sum())}

    def _effect(self, X):
        m0, m1 = self.chain_.predict_effect(X)
        return m1 - m0
