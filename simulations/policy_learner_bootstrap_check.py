"""Which interval should the learner's held-out value report: the influence interval, or a
two-sample bootstrap that refits the value estimator with the fold policies held fixed?

``TargetPolicyLearner.value_`` is the target-DR value of the held-out assignment: every stacked
row takes the action of the policy learned without its fold. ``estimate(inference="bootstrap")``
resamples source rows within arms and target rows within the target, refits the value
estimator's nuisances on each resample and evaluates the same held-out assignment (every copy of
a unit takes its unit's action). It reports the normal interval with the bootstrap SE; the
percentile interval is shown beside it.

Design: the ``policy-bootstrap`` study's (``learning``, n_S = n_T = 1000, depth-2 tree, target
objective, ``TargetPolicyValue(cv=2)``) under no, moderate and strong shift
(``dgps.LEARNING_SHIFTS``), 200 data sets each, ``default_rng([996000 + 10 * s, r])`` for shift
``s`` (0 strong, 1 none, 2 moderate), which no study or test uses; 100 resamples per data set.
Truths by Monte Carlo (200,000 draws): the learned (final) policy's target value, and the mean
of the fold policies' values, which is what ``value_`` estimates. The gap between the two is
the final policy's gain from learning on every row.

Rows are appended per shift to
``simulations/results/policy/policy_learner_bootstrap_check_rows.csv`` (a rerun adds only the data
sets not there yet) and summarised in
``simulations/results/policy/policy_learner_bootstrap_check.csv``.

Usage: ``python simulations/policy_learner_bootstrap_check.py [JOBS]`` (about 20 minutes on
2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
from _check import run_cells
from threadpoolctl import threadpool_limits

from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps

SEED = 996000
REPS = 200
N_BOOT = 100
N_MC = 200_000
SHIFTS = ("strong", "none", "moderate")
FOLDER = Path(__file__).parent / "results" / "policy"
ROWS = FOLDER / "policy_learner_bootstrap_check_rows.csv"
OUT = FOLDER / "policy_learner_bootstrap_check.csv"
Z = 1.959964


def replicate(s, rep):
    warnings.simplefilter("ignore")
    shift = dgps.LEARNING_SHIFTS[SHIFTS[s]]
    rng = np.random.default_rng([SEED + 10 * s, rep])
    data = dgps.simulate("learning", rng, n_source=1000, n_target=1000, shift=shift)
    with threadpool_limits(1):
        fit = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", depth=2,
                                  random_state=int(rng.integers(2**31 - 1))).fit(
            data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
        boot = fit.estimate(inference="bootstrap", n_boot=N_BOOT, progress=False,
                            random_state=np.random.SeedSequence([SEED + 1, s, rep]))
    truth = dgps.true_value("learning", fit.predict_proba, shift, n_mc=N_MC)
    folds = np.mean([dgps.true_value("learning", lambda X, m=m: fit._deploy(m, X), shift,
                                     n_mc=N_MC) for m in fit.fold_models_])
    lo, hi = boot.conf_int(method="percentile")
    value = fit.value_.value
    return {"shift": SHIFTS[s], "rep": rep, "error": value - truth, "error_folds": value - folds,
            "influence_se": fit.value_.std_error, "bootstrap_se": boot.std_error,
            "percentile_lo": lo - truth, "percentile_hi": hi - truth}


def summarise(rows):
    def covers(error, se):
        return error.abs() <= Z * se

    rows = rows.assign(
        influence=covers(rows.error, rows.influence_se),
        bootstrap=covers(rows.error, rows.bootstrap_se),
        percentile=(rows.percentile_lo <= 0) & (rows.percentile_hi >= 0),
        influence_folds=covers(rows.error_folds, rows.influence_se),
        bootstrap_folds=covers(rows.error_folds, rows.bootstrap_se),
        gap=rows.error - rows.error_folds)
    table = rows.groupby("shift", sort=False).agg(
        reps=("rep", "size"), sd_error=("error", "std"),
        mean_influence_se=("influence_se", "mean"), mean_bootstrap_se=("bootstrap_se", "mean"),
        coverage_influence=("influence", "mean"), coverage_bootstrap=("bootstrap", "mean"),
        coverage_percentile=("percentile", "mean"),
        coverage_influence_folds=("influence_folds", "mean"),
        coverage_bootstrap_folds=("bootstrap_folds", "mean"),
        gap_mean=("gap", "mean"), gap_sd=("gap", "std"))
    return table.reset_index()


def main(jobs=2):
    run_cells([{"shift": name} for name in SHIFTS], replicate, summarise, reps=REPS,
              rows_path=ROWS, out_path=OUT, jobs=jobs)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
