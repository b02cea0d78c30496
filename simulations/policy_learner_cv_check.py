"""Does a finer held-out split make the learner's default interval cover? No.

The influence interval of ``TargetPolicyLearner.value_`` covered the learned (final) policy's
true target value in 0.912 of 400 data sets (``policy_bootstrap_variance_check.py``). One
suspect is the 2-fold held-out evaluation: each fold policy is learned on half the rows, so it
is worse and further from the final policy than one learned on nearly all of them. This check
refits the learner with ``cv`` = 2 (the default), 5 and 10 held-out folds on the same data sets
and compares the error of ``value_`` against the final policy's true value with its SE. It also
takes the error apart: ``value_`` estimates the mean value of the fold policies (each target
row is assigned by the policy learned without its fold, and the folds hold equal shares of the
target), so the table gives the coverage of that mean (``coverage_folds``, with its SD of errors
over SEs) and the gap between it and the final policy's value (``gap``: mean and SD).

Design: the ``policy-bootstrap`` study's (``learning`` design under strong shift,
n_S = n_T = 1000, depth-2 tree, target objective, value estimator with 2 nuisance folds), on
data sets ``default_rng([920000, r])``, r < 400, which no study or test uses; truths by Monte
Carlo (200,000 draws). About 5 minutes on 2 cores.

Usage: ``python simulations/policy_learner_cv_check.py [--quick]``; writes
``simulations/results/policy/policy_learner_cv_check.csv`` (one row per data set and ``cv``)
and prints the summary.
"""
import argparse
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps

OUT = Path(__file__).parent / "results" / "policy" / "policy_learner_cv_check.csv"
SHIFT = dgps.LEARNING_SHIFTS["strong"]
CVS = (2, 5, 10)


def one(r, cv, n):
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rng = np.random.default_rng([920000, r])
        d = dgps.simulate("learning", rng, n_source=n, n_target=n, shift=SHIFT)
        fit = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", depth=2, cv=cv,
                                  random_state=int(rng.integers(2**31 - 1))).fit(
            d["X_source"], d["y"], d["treatment"], X_target=d["X_target"])
        truth = dgps.true_value("learning", fit.predict_proba, SHIFT, n_mc=200_000)
        folds = np.mean([dgps.true_value("learning", partial(fit._deploy, model), SHIFT,
                                         n_mc=200_000) for model in fit.fold_models_])
        return {"dataset": r, "cv": cv, "error": fit.value_.value - truth,
                "std_error": fit.value_.std_error, "error_folds": fit.value_.value - folds,
                "gap": folds - truth}


def summary(table):
    """Per ``cv``: data sets, mean and SD of the error, mean SE, SD of error / SE and coverage
    of the normal interval, against the final policy's value and against the fold policies'
    mean value, and the gap between the two values."""
    table = table.assign(z=table["error"] / table["std_error"],
                         z_folds=table["error_folds"] / table["std_error"])
    table = table.assign(covered=(table["z"].abs() <= 1.959964).astype(float),
                         covered_folds=(table["z_folds"].abs() <= 1.959964).astype(float))
    return table.groupby("cv").agg(
        datasets=("error", "size"), mean_error=("error", "mean"), sd_error=("error", "std"),
        mean_se=("std_error", "mean"), sd_z=("z", "std"), coverage=("covered", "mean"),
        sd_z_folds=("z_folds", "std"), coverage_folds=("covered_folds", "mean"),
        mean_gap=("gap", "mean"), sd_gap=("gap", "std"))


def main(quick=False):
    n, reps = (300, 4) if quick else (1000, 400)
    rows = Parallel(n_jobs=2)(delayed(one)(r, cv, n) for r in range(reps) for cv in CVS)
    table = pd.DataFrame(rows)
    if not quick:
        table.to_csv(OUT, index=False)
    print(summary(table).round(4).to_string())
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run that writes nothing")
    main(parser.parse_args().quick)
