"""Speed of target-population policy evaluation and learning (n_S = n_T = 50,000, p = 10).

Prints: TargetPolicyValue.fit + 100 policy evaluations (target < 20 s), the linear
TargetPolicyLearner fit (target < 30 s), the exact depth-2 tree learner and the exact tree search
alone on its stacked score matrix (and the nuisance part of the tree learner: its value fit), and
econml DRPolicyTree fit time on the same source data with
the same nuisance models (least squares outcome, logistic propensity, 2 folds, depth 2), with the
ratios. Pass ``--n`` for another size.

The tree ratio compares different work. econml's DRPolicyTree grows a greedy CART-like tree: the
root split is fixed by a criterion over one pass per feature, then each child is split once. The
tree learner here runs the exact global search over all depth-2 trees (every root split, both
children's best splits on every feature: :math:`2p^2n` segment-tree insertions against about
:math:`pn` sorted scans), and runs it three times: once on each of the ``cv=2`` held-out folds
(for the honest held-out ``value_``) and once on all rows; the stacked score matrix has
:math:`n_S + n_T` rows. The learner's default searches the root features in one thread per core
(``n_jobs=-1``); econml's tree has no such option, so the one-thread learner and search are
printed too. The compiled kernel's load time (from numba's on-disk cache, or its compilation on
a first run) is printed separately.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from scipy.special import expit
from sklearn.linear_model import LinearRegression, LogisticRegression

from causalkit.policy import TargetPolicyLearner, TargetPolicyValue
from causalkit.policy.trees import fit_policy_tree


def make_data(n, p=10, seed=0):
    rng = np.random.default_rng(seed)
    shift = np.r_[0.5, 0.5, np.zeros(p - 2)]
    Xs = rng.normal(size=(n, p))
    Xt = rng.normal(size=(n, p)) + shift
    a = rng.binomial(1, expit(0.5 * Xs[:, 0] - 0.5 * Xs[:, 1]))
    tau = 0.5 + Xs[:, 0] - Xs[:, 2]
    y = 1 + Xs[:, 0] + 0.5 * Xs[:, 1] + a * tau + rng.normal(size=n)
    return Xs, a, y, Xt


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--policies", type=int, default=100)
    args = parser.parse_args(argv)
    Xs, a, y, Xt = make_data(args.n)
    p = Xs.shape[1]
    start = time.perf_counter()
    fit_policy_tree(Xs[:50], np.c_[y[:50], -y[:50]], depth=2)
    kernel_s = time.perf_counter() - start
    directions = np.random.default_rng(1).normal(size=(args.policies, p))

    start = time.perf_counter()
    value = TargetPolicyValue(cv=5, random_state=0).fit(Xs, y, a, X_target=Xt)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    for d in directions:
        value.estimate(lambda X, d=d: (X @ d > 0).astype(int))
    eval_s = time.perf_counter() - start

    start = time.perf_counter()
    TargetPolicyLearner(TargetPolicyValue(cv=5, random_state=0), policy="linear",
                        random_state=0).fit(Xs, y, a, X_target=Xt)
    learner_s = time.perf_counter() - start

    tree_value = TargetPolicyValue(outcome_model=LinearRegression(),
                                   propensity_model=LogisticRegression(max_iter=1000), cv=2,
                                   random_state=0)
    start = time.perf_counter()
    tree_value.fit(Xs, y, a, X_target=Xt)
    nuisance_s = time.perf_counter() - start
    start = time.perf_counter()
    tree_learner = TargetPolicyLearner(tree_value, policy="tree", depth=2,
                                       random_state=0).fit(Xs, y, a, X_target=Xt)
    tree_s = time.perf_counter() - start
    start = time.perf_counter()
    TargetPolicyLearner(tree_value, policy="tree", depth=2, n_jobs=1,
                        random_state=0).fit(Xs, y, a, X_target=Xt)
    tree_one_s = time.perf_counter() - start
    X_stacked, gamma, _ = tree_learner.value_estimator_.score_matrix()
    start = time.perf_counter()
    fit_policy_tree(X_stacked, gamma, depth=2, n_jobs=1)
    search_s = time.perf_counter() - start
    start = time.perf_counter()
    fit_policy_tree(X_stacked, gamma, depth=2, n_jobs=-1)
    search_all_s = time.perf_counter() - start

    from econml.policy import DRPolicyTree

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DRPolicyTree(model_regression=LinearRegression(),
                     model_propensity=LogisticRegression(max_iter=1000), cv=2, max_depth=2,
                     random_state=0).fit(y, a, X=Xs)
    econml_s = time.perf_counter() - start

    total = fit_s + eval_s
    print(f"n_S = n_T = {args.n}, p = {p}")
    print(f"TargetPolicyValue.fit (cv=5):                 {fit_s:8.2f} s")
    print(f"{args.policies} policy evaluations:                     {eval_s:8.2f} s "
          f"({1000 * eval_s / args.policies:.1f} ms each)")
    print(f"fit + evaluations:                            {total:8.2f} s  (target < 20 s)")
    print(f"TargetPolicyLearner(policy='linear').fit:     {learner_s:8.2f} s  (target < 30 s)")
    print(f"econml DRPolicyTree(max_depth=2).fit:         {econml_s:8.2f} s")
    print(f"tree search kernel load (numba cache):        {kernel_s:8.2f} s")
    print(f"TargetPolicyLearner(policy='tree').fit:       {tree_s:8.2f} s  (cv=2, 3 searches, "
          f"n_jobs=-1: {os.cpu_count()} cores)")
    print(f"  the same with n_jobs=1:                     {tree_one_s:8.2f} s")
    print(f"  of which nuisances (value fit, cv=2):       {nuisance_s:8.2f} s")
    print(f"exact depth-2 search on {X_stacked.shape[0]} stacked rows:   {search_s:8.2f} s  "
          f"(1 thread; {search_all_s:.2f} s with n_jobs=-1)")
    print(f"ratio value fit / econml fit:                 {fit_s / econml_s:8.2f}")
    print(f"ratio tree learner / econml fit:              {tree_s / econml_s:8.2f}  (target <= 2)")
    print(f"  with n_jobs=1:                              {tree_one_s / econml_s:8.2f}")
    print(f"ratio one exact search / econml fit:          {search_s / econml_s:8.2f}  (1 thread)")
    print("  (exact global depth-2 search, 2 p^2 n insertions, vs econml's greedy tree, about")
    print("   p n sorted scans; the learner runs the search 3 times: 2 held-out folds + all rows)")
    print(f"ratio linear learner / econml fit:            {learner_s / econml_s:8.2f}")


if __name__ == "__main__":
    main()
