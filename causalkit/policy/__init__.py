"""Policy evaluation and learning for a covariate-shifted target population.

A labelled source sample ``(X, A, Y)`` and an unlabelled target sample ``X`` share the outcome
model but not the covariate distribution. :class:`TargetPolicyValue` estimates a policy's value in
the target (doubly robust and efficient, with SE and CI); :class:`TargetPolicyLearner` learns the
policy that maximises it (linear, MLP or exactly searched shallow tree).
"""

from causalkit.policy.learner import TargetPolicyLearner
from causalkit.policy.value import METHODS, TargetPolicyValue

__all__ = ["TargetPolicyValue", "TargetPolicyLearner", "METHODS", "ESTIMATORS"]

#: Every estimator of this package by short name (used by ``causalkit policy``).
ESTIMATORS = {"value": TargetPolicyValue, "learner": TargetPolicyLearner}
