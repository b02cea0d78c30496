"""Two-sample bootstrap of the learner's held-out value under strong shift.

The bootstrap resamples source rows within arms and target rows within the target
(``TwoSampleData.strata``) and refits the value estimator, the fold policies held fixed; its
interval (normal, with the bootstrap SE) is checked against the true target value of the
learned policy (Monte Carlo over the known outcome model).
"""

import warnings

import numpy as np
import pytest

from causalkit.exceptions import CausalkitWarning
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps

SHIFT = dgps.LEARNING_SHIFTS["strong"]


def _coverage(reps, n, n_boot, policy):
    hits = []
    for seed in range(500, 500 + reps):
        data = dgps.simulate("learning", np.random.default_rng(seed), n_source=n, n_target=n,
                             shift=SHIFT)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalkitWarning)
            learner = TargetPolicyLearner(TargetPolicyValue(cv=2), policy=policy, depth=2,
                                          random_state=seed).fit(
                data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
            boot = learner.estimate(inference="bootstrap", n_boot=n_boot, progress=False)
        truth = dgps.true_value("learning", learner.predict_proba, SHIFT, n_mc=200_000)
        lo, hi = boot.conf_int()
        hits.append(lo <= truth <= hi)
    return float(np.mean(hits))


def test_learner_bootstrap_covers_the_learned_policy_value():
    # 12 reps: P(Binomial(12, 0.95) <= 8) < 0.003 (the full-size coverage is the study
    # policy-bootstrap, 200 replications, and the slow test below)
    assert _coverage(reps=12, n=300, n_boot=30, policy="linear") >= 9 / 12


@pytest.mark.slow
def test_learner_bootstrap_coverage_full():
    coverage = _coverage(reps=200, n=1000, n_boot=200, policy="tree")
    assert abs(coverage - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / 200)
