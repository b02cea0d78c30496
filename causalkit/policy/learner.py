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

``objective`` chooses what is maximised: the estimated target value (``"target"``, above), the
source-only AIPW value (``"source"``: the score matrix of
:meth:`~causalkit.policy.TargetPolicyValue.source_score_matrix` on the source rows, i.e. the
usual doubly robust policy learning that ignores the shift; its scores carry no density-ratio
weights, so they are less noisy), or a choice between the two by their held-out estimated
*target* values (``"auto"``): the source objective is taken only when its held-out value exceeds
the target objective's by more than one standard error of the paired difference, the target
objective otherwise. The target objective is the consistent one for the target estimand; the
source objective only trades its bias for less variance, so the choice asks for evidence before
leaving it (a one-standard-error rule, as in Breiman et al., 1984, *Classification and
Regression Trees*, section 3.4.3; the threshold is that convention, not tuned). Whatever the
objective, ``value_`` is the held-out target-DR value.

``estimate()`` reports ``value_`` with a two-sample bootstrap interval by default
(``inference="bootstrap"``): source rows are resampled within arms and target rows within the
target, the value estimator is refitted on each resample (every nuisance; its folds keep the
copies of a unit together) and evaluates the same held-out assignment, each copy of a unit
taking the action its unit was given (``held_out_``); the interval is normal with the bootstrap
SE. The fold policies are held fixed because re-learning them on every resample over-states
the SE: a resample holds about 63% distinct units, so the policies learned on it are noisier
than those learned on the sample. Under strong shift that pipeline bootstrap's SE averaged
0.237 against an error SD of 0.177 (``simulations/policy_bootstrap_variance_check.py``, which
takes its two refits apart). The influence interval (``inference="influence"``, the SE that
``value_`` carries) errs the other way under shift, where the density-ratio weights are large:
``simulations/policy_learner_bootstrap_check.py`` (the ``learning`` design, n_S = n_T = 1000,
depth-2 tree, 200 data sets per shift that no study uses, 100 resamples each;
``simulations/results/policy/policy_learner_bootstrap_check.csv``)
gives mean SEs of 0.152 (influence) and 0.177 (bootstrap) against an error SD of 0.176 under
strong shift, and the coverage of the learned policy's true target value:

========  =========  ===========================  =====================
shift     influence  bootstrap, normal (default)  bootstrap, percentile
========  =========  ===========================  =====================
none      0.955      0.970                        0.970
moderate  0.895      0.925                        0.905
strong    0.890      0.935                        0.920
========  =========  ===========================  =====================

Both intervals are centred on ``value_``, which estimates the mean value of the fold policies
(against that mean the bootstrap covered 0.980, 0.960 and 0.965 under no, moderate and strong
shift). The final policy, learned on every row, is better than the fold policies by 0.016,
0.019 and 0.026 on average (SD 0.020, 0.028 and 0.065), a gap no interval around ``value_``
contains; relative to the SE it is largest under moderate shift. In the study
``causalkit simulate policy-bootstrap`` (strong shift, 200 replications on its own seeds, 200
resamples; ``simulations/results/policy-bootstrap``) the default interval covered the learned
policy's true value in 0.955 of replications, the percentile interval in 0.94 and the
influence interval in 0.91. A finer held-out split shrinks the gap but leaves the influence SE
as short (``simulations/policy_learner_cv_check.py``, ``cv`` = 2, 5 and 10: influence coverage
0.905, 0.923 and 0.905). Refitting the value estimator 200 times costs about 16 s at
n_S = n_T = 1000 with the default nuisance models (a progress bar shows on a terminal; the
result is cached).
"""

from __future__ import annotations

import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from causalkit._base import CausalEstimator, _Refit
from causalkit._validation import (
    check_array,
    check_n_jobs,
    check_positive_int,
    child_seed,
    seed_int,
)
from causalkit.inference import contrast
from causalkit.nuisance import make_folds
from causalkit.policy._data import policy_data
from causalkit.policy._policies import one_hot
from causalkit.policy.smooth import fit_linear_policy, fit_mlp_policy
from causalkit.policy.trees import (
    export_text,
    fit_policy_tree,
    predict_tree,
    sort_orders,
    subset_orders,
)
from causalkit.policy.value import TargetPolicyValue

__all__ = ["TargetPolicyLearner", "POLICY_CLASSES", "OBJECTIVES"]

#: Policy classes of :class:`TargetPolicyLearner`.
POLICY_CLASSES = ("linear", "mlp", "tree")
#: Objectives of :class:`TargetPolicyLearner`.
OBJECTIVES = ("target", "source", "auto")


def _other(objective):
    return "source" if objective == "target" else "target"


class _HeldOutValue(_Refit):
    """Bootstrap replicate of ``value_`` with the fold policies held fixed: the value estimator
    is refitted on the resample and evaluates the held-out assignment, every copy of a unit
    taking the action its unit was given (``held_out``, over the stacked rows of the data)."""

    def _value(self, est):
        held = self.target[est.score_units_]
        n_s = est.weights_.size
        return est.estimate_matrices(held[:n_s], held[n_s:], "dr").value


class _TreePolicy:
    """Deterministic tree policy: one-hot rows of the leaf's arm."""

    def __init__(self, tree, n_arms):
        self.tree, self.n_arms = tree, n_arms

    def proba(self, X):
        return one_hot(predict_tree(self.tree, X), np.arange(self.n_arms, dtype=float))


class TargetPolicyLearner(CausalEstimator):
    """Policy learner that maximises the estimated value in a covariate-shifted target.

    Parameters
    ----------
    value : TargetPolicyValue, optional
        Value estimator (nuisance models, folds, clipping); cloned. Default
        ``TargetPolicyValue()``. When its ``random_state`` is unset it is seeded from this
        learner's ``random_state``, and when its ``n_jobs`` is unset it takes this learner's.
    policy : {"linear", "mlp", "tree"}
        Policy class: linear softmax rule, one-hidden-layer softmax network, or a depth-1/2 tree
        found by exact search over every split point.
    depth : {1, 2}
        Tree depth (``policy="tree"``); every split point is searched
        (:func:`causalkit.policy.trees.fit_policy_tree`).
    min_samples_leaf : int
        Minimum rows per tree leaf.
    n_jobs : int or None
        Threads of the fit: the value estimator's cross-fitting folds (when its own ``n_jobs``
        is unset) and the tree policy's exact searches (``fit_policy_tree``): the stacked rows
        are sorted beside the value fit, and the held-out folds' searches and, with a fixed
        ``objective``, the search on all rows run side by side, one thread each (with
        ``objective="auto"`` the search on all rows follows the choice and splits its root
        features over the threads). -1 (default) every core; None or 1 one thread (inside a
        study that already runs one process per core). The fit does not depend on it.
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
    objective : {"target", "source", "auto"}
        What the policy maximises (module docstring): the estimated target value (default), the
        source-only AIPW value, or (``"auto"``) the source objective when its held-out
        estimated target value exceeds the target objective's by more than one SE of the paired
        difference, the target objective otherwise (module docstring); the choice, both
        held-out values and their paired difference with its SE are recorded in
        ``objective_choice_`` and shown in summaries.
    cv : int, scikit-learn splitter or precomputed folds
        Folds of the cross-fitted (held-out) evaluation behind ``value_``, over the stacked
        source and target rows (an int stratifies them on the sample).
    random_state : None, int or numpy SeedSequence
        Seeds the value estimator (when its own is unset), the held-out folds, the MLP
        initialisations and the bootstrap, each through its own stream.

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
    folds_ : list of (ndarray, ndarray)
        Held-out folds over the stacked rows (source first).
    fold_models_ : list
        The policy learned without each fold.
    held_out_ : ndarray of shape (n_S + n_T, K)
        The held-out assignment ``value_`` evaluates: for each stacked row of the data (source
        first), the action probabilities of the policy learned without its fold (rows that the
        value estimator trimmed take the mean of the fold policies).
    objective_ : {"target", "source"}
        The objective used (``objective``, or the one ``"auto"`` picked).
    objective_choice_ : dict
        ``{"target": Estimate, "source": Estimate, "difference": Estimate, "reason": str}``
        with ``objective="auto"`` (held-out target values of both objectives and their paired
        difference source minus target); ``{"reason": ...}`` otherwise.
    feature_names_in_ : ndarray of str

    Notes
    -----
    Larger outcomes are better; negate ``y`` for harmful outcomes. Overlap is handled by the
    value estimator: with ``TargetPolicyValue(on_poor_overlap="trim")`` the policy is learned and
    evaluated on the overlap region, and ``value_`` is named accordingly. ``estimate()`` returns
    ``value_`` with the two-sample bootstrap interval (the default) or its influence interval
    (``inference="influence"``); the module docstring says why and gives their coverage. The
    nuisance models are those of ``value``. The estimates depend on row order only through the
    random fold splits; the held-out value follows its split more than a
    cross-fitted value estimate does, since each fold's policy is learned on the other folds
    (in a simulated example with 300 source and 300 target rows, its SD over seeds was about
    0.6 of its standard error). With ``objective="auto"`` the reported ``value_`` is the held-out
    value of the chosen objective, so it is slightly optimistic by the selection; the bootstrap
    holds the choice fixed, as it holds the fold policies.
    """

    _nuisance_slots = {}
    _row_order_dependent = True
    _default_inference = "bootstrap"
    _bootstrap_ci = "normal"
    _tests_null = False
    _label = "Target policy learner"
    _estimand = "learned policy value (held-out)"

    def __init__(self, value=None, policy="linear", depth=2, min_samples_leaf=5, n_jobs=-1,
                 l2=1e-3, temperature=1.0, hidden_units=16, learning_rate=0.05, max_iter=500,
                 deterministic=True, objective="target", cv=2, random_state=None):
        self.value = value
        self.policy = policy
        self.depth = depth
        self.min_samples_leaf = min_samples_leaf
        self.n_jobs = n_jobs
        self.l2 = l2
        self.temperature = temperature
        self.hidden_units = hidden_units
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.deterministic = deterministic
        self.objective = objective
        self.cv = cv
        self.random_state = random_state

    def _check_params(self):
        if self.policy not in POLICY_CLASSES:
            raise ValueError(f"policy must be one of {POLICY_CLASSES}; got {self.policy!r}")
        if self.value is not None and not isinstance(self.value, TargetPolicyValue):
            raise TypeError(f"value must be a TargetPolicyValue or None; got "
                            f"{type(self.value).__name__}")
        if not (isinstance(self.objective, str) and self.objective in OBJECTIVES):
            raise ValueError(f"objective must be one of {OBJECTIVES}; got {self.objective!r}")
        if self.depth not in (1, 2):
            raise ValueError(f"depth must be 1 or 2; got {self.depth!r}")
        for name in ("min_samples_leaf", "hidden_units", "max_iter"):
            check_positive_int(getattr(self, name), name)
        check_n_jobs(self.n_jobs)
        if isinstance(self.cv, numbers.Integral):
            check_positive_int(self.cv, "cv", minimum=2)
        for name in ("temperature", "learning_rate"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name} must be positive; got {getattr(self, name)!r}")
        if not float(self.l2) >= 0:
            raise ValueError(f"l2 must be >= 0; got {self.l2!r}")

    def _fit_policy(self, X, gamma, seed, n_jobs=None, orders=None):
        if self.policy == "tree":
            tree, _ = fit_policy_tree(X, gamma, depth=self.depth,
                                      min_samples_leaf=self.min_samples_leaf,
                                      n_jobs=self.n_jobs if n_jobs is None else n_jobs,
                                      orders=orders)
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

    def fit(self, X, y=None, treatment=None, *args, X_target=None, covariates=None):
        """Fit the value estimator, the held-out evaluation and the final policy.

        Parameters and errors are those of :meth:`TargetPolicyValue.fit`:
        ``fit(X, y, treatment, X_target=..., covariates=None)``. Returns ``self``.
        """
        self._check_params()
        return self._fit_data(policy_data(self, X, y, treatment, args, X_target, covariates))

    def _fit(self, data):
        value = clone(self.value) if self.value is not None else TargetPolicyValue()
        if value.random_state is None:
            value.set_params(random_state=seed_int(self.seed_for("value")))
        if value.n_jobs is None:
            value.set_params(n_jobs=self.n_jobs)
        # the stacked rows are sorted once (every tree search reads its rows' orders from
        # them); with threads, beside the value fit, which needs no more than one core
        stacked = np.vstack([data.Xs, data.Xt]) if self.policy == "tree" else None
        with ThreadPoolExecutor(max_workers=1) as pool:
            sorting = pool.submit(sort_orders, stacked) if self._tree_threads() else None
            self.value_estimator_ = value._fit_data(data)
        self.arms_ = value.arms_
        self.n_features_in_ = value.n_features_in_
        self.feature_names_in_ = value.feature_names_in_
        X, gamma, is_target = value.score_matrix()
        self.folds_ = make_folds(self.cv, X.shape[0], stratify=is_target,
                                 groups=value.score_units_,
                                 random_state=self.seed_for("heldout_folds"))
        n_s = int(np.sum(~is_target))
        fixed = self.objective != "auto"
        candidates = (self.objective,) if fixed else ("target", "source")
        orders = None
        if stacked is not None:  # trimming to the overlap region leaves fewer rows to sort
            orders = (sorting.result() if sorting is not None and X.shape == stacked.shape
                      else sort_orders(X))
        held = {obj: self._held_out(value, obj, X, gamma, n_s, orders, final=fixed)
                for obj in candidates}
        if self.objective == "auto":
            diff = contrast(held["source"][0], held["target"][0],
                            name="held-out value, source minus target objective")
            chosen = "source" if diff.value > diff.std_error else "target"
            reason = (f"auto: held-out target value {held[chosen][0].value:.4g} for "
                      f"{chosen!r} vs {held[_other(chosen)][0].value:.4g} for "
                      f"{_other(chosen)!r} (difference source - target {diff.value:.3g}, "
                      f"SE {diff.std_error:.3g}; 'source' needs a difference above one SE)")
            self.objective_choice_ = {"target": held["target"][0], "source": held["source"][0],
                                      "difference": diff, "reason": reason}
        else:
            chosen = self.objective
            self.objective_choice_ = {"reason": f"fixed: objective={chosen!r}"}
        self.objective_ = chosen
        value_, self.fold_models_, held_out, final = held[chosen]
        self.held_out_ = self._per_data_row(value, data, held_out)
        self.value_ = value_.copy()
        self.value_.details["objective"] = self.objective_choice_["reason"]
        if final is None:
            X_fit, gamma_fit = self._objective_rows(value, chosen, X, gamma)
            final = self._fit_policy(X_fit, gamma_fit, self._final_seed(chosen),
                                     orders=self._fit_orders(orders, X_fit))
        self.policy_model_ = final

    def _tree_threads(self):
        """Whether the tree policy's work runs beside other work on threads (``n_jobs``)."""
        return self.policy == "tree" and self.n_jobs not in (None, 1)

    @staticmethod
    def _objective_rows(value, objective, X, gamma):
        """Rows and rewards ``objective`` learns on: the stacked rows with the target score
        matrix, or the source rows with their AIPW scores."""
        return (X, gamma) if objective == "target" else value.source_score_matrix()

    @staticmethod
    def _fit_orders(orders, X_fit):
        """The orders of an objective's rows (the first ``len(X_fit)`` stacked rows), or None."""
        return None if orders is None else subset_orders(orders, np.arange(X_fit.shape[0]))

    def _final_seed(self, objective):
        """Seed of the policy learned on all rows for ``objective`` (after the folds')."""
        return seed_int(child_seed(self._policy_seeds(objective), len(self.folds_)))

    def _policy_seeds(self, objective):
        return self.seed_for("policy" if objective == "target" else f"policy_{objective}")

    def _held_out(self, value, objective, X, gamma, n_s, orders, final=False):
        """Held-out target-DR value of the policies learned on ``objective`` without each fold,
        those fold policies, the held-out assignment and (with ``final``) the policy learned on
        all rows, else None. ``X, gamma``: the stacked rows and target score matrix; ``orders``:
        the stacked rows sorted by each covariate (tree policies, else None), from which each
        search reads its rows' orders."""
        X_fit, gamma_fit = self._objective_rows(value, objective, X, gamma)
        fit_orders = self._fit_orders(orders, X_fit)
        jobs = [(X_fit, gamma_fit, self._final_seed(objective), fit_orders)] if final else []
        seeds = self._policy_seeds(objective)
        held_out = np.empty((X.shape[0], self.arms_.size))
        trains = [train[train < n_s] if objective == "source" else train
                  for train, _ in self.folds_]
        if orders is not None:  # a tree search reads the orders of increasing rows
            trains = [np.sort(train) for train in trains]
        jobs += [(X_fit[train], gamma_fit[train], seed_int(child_seed(seeds, k)),
                  None if orders is None else subset_orders(fit_orders, train))
                 for k, train in enumerate(trains)]
        # tree searches (compiled, releasing the GIL) run side by side, one thread each; the
        # largest (all rows) is dispatched first
        side_by_side = self._tree_threads()
        models = Parallel(n_jobs=self.n_jobs if side_by_side else 1, prefer="threads")(
            delayed(self._fit_policy)(*job, n_jobs=1 if side_by_side else None, orders=rows)
            for *job, rows in jobs)
        final_model = models.pop(0) if final else None
        for model, (_, test) in zip(models, self.folds_, strict=True):
            held_out[test] = self._deploy(model, X[test])
        name = self._estimand
        if value.estimand_name() != value._estimand:
            name = f"{name} in the overlap region"
        return (value.estimate_matrices(held_out[:n_s], held_out[n_s:], "dr", name=name),
                models, held_out, final_model)

    def _per_data_row(self, value, data, held_out):
        """The held-out assignment over the stacked rows of the data as given. Rows that the
        value estimator trimmed trained no fold policy; they take the fold policies' mean."""
        if value.score_units_ is None:
            return held_out
        X = np.vstack([data.Xs, data.Xt])
        out = np.mean([self._deploy(model, X) for model in self.fold_models_], axis=0)
        out[value.score_units_] = held_out
        return out

    def _replicate(self, target):
        return _HeldOutValue(self.value_estimator_, self.held_out_)

    def _point_estimate(self, target=None):
        return self.value_.value

    def _influence_estimate(self, target=None):
        return self.value_.copy()

    def _details(self):
        return {**self.value_estimator_._details(), "objective": self.objective_choice_["reason"]}

    def _check_X(self, X):
        check_is_fitted(self, "policy_model_")
        if isinstance(X, pd.DataFrame) and self.data_.is_frame and \
                list(map(str, X.columns)) != list(self.feature_names_in_):
            raise ValueError(f"X columns {list(map(str, X.columns))} differ from the fitted "
                             f"covariates {list(self.feature_names_in_)}")
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

    def _tree(self):
        check_is_fitted(self, "policy_model_")
        if self.policy != "tree":
            raise ValueError(f"the learned policy is a {self.policy!r} rule, not a tree")
        return self.policy_model_.tree

    def _names(self, feature_names):
        names = list(self.feature_names_in_ if feature_names is None else feature_names)
        if len(names) != self.n_features_in_:
            raise ValueError(f"feature_names has {len(names)} entries; the policy was fitted "
                             f"with {self.n_features_in_} covariates")
        return names

    def export_text(self, feature_names=None, decimals=3):
        """The learned tree (``policy="tree"``) as indented text with the covariate names
        (``feature_names``, default ``feature_names_in_``) and the arm labels, one line per node
        as ``sklearn.tree.export_text``."""
        tree = self._tree()
        return export_text(tree, self._names(feature_names), list(self.arms_), decimals=decimals)

    def plot_tree(self, ax=None, feature_names=None, decimals=3):
        """Draw the learned tree (``policy="tree"``): split nodes show ``name <= threshold``
        (left branch true), leaves the recommended arm. Returns the matplotlib Axes."""
        from causalkit.policy.plots import plot_policy_tree

        tree = self._tree()
        return plot_policy_tree(tree, self._names(feature_names), list(self.arms_), ax=ax,
                                decimals=decimals)

    def plot(self, ax=None, features=(0, 1), **estimate_kwargs):
        """Policy map: the target rows on two covariates (``features``, column indices),
        coloured by the arm the learned policy assigns, titled with the held-out value and the
        interval of :meth:`estimate` (``estimate_kwargs``; by default the bootstrap's).
        Returns the matplotlib Figure."""
        from causalkit.policy.plots import plot_policy_map

        check_is_fitted(self, "policy_model_")
        result = self.estimate(**estimate_kwargs)
        lo, hi = result.conf_int()
        title = (f"held-out target value {result.value:.3g} "
                 f"[{lo:.3g}, {hi:.3g}] ({100 * (1 - result.alpha):g}% CI)")
        if self.n_features_in_ == 1:
            features = (0, 0)
        return plot_policy_map(self, self.value_estimator_.X_target_, features=features,
                               feature_names=list(self.feature_names_in_), arms=self.arms_,
                               ax=ax, title=title).figure

    def policy_value(self, X=None, y=None, treatment=None, *args, X_target=None,
                     covariates=None, method="dr"):
        """Target value of the learned policy.

        Without data, the held-out estimate ``value_``. With fresh samples (not used for
        learning), given as to :meth:`fit`, a clone of the value estimator is fitted on them and
        evaluates the final policy there, which is the honest check of a deployed rule.
        """
        given = [v is not None for v in (X, y, treatment, X_target)]
        if not any(given) and not args:
            check_is_fitted(self, "value_")
            return self.value_
        check_is_fitted(self, "policy_model_")
        if not all(given):
            raise ValueError("policy_value needs all of X, y, treatment and X_target (or none "
                             "of them)")
        evaluator = clone(self.value_estimator_).fit(X, y, treatment, *args, X_target=X_target,
                                                     covariates=covariates)
        if not np.array_equal(evaluator.arms_, self.arms_):
            raise ValueError(f"the evaluation sample has arms {evaluator.arms_.tolist()}; the "
                             f"policy was learned with {self.arms_.tolist()}")
        return evaluator.estimate(self, method)
