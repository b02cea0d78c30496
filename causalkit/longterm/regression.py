"""Sequential regression imputation (iterated conditional expectations)."""

from __future__ import annotations

import numpy as np

from causalkit.longterm._base import MonotoneEstimator
from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import OutcomeChain, check_mode
from causalkit.longterm._scores import aipw_scores

__all__ = ["SequentialRegression"]


class SequentialRegression(MonotoneEstimator):
    """Backward nested regression imputation of the long-term outcome (SeqRI).

    For ``t = T, ..., 1``: fit ``m_t(H_t) = E[Y~^(t) | H_t, R_t = 1]`` on the responders of
    stage ``t`` (separately per arm for plain regressors), impute it for the units at risk, and
    move one stage back. Then

    .. math:: \\hat\\mu_a = \\frac1n \\sum_{i=1}^n \\hat m_1(X_i, a), \\qquad
              \\hat\\tau(x) = \\hat m_1(x, 1) - \\hat m_1(x, 0),

    the average running over **all** units (Bang & Robins 2005, *Biometrics* 61(4); Yang, Guo,
    Han & Wu 2025, arXiv:2504.19527, "SeqRI"). Units that drop out part-way contribute their
    early short-term outcomes.

    Parameters
    ----------
    outcome_model : sklearn regressor or stage learner, optional
        Regressor cloned per stage and arm (default OLS), or an object with ``fit_stage`` such
        as :class:`~causalkit.longterm.BalanceNet`.
    mode : {"impute_missing", "replace_all"}
        ``"impute_missing"`` keeps observed values and imputes only the missing ones (without
        drop-out the estimator is exactly the T-learner); ``"replace_all"`` regresses on the
        previous stage's predictions for everyone (plain ICE).
    propensity_model, selection_model : sklearn classifiers, optional
        Used only for the influence-function standard error (default logistic regression).
    propensity_clip, selection_floor
        Truncation of those probabilities (see :class:`SequentialIPW`).
    random_state : None, int or SeedSequence
        Seeds the nuisance models whose ``random_state`` is unset (each stage's regressions get
        their own seed) and the bootstrap.

    Attributes
    ----------
    ate_, mu_, chain_ (the fitted stage models), influence_, propensity_model_ and
    selection_model_ (the fitted probability models of the influence function)

    Notes
    -----
    Inference ``"influence"`` (default) uses the efficient influence function of monotone
    coarsening evaluated at this estimator's outcome chain plus fitted propensity and
    continuation models (in-sample). With correctly specified parametric outcome models and
    enough responders per stage and arm the plug-in is at least as efficient as that bound, so
    the interval is then conservative (coverage 0.92-0.97 in the linear-Gaussian study). With
    many covariates and few responders the in-sample residuals are too small and the interval
    too short (coverage 0.78-0.82 in the IHDP study, 139 treated of whom about 50 reach the
    end at 30% drop-out per stage); ``estimate(inference="bootstrap")`` refits the chain on
    every resample and is the safer choice there.
    """

    _label = "Sequential regression"
    _nuisance_slots = {"outcome_model": "regressor", "propensity_model": "classifier",
                       "selection_model": "classifier"}

    def __init__(self, outcome_model=None, mode="impute_missing", propensity_model=None,
                 selection_model=None, propensity_clip=(0.01, 0.99), selection_floor=0.01,
                 random_state=None):
        self.outcome_model = outcome_model
        self.mode = mode
        self.propensity_model = propensity_model
        self.selection_model = selection_model
        self.propensity_clip = propensity_clip
        self.selection_floor = selection_floor
        self.random_state = random_state

    def _chain_weights(self, data, e1, lam):
        return None

    def _fit(self, data: MonotoneData):
        chain = OutcomeChain(self.outcome_model, check_mode(self.mode),
                             random_state=self.seed_for("outcome"))
        e1, lam, self.n_clipped_ = self._nuisance_probabilities(data)
        self.chain_ = chain.fit(data, self._chain_weights(data, e1, lam))
        everyone = np.ones(data.n, dtype=bool)
        m = np.column_stack([self.chain_.predict(0, data, everyone, arm) for arm in (0, 1)])
        self.mu_ = m.mean(axis=0)
        self.ate_ = float(self.mu_[1] - self.mu_[0])
        phi = aipw_scores(data, e1, lam, self.chain_)
        self.influence_ = phi[:, 1] - phi[:, 0]

    def _effect(self, X):
        m0, m1 = self.chain_.predict_effect(X)
        return m1 - m0
