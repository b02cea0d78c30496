"""Learning the treatment policy that maximises the estimated target-population value.

:class:`TargetPolicyLearner` fits a :class:`~causalkit.policy.TargetPolicyValue`, takes its
stacked score matrix :math:`\\Gamma` (for every policy, the target-DR value estimate is
:math:`n^{-1}\\sum_r\\sum_a\\pi(a|X_r)\\Gamma_{r,a}`) and maximises that welfare over a policy
class: linear softmax or small MLP (smooth surrogate, :mod:`causalkit.policy.smooth`), or an
exhaustive depth-1/2 tree (:mod:`causalkit.policy.trees`). This is
:math:`\\hat\\pi = \\arg\\max_{\\pi\\in\\Pi}\\hat V_T(\\pi)` of Liu et al. (2025), "Optimal
Policy Adaptation under Covariate Shift", IJCAI (arXiv:2501.08067); their policy class and
optimiser are not reproduced here: the classes above are the standard choices for empirical
welfare maximisation.

A value estimated on the rows the policy was optimised on is optimistic. ``value_`` is therefore
cross-fitted: the stacked rows are split into ``cv`` folds, a policy is learned without each fold
and evaluated on it, and the target-DR estimate (with its two-sample SE) is formed from these
held-out assignments. It estimates the value of the learning procedure at this sample size; the
final policy (``predict``) is refitted on all rows.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import StratifiedKFold

from causalkit._validation import check_array, check_positive_int, check_random_state
from causalkit.policy._policies import one_hot
from causalkit.policy.smooth import fit_linear_policy, fit_mlp_policy
from causalkit.policy.trees import fit_policy_tree, predict_tree
from causalkit.policy.value import TargetPolicyValue

__all__ = ["TargetPolicyLearner", "POLICY_CLASSES"]

#: Policy classes of :class:`TargetPolicyLearner`.
POLICY_CLASSES = ("linear", "mlp", "tree")


class _TreePolicy:
    """Deterministic tree policy: one-hot rows of the leaf's arm."""

    def __init__(self, tree, n_arms):
        self.tree, self.n_arms = tree, n_arms

    def proba(self, X):
        return one_hot(predict_tree(self.tree, X), np.arange(self.n_arms, dtype=float))


class TargetPolicyLearner(BaseEstimator):
    """Policy learner that maximises the estimated value in a covariate-shifted target.

    Parameters
    ----------
    value : TargetPolicyValue, optional
        Value estimator (nuisance models, folds, clipping); cloned. Default
        ``TargetPolicyValue()``.
    policy : {"linear", "mlp", "tree"}
        Policy class: linear softmax rule, one-hidden-layer softmax network, or a depth-1/2 tree
        found by exhaustive search.
    depth : {1, 2}
        Tree depth (``policy="tree"``).
    n_thresholds : int
        Root split points tried per feature for depth-2 trees.
    min_samples_leaf : int
        Minimum rows per tree leaf.
    l2 : float
        L2 penalty of the smooth policies (rewards are standardised first).
    temperature : float
        Softmax temperature of the smooth policies.
    hidden_units : int
        Width of the MLP's hidden layer.
    learning_rate : float
        Adam step size (MLP).
    max_iter : int
        L-BFGS iterations (linear) or Adam steps (MLP).
    deterministic : bool
        Deploy the argmax arm (default). ``False`` deploys the smooth probabilities (linear/MLP).
    cv : int
        Folds of the cross-fitted (held-out) evaluation behind ``value_``.
    random_state : int, optional
        Seed of the held-out folds and of the MLP initialisation.

    Attributes
    ----------
    value_estimator_ : TargetPolicyValue
        The fitted value estimator (its nuisances give the score matrix).
    policy_model_ : object
        The final policy, fitted on all rows.
    value_ : causalkit.Estimate
        Held-out target-DR value of the learned policy (see the module docstring).
    arms_ : ndarray
        Treatment arms (column order of ``predict_proba``).

    Notes
    -----
    Larger outcomes are better; negate ``y`` for harmful outcomes.
    """

    def __init__(self, value=None, policy="linear", depth=2, n_thresholds=32, min_samples_leaf=5,
                 l2=1e-3, temperature=1.0, hidden_units=16, learning_rate=0.05, max_iter=500,
                 deterministic=True, cv=2, random_state=None):
        self.value = value
        self.policy = policy
        self.depth = depth
        self.n_thresholds = n_thresholds
        self.min_samples_leaf = min_samples_leaf
        self.l2 = l2
        self.temperature = temperature
        self.hidden_units = hidden_units
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.deterministic = deterministic
        self.cv = cv
        self.random_state = random_state

    def _check_params(self):
        if self.policy not in POLICY_CLASSES:
            raise ValueError(f"policy must be one of {POLICY_CLASSES}; got {self.policy!r}")
        if self.value is not None and not isinstance(self.value, TargetPolicyValue):
            raise TypeError(f"value must be a TargetPolicyValue or None; got "
                            f"{type(self.value).__name__}")
        if self.depth not in (1, 2):
            raise ValueError(f"depth must be 1 or 2; got {self.depth!r}")
        for name in ("n_thresholds", "min_samples_leaf", "hidden_units", "max_iter"):
            check_positive_int(getattr(self, name), name)
        check_positive_int(self.cv, "cv", minimum=2)
        for name in ("temperature", "learning_rate"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name} must be positive; got {getattr(self, name)!r}")
        if not float(self.l2) >= 0:
            raise ValueError(f"l2 must be >= 0; got {self.l2!r}")

    def _fit_policy(self, X, gamma, seed):
        if self.policy == "tree":
            tree, _ = fit_policy_tree(X, gamma, depth=self.depth, n_thresholds=self.n_thresholds,
                                      min_samples_leaf=self.min_samples_leaf)
            return _TreePolicy(tree, gamma.shape[1])
        if self.policy == "linear":
            return fit_linear_policy(X, gamma, l2=self.l2, temperature=self.temperature,
                                     max_iter=self.max_iter)
        return fit_mlp_policy(X, gamma, hidden_units=self.hidden_units, l2=self.l2,
                              temperature=self.temperature, learning_rate=self.learning_rate,
                              max_iter=self.max_iter, random_state=seed)

    def _deploy(self, model, X):
        proba = model.proba(X)
        if self.deterministic or self.policy == "tree":
            return one_hot(np.argmax(proba, axis=1), np.arange(proba.shape[1], dtype=float))
        return proba

    def fit(self, X_source, treatment, y, X_target):
        """Fit the value estimator, the held-out evaluation and the final policy.

        Parameters are those of :meth:`TargetPolicyValue.fit`. Returns ``self``.
        """
        self._check_params()
        value = clone(self.value) if self.value is not None else TargetPolicyValue()
        self.value_estimator_ = value.fit(X_source, treatment, y, X_target)
        self.arms_ = self.value_estimator_.arms_
        self.n_features_in_ = self.value_estimator_.n_features_in_
        X, gamma, is_target = self.value_estimator_.score_matrix()
        rng = check_random_state(self.random_state)
        seeds = rng.integers(0, 2**31 - 1, size=self.cv + 2)
        held_out = np.empty_like(gamma)
        folds = StratifiedKFold(self.cv, shuffle=True, random_state=int(seeds[0]))
        for k, (train, test) in enumerate(folds.split(X, is_target)):
            model = self._fit_policy(X[train], gamma[train], int(seeds[k + 1]))
            held_out[test] = self._deploy(model, X[test])
        n_s = int(np.sum(~is_target))
        self.value_ = self.value_estimator_.estimate_matrices(
            held_out[:n_s], held_out[n_s:], "dr", name="learned policy value (held-out)")
        self.policy_model_ = self._fit_policy(X, gamma, int(seeds[-1]))
        return self

    def _check_X(self, X):
        if not hasattr(self, "policy_model_"):
            raise ValueError("this TargetPolicyLearner is not fitted yet; call fit(...) first")
        X = check_array(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} columns; the policy was fitted with "
                             f"{self.n_features_in_}")
        return X

    def predict_proba(self, X):
        """(n, K) action probabilities of the deployed policy (one-hot when deterministic)."""
        X = self._check_X(X)
        return self._deploy(self.policy_model_, X)

    def predict(self, X):
        """Recommended arm (a label from ``arms_``) for each row of ``X``."""
        X = self._check_X(X)
        proba = self._deploy(self.policy_model_, X)
        return self.arms_[np.argmax(proba, axis=1)]

    def policy_value(self, X_source=None, treatment=None, y=None, X_target=None, method="dr"):
        """Target value of the learned policy.

        Without data, the held-out estimate ``value_``. With fresh samples (not used for
        learning), a clone of the value estimator is fitted on them and evaluates the final
        policy there, which is the honest check of a deployed rule.
        """
        given = [v is not None for v in (X_source, treatment, y, X_target)]
        if not any(given):
            if not hasattr(self, "value_"):
                raise ValueError("this TargetPolicyLearner is not fitted yet; call fit(...) first")
            return self.value_
        if not all(given):
            raise ValueError("policy_value needs all of X_source, treatment, y and X_target "
                             "(or none of them)")
        evaluator = clone(self.value_estimator_).fit(X_source, treatment, y, X_target)
        if not np.array_equal(evaluator.arms_, self.arms_):
            raise ValueError(f"the evaluation sample has arms {evaluator.arms_.tolist()}; the "
                             f"policy was learned with {self.arms_.tolist()}")
        return evaluator.estimate(self, method)
