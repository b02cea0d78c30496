"""Speed of target-population policy evaluation and learning (n_S = n_T = 50,000, p = 10).

Prints: TargetPolicyValue.fit + 100 policy evaluations (target < 20 s), the linear
TargetPolicyLearner fit (target < 30 s), and, over ``--repeats`` interleaved runs (median, and
the range of the per-run ratios), the exact depth-2 tree learner, its value fit alone, the exact
tree search alone on its stacked score matrix, and econml's DRPolicyTree fit on the same source
data with the same nuisance models (least squares outcome, logistic propensity, 2 folds, depth
2). Pass ``--n`` for another size.

The tree ratio compares different work. econml's DRPolicyTree grows a greedy CART-like tree: the
root split is fixed by a criterion over one pass per feature, then each child is split once. The
tree learner here finds the global optimum over all depth-2 trees (every root split, both
children's best splits on every feature; branch and bound, :mod:`causalkit.policy.trees`, leaves
the printed share of the :math:`2p^2n` segment-tree insertions of the search without bounds),
and runs it three times: once on each of the ``cv=2`` held-out folds (for the honest held-out
``value_``) and once on all rows; the stacked score matrix has :math:`n_S + n_T` rows, and the
value fit also fits the domain model of the target. The learner sorts the stacked rows once
(every search reads its rows' orders from that sort) and runs the three searches side by side,
one thread each, on up to one thread per core (``n_jobs=-1``); econml's tree has no such
option, so the one-thread learner and search are printed too (with ``n_jobs`` the learner also
fits its value estimator's two folds side by side and sorts the stacked rows beside that fit).
The compiled kernel's load time (from numba's on-disk cache, or its compilation on a first run)
is printed separately. Then ``TargetPolicyValue``'s fit with its folds side by side against one
thread, with the default and the boosting domain model. Last, the default value and learner
fits (default nuisance models) with one BLAS thread, as the estimators fit
(``CausalEstimator._fit_blas_threads``), against the process's BLAS pool.
"""


from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from econml.policy import DRPolicyTree
from joblib import Parallel
from scipy.special import expit
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, LogisticRegression

from causalkit._base import fit_blas_threads
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue
from causalkit.policy.trees import (
    _prune,
    _prune_tolerance,
    _value_groups,
    fit_policy_tree,
    sort_orders,
)


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
    parser.add_argument("--repeats", type=int, default=5)
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
    X_stacked, gamma, _ = clone(tree_value).fit(Xs, y, a, X_target=Xt).score_matrix()

    def econml_fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            DRPolicyTree(model_regression=LinearRegression(),
                         model_propensity=LogisticRegression(max_iter=1000), cv=2, max_depth=2,
                         random_state=0).fit(y, a, X=Xs)

    def learner_fit(n_jobs):
        TargetPolicyLearner(tree_value, policy="tree", depth=2, n_jobs=n_jobs,
                            random_state=0).fit(Xs, y, a, X_target=Xt)

    runs = {
        "econml": econml_fit,
        "learner": lambda: learner_fit(-1),
        "learner_one": lambda: learner_fit(1),
        "value": lambda: clone(tree_value).set_params(n_jobs=-1).fit(Xs, y, a, X_target=Xt),
        "search": lambda: fit_policy_tree(X_stacked, gamma, depth=2, n_jobs=1),
    }
    seconds = {name: [] for name in runs}
    for _ in range(args.repeats):  # interleaved, so that drifts in machine speed hit all alike
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    seconds = {name: np.array(s) for name, s in seconds.items()}

    def ratio(name):
        r = seconds[name] / seconds["econml"]
        return f"{np.median(r):8.2f}  (range {r.min():.2f}-{r.max():.2f})"

    total = fit_s + eval_s
    print(f"n_S = n_T = {args.n}, p = {p}")
    print(f"TargetPolicyValue.fit (cv=5):                 {fit_s:8.2f} s")
    print(f"{args.policies} policy evaluations:                     {eval_s:8.2f} s "
          f"({1000 * eval_s / args.policies:.1f} ms each)")
    print(f"fit + evaluations:                            {total:8.2f} s  (target < 20 s)")
    print(f"TargetPolicyLearner(policy='linear').fit:     {learner_s:8.2f} s  (target < 30 s)")
    print(f"tree search kernel load (numba cache):        {kernel_s:8.2f} s")
    left = 100 * insertions_left(X_stacked, gamma)
    print(f"insertions left by the bounds:                {left:8.2f} %  (of the search without "
          f"bounds)")
    print(f"median of {args.repeats} interleaved runs:")
    print(f"econml DRPolicyTree(max_depth=2).fit:         {np.median(seconds['econml']):8.2f} s")
    print(f"TargetPolicyLearner(policy='tree').fit:       {np.median(seconds['learner']):8.2f} s"
          f"  (cv=2, 3 searches side by side, n_jobs=-1: "
          f"{os.cpu_count()} cores)")
    print(f"  the same with n_jobs=1:                     "
          f"{np.median(seconds['learner_one']):8.2f} s")
    print(f"  its value fit alone (cv=2, n_jobs=-1):      {np.median(seconds['value']):8.2f} s")
    print(f"exact depth-2 search on {X_stacked.shape[0]} stacked rows:   "
          f"{np.median(seconds['search']):8.2f} s  (1 thread)")
    print(f"ratio tree learner / econml fit:              {ratio('learner')}  (target <= 2)")
    print(f"  with n_jobs=1:                              {ratio('learner_one')}")
    print(f"  its value fit alone / econml fit:           {ratio('value')}")
    print(f"ratio one exact search / econml fit:          {ratio('search')}  (1 thread)")
    print("  (the learner runs the exact search 3 times: 2 held-out folds + all rows; econml's")
    print("   greedy tree runs once)")
    print(f"ratio linear learner / econml fit:            "
          f"{learner_s / np.median(seconds['econml']):8.2f}")
    value_threads(Xs, a, y, Xt, args.repeats)
    blas_threads(Xs, a, y, Xt, args.repeats)


def value_threads(Xs, a, y, Xt, repeats):
    """``TargetPolicyValue`` fits with its folds on one thread and side by side on every core
    (``n_jobs``), with the default models and with ``domain_model="boosting"`` (whose
    histogram gradient boosting runs its own OpenMP threads): interleaved runs, median."""
    print(f"TargetPolicyValue(cv=2).fit, n_jobs=-1 / n_jobs=1 ({repeats} interleaved runs):")
    for domain_model in (None, "boosting"):
        one, every = [], []
        for _ in range(repeats):
            for times, n_jobs in ((one, 1), (every, -1)):
                start = time.perf_counter()
                TargetPolicyValue(domain_model=domain_model, cv=2, n_jobs=n_jobs,
                                  random_state=0).fit(Xs, y, a, X_target=Xt)
                times.append(time.perf_counter() - start)
        print(f"  domain_model={domain_model!s:31s} {np.median(every):6.2f} s / "
              f"{np.median(one):6.2f} s = {np.median(np.array(every) / np.array(one)):.2f}")


def blas_threads(Xs, a, y, Xt, repeats):
    """The default fits (default nuisance models and policy) with one BLAS thread, as the
    estimators fit, against the process's BLAS pool (``causalkit._base.fit_blas_threads``):
    interleaved runs, median."""
    fits = {"TargetPolicyValue().fit": TargetPolicyValue,
            "TargetPolicyLearner().fit (linear)": TargetPolicyLearner,
            "TargetPolicyLearner(policy='tree').fit": lambda **kw: TargetPolicyLearner(
                policy="tree", **kw)}
    print(f"default fits, one BLAS thread (the default) / the process's pool "
          f"({repeats} interleaved runs):")
    for name, make in fits.items():
        one, pool = [], []
        for _ in range(repeats):
            for times, threads in ((one, 1), (pool, None)):
                with fit_blas_threads(threads):
                    start = time.perf_counter()
                    make(random_state=0).fit(Xs, y, a, X_target=Xt)
                    times.append(time.perf_counter() - start)
        print(f"  {name:40s} {np.median(one):6.2f} s / {np.median(pool):6.2f} s = "
              f"{np.median(np.array(one) / np.array(pool)):.2f}")


def insertions_left(X, gamma, min_leaf=5):
    """Share of the search's segment-tree insertions (2 p^2 n without bounds) that the bounds
    leave: the needed (root bin, side, child feature) cells, each holding about n / bins rows."""
    shifted = gamma - gamma.max(axis=1, keepdims=True)
    _, start, _ = _value_groups(X, sort_orders(X))
    _, _, need = _prune(start, shifted, min_leaf, _prune_tolerance(shifted),
                        Parallel(n_jobs=1))
    return float(np.mean(need))


if __name__ == "__main__":
    main()
