"""Borrowing external controls for a randomised trial.

Estimators (``fit(X, y, treatment, trial=...)``, or ``fit(df, y="re78", treatment="treat",
trial="trial", covariates=[...])``, then ``estimate()`` -> :class:`causalkit.Estimate`):

* :class:`InfluenceBorrowing` (AIB) and :class:`CalibratedInfluenceBorrowing` (ACIB): score each
  external control by its influence on the trial-control outcome model, borrow the
  MSE-minimising set of the most comparable ones, estimate with the efficient AIPW-type
  estimator;
* baselines :class:`TrialOnly`, :class:`FullBorrowing`, :class:`CalibratedFullBorrowing`,
  :class:`PowerPriorBorrowing`, :class:`SelectiveBorrowing` (adaptive lasso).
"""

from causalkit.borrowing.baselines import (
                                           CalibratedFullBorrowing,
                                           FullBorrowing,
                                           PowerPriorBorrowing,
                                           SelectiveBorrowing,
                                           TrialOnly,
)
from causalkit.borrowing.calibration import OutcomeCalibrator
from causalkit.borrowing.estimators import CalibratedInfluenceBorrowing, InfluenceBorrowing
from causalkit.borrowing.influence import influence_scores
from causalkit.borrowing.models import LinearOutcomeModel, LogisticOutcomeModel, SklearnGLM

__all__ = ["InfluenceBorrowing", "CalibratedInfluenceBorrowing", "TrialOnly", "FullBorrowing",
           "CalibratedFullBorrowing", "PowerPriorBorrowing", "SelectiveBorrowing",
           "OutcomeCalibrator", "influence_scores", "LinearOutcomeModel", "LogisticOutcomeModel",
           "SklearnGLM", "ESTIMATORS"]

#: Every estimator of this package by short name (used by the CLI, demo and studies).
ESTIMATORS = {
    "trial": TrialOnly,
    "full": FullBorrowing,
    "calibrated-full": CalibratedFullBorrowing,
    "power-prior": PowerPriorBorrowing,
    "selective": SelectiveBorrowing,
    "aib": InfluenceBorrowing,
    "acib": CalibratedInfluenceBorrowing,
}
