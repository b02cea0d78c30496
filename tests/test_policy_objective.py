"""TargetPolicyLearner's objective: target, source-only or chosen by held-out target value."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone

from causalkit.exceptions import CausalkitWarning
from causalkit.inference import contrast
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps
from causalkit.policy.trees import fit_policy_tree, predict_tree


@pytest.fixture(scope="module")
def data():
    return dgps.simulate("learning", np.random.default_rng(3), n_source=800, n_target=800,
                         shift=dgps.LEARNING_SHIFTS["strong"])


def _learner(data, **kwargs):
    kwargs.setdefault("random_state", 0)
    value = TargetPolicyValue(cv=2, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        return TargetPolicyLearner(value, **kwargs).fit(data["X_source"], data["y"],
                                                        data["treatment"],
                                                        X_target=data["X_target"])


def test_source_score_matrix_reproduces_the_source_only_estimate(data):
    value = _learner(data, policy="linear").value_estimator_
    X, gamma = value.source_score_matrix()
    policy = dgps.soft_policy("learning")
    assert X.shape == (800, 3) and gamma.shape == (800, 2)
    by_scores = np.mean(np.sum(policy(X) * gamma, axis=1))
    assert by_scores == pytest.approx(value.estimate(policy, "source_only").value, rel=1e-12)


def test_source_objective_is_the_tree_of_the_source_scores(data):
    learner = _learner(data, policy="tree", depth=1, objective="source")
    X, gamma = learner.value_estimator_.source_score_matrix()
    tree, _ = fit_policy_tree(X, gamma, depth=1, min_samples_leaf=learner.min_samples_leaf)
    grid = np.random.default_rng(0).normal(size=(500, 3)) * 2
    assert np.array_equal(learner.predict(grid), learner.arms_[predict_tree(tree, grid)])
    assert learner.objective_ == "source"
    assert "fixed: objective='source'" in learner.summary()


@pytest.mark.parametrize("policy", ["tree", "linear"])
def test_auto_leaves_the_target_objective_only_beyond_one_standard_error(data, policy):
    auto = _learner(data, policy=policy, depth=1, objective="auto")
    choice = auto.objective_choice_
    fixed = {obj: _learner(data, policy=policy, depth=1, objective=obj)
             for obj in ("target", "source")}
    for obj, learner in fixed.items():               # the candidates are the fixed learners
        assert choice[obj].value == pytest.approx(learner.value_.value, rel=1e-12)
        assert choice[obj].std_error == pytest.approx(learner.value_.std_error, rel=1e-12)
    diff = choice["difference"]
    best = "source" if diff.value > diff.std_error else "target"
    assert auto.objective_ == best
    assert auto.value_.value == choice[best].value
    paired = contrast(choice["source"], choice["target"])
    assert diff.value == pytest.approx(paired.value)
    assert diff.std_error == pytest.approx(paired.std_error)
    grid = np.random.default_rng(1).normal(size=(300, 3)) * 2
    assert np.array_equal(auto.predict(grid), fixed[best].predict(grid))
    assert f"auto: held-out target value {choice[best].value:.4g} for {best!r}" in auto.summary()


def test_objective_is_validated_and_cloned(data):
    learner = TargetPolicyLearner(objective="auto")
    assert clone(learner).get_params()["objective"] == "auto"
    with pytest.raises(ValueError, match="objective must be one of"):
        _learner(data, objective="pooled")
