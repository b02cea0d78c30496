"""Borrowing external controls for a randomised trial.

Estimators (``fit(X, y, treatment, trial=...)``, or ``fit(df, y="re78", treatment="treat",
trial="trial", covariates=[...])``, then ``estimate()`` -> :class:`~causalkit.inference.Estimate`):

* :class:`AdaptiveBorrowing` (recommended): full borrowing, moved toward the trial-only estimate
  by the posterior mean of its bias (a prior with the smallest risk under exchangeability for a
  bound on the risk everywhere); unbiased for any outcome law under exchangeability, never much
  worse than trial-only when the external controls are biased;
* :class:`InfluenceBorrowing` (AIB) and :class:`CalibratedInfluenceBorrowing` (ACIB): score each
  external control by its influence on the trial-control outcome model, borrow the
  MSE-minimising set of the most comparable ones, estimate with the efficient AIPW-type
  estimator;
* baselines :class:`TrialOnly`, :class:`FullBorrowing`, :class:`CalibratedFullBorrowing`,
  :class:`PowerPriorBorrowing`, :class:`RobustMixturePriorBorrowing` (Bayesian dynamic
  borrowing with a robust mixture prior), :class:`SelectiveBorrowing` (adaptive lasso).
"""

from causalkit.borrowing.adaptive import AdaptiveBorrowing
from causalkit.borrowing.baselines import (
                                           CalibratedFullBorrowing,
                                           FullBorrowing,
                                           PowerPriorBorrowing,
                                           SelectiveBorrowing,
                                           TrialOnly,
)
from causalkit.borrowing.bayesian import RobustMixturePriorBorrowing
from causalkit.borrowing.calibration import OutcomeCalibrator
from causalkit.borrowing.estimators import CalibratedInfluenceBorrowing, InfluenceBorrowing
from causalkit.borrowing.influence import influence_scores
from causalkit.borrowing.models import LinearOutcomeModel, LogisticOutcomeModel, SklearnGLM

__all__ = ["AdaptiveBorrowing", "InfluenceBorrowing", "CalibratedInfluenceBorrowing", "TrialOnly",
           "FullBorrowing", "CalibratedFullBorrowing", "PowerPriorBorrowing",
           "RobustMixturePriorBorrowing", "SelectiveBorrowing", "OutcomeCalibrator",
           "influence_scores", "LinearOutcomeModel", "LogisticOutcomeModel", "SklearnGLM",
           "ESTIMATORS"]

#: Every estimator of this package by short name (used by the CLI, demo and studies).
ESTIMATORS = {
    "adaptive": AdaptiveBorrowing,
    "trial": TrialOnly,
    "full": FullBorrowing,
    "calibrated-full": CalibratedFullBorrowing,
    "power-prior": PowerPriorBorrowing,
    "robust-mixture": RobustMixturePriorBorrowing,
    "selective": SelectiveBorrowing,
    "aib": InfluenceBorrowing,
    "acib": CalibratedInfluenceBorrowing,
}
