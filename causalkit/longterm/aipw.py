"""Doubly robust (AIPW) estimation of long-term effects under monotone drop-out."""

from __future__ import annotations

import numbers

import numpy as np

from causalkit._validation import check_positive_int, child_seed
from causalkit.longterm._base import MonotoneEstimator
from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import (
    OutcomeChain,
    check_mode,
    default_regressor,
    ess_table,
    is_parametric,
)
from causalkit.longterm._sandwich import least_squares_kind
from causalkit.longterm._scores import (
    aipw_components,
    check_variance,
    check_weight_cap,
    combine_aipw,
    count_capped,
    hajek_scale,
    inverse_weights,
    least_squares_chain_variance,
    substitution_variance,
    warn_capped,
)
from causalkit.nuisance import fit_clone, make_folds

__all__ = ["MonotoneAIPW"]


class MonotoneAIPW(MonotoneEstimator):
    """Augmented IPW (sequentially doubly robust) estimator of the long-term ATE.

    .. math::

        \\varphi_a = m_1(X, a) + \\frac{I(A = a)}{e_a(X)} \\sum_{t=1}^{T}
                     \\frac{R_t}{r_t(H_t)} \\{m_{t+1}(H_{t+1}) - m_t(H_t)\\}, \\qquad
        m_{T+1} = Y,

    :math:`\\hat\\tau = n^{-1}\\sum_i (\\hat\\varphi_{1i} - \\hat\\varphi_{0i})`, with standard
    error :math:`sd(\\hat\\varphi_1 - \\hat\\varphi_0)/\\sqrt n`, the variance of
    :math:`\\varphi_1 - \\varphi_0` estimated as set by ``variance``. With parametric
    nuisance models (the default) every nuisance is fitted on the whole sample; with flexible
    learners every nuisance (propensity, continuation probabilities, the whole outcome chain)
    is fitted on the other ``cv - 1`` folds of each unit (Chernozhukov et al. 2018; see
    ``cv``). The estimator is consistent if, at every stage, either the outcome chain from
    that stage on or the propensity and continuation models up to it are correct (Robins,
    Rotnitzky & Zhao 1995; Tsiatis 2006, ch. 10; Luedtke et al. 2017, arXiv:1705.02459).
    ``effect`` is the DR-learner: ``cate_model`` regresses ``phi_1 - phi_0`` on ``X`` (Kennedy
    2023, *EJS* 17(2)). With ``T = 1`` it is the usual AIPW for a missing-at-random outcome.

    With ``normalize=True`` each stage's weighted residual mean is taken in its ratio (Hajek)
    form, ``sum_i W_it D_it / sum_i W_it`` (see :mod:`causalkit.longterm._scores`), pooled over
    the folds. Both forms share the influence function and are doubly robust; they differ in
    finite samples (linear design, n = 1000; the first item is
    ``simulations/results/longterm/longterm-linear_crossfit_check_*.csv``):

    * out-of-fold inverse probabilities are too large on average (Jensen's inequality,
      ``E[1 / lambda_hat] > 1 / lambda``); with a wrong outcome chain the plain form multiplies
      that excess by the chain's mean residual. With a constant chain at 10% drop-out per stage
      the bias was +0.026 plain and +0.016 ratio (4.5 and 3.3 Monte Carlo SE, 1,200
      replications), +0.006 and +0.004 at n = 4000 (O(1/n)); in-sample weights (``cv=1``)
      remove it;
    * with heavy-tailed weights (high cumulative drop-out) the ratio form is bounded by the
      range of the residuals and has a smaller spread (0.33 against 0.39 at 40% drop-out per
      stage in ``causalkit simulate longterm-linear``), but with a wrong outcome chain it
      carries the ratio's finite-sample bias (there -0.11, 3.9 Monte Carlo SE, in the row
      ``SequentialTMLE (wrong outcome chain)``, which equals the ratio form with a constant
      chain), and its substitution standard error, an estimate of the asymptotic variance,
      overstates that smaller spread (coverage 0.9875 and 0.985 at 30% and 40%). The plain form is
      therefore the default.

    How small the spread can be. An estimator that stays consistent with a wrong outcome chain
    whenever the weights are right cannot, asymptotically, have a smaller variance than the
    semiparametric efficiency bound of the model in which the drop-out and treatment
    mechanisms are modelled and the outcome law is free
    (:meth:`~causalkit.longterm.LinearGaussianDesign.efficient_variance`); a parametric
    plug-in such as :class:`SequentialRegression`, which also assumes the chain's linear form,
    is not bound by it. On the linear design at n = 1000 the bound's SD is 1.05, 1.15, 1.55
    and 1.92 times SequentialRegression's spread at 10, 20, 30 and 40% drop-out per stage
    (``simulations/longterm_efficiency_bound.py``,
    ``simulations/results/longterm/longterm_efficiency_bound.csv``). At 40% this estimator's
    SD ratio is 1.41 on the study's draws and 1.30 and 1.63 on two other sets of 400 draws:
    below the bound's because samples of 1000 seldom hold the rare heavy-weight units that
    dominate the asymptotic variance, not because the bound is beaten. With n = 4000 and
    16,000 the ratio is 1.61 and 1.66 (SD times ``sqrt(n / 1000)``: 0.43 and 0.44, against
    0.44 at n = 1000 and the bound's 0.52; ``longterm_efficiency_bound_by_n.csv``). The same
    rare units explain the substitution SE's surplus at heavy drop-out: its mean on the study's
    draws is 0.12, 0.17, 0.28 and 0.51 at 10-40%, close to the bound's SD (0.12, 0.16, 0.28
    and 0.52), which the spread at n = 1000 does not reach at 30-40%.

    None of the forms tried has both the ratio form's smaller spread and the plain form's small
    bias with a wrong chain. On draws no study uses
    (``simulations/longterm_aipw_form_check.py``, linear design, n = 1000, 400 replications,
    ``simulations/results/longterm/longterm_aipw_form_check.csv``), at 40% drop-out per stage,
    as SD over :class:`SequentialRegression`'s with the right chain (95% interval over
    resampled replications) and bias over its Monte Carlo SE with a constant chain:

    ======================================  ======================  =====================
    form                                    SD ratio, right chain   bias / MC SE, wrong
    ======================================  ======================  =====================
    plain (default)                         1.30 (1.20-1.41)        -0.9
    ratio (``normalize=True``)              1.19 (1.13-1.27)        -3.3
    ratio with its bias jackknifed          1.30 (1.21-1.40)        -0.8
    plain, ``weight_cap=1000``              1.28 (1.20-1.37)        -1.3
    plain, ``weight_cap=500``               1.21 (1.15-1.29)        -3.3
    plain, ``weight_cap=100``               1.09 (1.04-1.14)        -13.9
    ======================================  ======================  =====================

    Removing the ratio's first-order bias (Quenouille's jackknife over units) restores the plain
    form's spread, and a cap that lowers the spread biases the estimate as much as the ratio
    form; at 30% the pattern is the same (plain 1.29, ratio 1.20 with bias -3.6 MC SE). The
    spread of an estimate under such weights is itself uncertain: on the ``longterm-linear``
    study's draws the default's SD ratio is 1.41 (1.28-1.56) at 40% and 1.35 (1.19-1.55) at
    30% (the rows ``plain (default), study draws`` of the same file).

    Parameters
    ----------
    outcome_model : sklearn regressor or stage learner, optional
        Default OLS per stage and arm.
    propensity_model, selection_model : sklearn classifiers, optional
        Default logistic regression (C = 1e4). ``selection_model=BalancingLogit()`` gives
        stage-wise balancing (calibration) weights (:class:`~causalkit.longterm.BalancingLogit`).
    mode : {"impute_missing", "replace_all"}
        Outcome-chain variant (see :class:`SequentialRegression`).
    normalize : bool
        Ratio (Hajek) form of the stage corrections, or the plain sum (default).
    cv : "auto", int, scikit-learn splitter or precomputed folds
        Cross-fitting folds (see ``causalkit.nuisance.make_folds``; an int is stratified on
        treatment and complete-case status); ``cv=1`` fits and evaluates every nuisance on the
        full sample. ``"auto"`` (default): ``1`` when every nuisance model is parametric
        (:func:`~causalkit.longterm._models.is_parametric`: the defaults, linear or logistic
        regressions), else ``5``. Out-of-fold parametric weights are noisier and too large on
        average (Jensen's inequality): in the linear design at 40% drop-out per stage,
        n = 1000, the SD was 0.80 with ``cv=5`` against 0.38 in-sample and 0.27 for
        :class:`SequentialRegression` (100 replications, seeds 850000-850099).
    variance : {"substitution", "empirical"}
        Estimator of the influence function's variance behind the standard error.
        ``"substitution"`` (default, :func:`~causalkit.longterm._scores.substitution_variance`)
        averages each stage's term over the units at risk with a model of the residuals'
        second moment (for in-sample least-squares chains from the leave-one-out residuals
        ``D / (1 - h)``, ``h`` the leverage, as HC3 does: the function's docstring says why
        and gives the coverage that chose it); ``"empirical"`` is the sample variance of the
        scores, which under heavy drop-out is too small (linear design, n = 1000, 150
        replications, seeds 920000-920149: at 40% drop-out per stage SE/SD 0.76 and coverage
        0.87 empirical, 1.21 and 0.95 substitution; at 10%, 1.02 and 1.03, both covering
        0.94). The coverage on the studies' own seeds is in
        ``simulations/results/longterm-linear`` and ``longterm-ihdp``. The pipeline bootstrap
        is no remedy for the substitution interval's over-coverage at heavy drop-out: at 40%
        per stage (100 data sets, 100 resamples; ``simulations/longterm_bootstrap_check.py``,
        ``simulations/results/longterm/longterm_bootstrap_check.csv``) its median SE was 0.86
        of the SD here and 0.87 for :class:`SequentialTMLE` (substitution: 1.21 and 1.31), and
        its percentile interval covered 0.91 for both (substitution: 0.97 and 0.98). Nor can
        any normal interval whose SE is right for the asymptotic variance do better there: for
        an estimator equal to its linearisation at the true nuisances, the interval with the
        bound's SD covers 0.9785 at n = 1000 and 0.988 at n = 16,000 at 40% per stage (0.968
        and 0.98 at 30%, 0.953 at 10% and 20%), since the largest 0.1% of the influence
        function's values hold 91% of its sum of squares at 40% (4,000,000 units;
        ``simulations/longterm_influence_tails_check.py``,
        ``simulations/results/longterm/longterm_influence_tails_check.csv``). The
        substitution variance models each stage residual's conditional mean as well as its
        spread, so it also covers with a wrong (constant) chain: 0.95, 0.97 and 0.9525 at 30%
        drop-out and n = 1000, 4000 and 16,000, 0.9575, 0.9625 and 0.96 at 40%, where the
        empirical one gives 0.9375, 0.9475 and 0.9225 and 0.855, 0.875 and 0.915
        (``simulations/results/longterm/longterm_dr_by_n.csv``; 400 draws per cell no study
        uses). With the weights wrong and the chain right the estimate stays unbiased, but the
        influence function at the fitted nuisances leaves out the variance of estimating the
        chain, which vanishes only when the weights balance the history; for an in-sample
        least-squares chain (the default) the substitution variance therefore adds that term,
        its gradient shrunk by its own noise
        (:func:`~causalkit.longterm._sandwich.chain_estimation_term`). In ``causalkit simulate
        longterm-linear`` (flat propensity and selection models, the right OLS chain; the
        estimate then equals :class:`SequentialRegression`'s) the default covers 0.95, 0.94,
        0.96 and 0.9225 at 10%, 20%, 30% and 40% drop-out per stage, beside
        :class:`SequentialRegression`'s stacked sandwich on the same estimates, 0.95, 0.9425,
        0.9625 and 0.93; without the term it covered 0.9475, 0.925, 0.88 and 0.82 (that study's
        results at commit 69d1a5c). With the right weights the term is shrunk to nearly
        nothing: it raised the study's mean SE by 0.3% at 30% and 1.0% at 40%.
    weight_cap : float
        Cap on the cumulative weight ``1 / (e_A(X) r_t(H_t))`` (reported as ``n_capped_``, with
        a ``ClippingWarning`` when it binds); default none, as in
        :class:`~causalkit.longterm.SequentialTMLE`, whose docstring gives the trade-off: a cap
        lowers the variance but biases the estimate when the outcome chain is wrong (the table
        above). The substitution variance uses the uncapped weights.
    propensity_clip, selection_floor, cate_model, ess_warning
        As in :class:`SequentialIPW`.
    random_state : None, int or SeedSequence
        Seeds the fold split, the nuisance models whose ``random_state`` is unset (per fold and
        stage) and the bootstrap.

    Attributes
    ----------
    ate_, mu_, influence_ (``phi_1 - phi_0``), scores_ ((n, 2) uncentred ``phi_0, phi_1``),
    weights_ (out-of-fold ``1 / (e_A r_t)``), variance_ (the substitution variance, or None),
    ess_, n_clipped_, n_capped_ (weights capped, per stage), folds_ (the ``(train, test)``
    index pairs), fold_models_ (per fold a dict of the fitted ``"propensity"`` model, the
    ``"selection"`` models per stage and the ``"outcome"`` chain).
    """

    _label = "Monotone AIPW"
    _row_order_dependent = True             # through the random fold split (cv >= 2)
    _nuisance_slots = {"outcome_model": "regressor", "propensity_model": "classifier",
                       "selection_model": "classifier", "cate_model": "regressor"}

    def __init__(self, outcome_model=None, propensity_model=None, selection_model=None,
                 mode="impute_missing", normalize=False, cv="auto", propensity_clip=(0.01, 0.99),
                 selection_floor=0.01, weight_cap=np.inf, cate_model=None, ess_warning=0.1,
                 variance="substitution", random_state=None):
        self.outcome_model = outcome_model
        self.propensity_model = propensity_model
        self.selection_model = selection_model
        self.mode = mode
        self.normalize = normalize
        self.cv = cv
        self.propensity_clip = propensity_clip
        self.selection_floor = selection_floor
        self.weight_cap = weight_cap
        self.cate_model = cate_model
        self.ess_warning = ess_warning
        self.variance = variance
        self.random_state = random_state

    def _folds(self, data: MonotoneData):
        """``cv=1``: one in-sample "fold"; otherwise :func:`causalkit.nuisance.make_folds`
        stratified on treatment x complete-case status (on treatment alone when a level of
        the former has fewer than ``cv`` units); ``"auto"`` resolved as documented."""
        cv = self.cv
        if isinstance(cv, str) and cv == "auto":
            parametric = all(is_parametric(m) for m in
                             (self.outcome_model, self.propensity_model, self.selection_model))
            cv = 1 if parametric else 5
        as_int = isinstance(cv, numbers.Integral) and not isinstance(cv, bool)
        if as_int and check_positive_int(cv, "cv", minimum=1) == 1:
            everyone = np.arange(data.n)
            return [(everyone, everyone)]
        strata = 2 * data.a + data.R[:, -1]
        if as_int and np.unique(strata).size > 1 \
                and np.bincount(strata).min(initial=data.n) < cv:
            strata = data.a
        return make_folds(cv, data.n, stratify=strata, groups=data.units,
                          random_state=self.seed_for("folds"))

    def _fit(self, data: MonotoneData):
        mode = check_mode(self.mode)
        check_variance(self.variance)
        cap = check_weight_cap(self.weight_cap)
        m_first = np.empty((data.n, 2))
        e_all, lam_all = np.empty(data.n), np.empty(data.R.shape)
        W = np.empty((data.n, data.n_stages, 2))
        D = np.empty_like(W)
        clipped = np.zeros(data.n_stages, dtype=int)
        capped = np.zeros(data.n_stages, dtype=int)
        self.folds_ = self._folds(data)
        self.fold_models_ = []
        outcome_seed = self.seed_for("outcome")
        for j, (train_idx, test_idx) in enumerate(self.folds_):
            train, test = data.subset(train_idx), data.subset(test_idx)
            models = self._fit_probability_models(train, fold=j)
            chain = OutcomeChain(self.outcome_model, mode,
                                 random_state=child_seed(outcome_seed, j)).fit(train)
            e1, lam, n_clip = self._predict_probabilities(models, test)
            capped += count_capped(inverse_weights(test, e1, lam), cap)
            m_first[test_idx], W[test_idx], D[test_idx] = aipw_components(test, e1, lam, chain,
                                                                          cap)
            e_all[test_idx], lam_all[test_idx] = e1, lam
            clipped += n_clip
            self.fold_models_.append({"propensity": models[0].model,
                                      "selection": models[1].models_, "outcome": chain})
        scores = combine_aipw(m_first, W, D, normalize=self.normalize)
        self.mu_ = scores.mean(axis=0)
        self.ate_ = float(self.mu_[1] - self.mu_[0])
        self.influence_ = scores[:, 1] - scores[:, 0]
        weights = np.where(data.R == 1, W.sum(axis=2), np.nan)
        self.scores_, self.weights_, self.n_clipped_ = scores, weights, clipped
        self.n_capped_ = capped
        warn_capped(self._label, capped, cap)
        self.variance_ = None
        if self.variance == "substitution":
            # an in-sample least-squares chain: HC3 residuals and its estimation term
            if len(self.folds_) == 1 and least_squares_kind(self.outcome_model):
                used = W / hajek_scale(W) if self.normalize else W
                self.variance_ = least_squares_chain_variance(
                    data, e_all, lam_all, m_first, D, used, self.influence_, chain, mode)
            else:
                self.variance_ = substitution_variance(data, e_all, lam_all, m_first, D)
        self.ess_ = ess_table(data, weights, warn_below=self.ess_warning, name=self._label)
        self.cate_model_ = fit_clone(self._seeded("cate", self.cate_model, default_regressor),
                                     data.X, self.influence_)

    def _effect(self, X):
        return self.cate_model_.predict(X)

    def _details(self) -> dict:
        return {**super()._details(), "n_clipped": int(self.n_clipped_.sum())}
