"""Where the learner's bootstrap SE is too large: refitted nuisances or re-learned policies.

In the ``policy-bootstrap`` study the learner's pipeline-bootstrap interval covered the learned
policy's true value in 0.995 of replications: the bootstrap SE is too large. The pipeline
bootstrap refits two things on every resample, the value estimator's nuisance models and the
policies (the fold policies behind the held-out ``value_``). This check takes them apart, on
each data set with the same number of resamples:

* ``pipeline``: the whole learner refitted on each resample (:func:`pipeline_bootstrap`; the
  learner's ``estimate(inference="bootstrap")`` when this check was run);
* ``policies fixed``: the nuisances refitted on the resample, the held-out assignment of every
  unit kept (each copy of a unit takes the action its fold policy gave it);
* ``nuisances fixed``: the score rows of the fitted value estimator resampled (units within each
  sample), the held-out folds redrawn over units and the fold policies re-learned on them, the
  value the mean of the resampled scores of the held-out assignment;
* ``influence``: the held-out ``value_`` interval (no resampling), on more data sets (the
  summary shows it also on the resampled data sets alone).

Each row of the CSV is one scheme on one data set: the held-out value's error against the
learned (final) policy's true target value, the SE, and whether the normal interval (estimate
± 1.96 SE) and, for the resampling schemes, the percentile interval hold the truth.

Design: the ``policy-bootstrap`` study's (the ``learning`` design under strong shift,
n_S = n_T = 1000, depth-2 tree, target objective, 2-fold cross-fitting) on data sets
``default_rng([910000, r])``, which no study or test uses: ``influence`` on 400 data sets, the
resampling schemes on the first 60, 100 resamples each (about 20 minutes on 2 cores).

Usage: ``python simulations/policy_bootstrap_variance_check.py [--quick]``; writes
``simulations/results/policy/policy_bootstrap_variance_check.csv`` and prints the summary.
"""
import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.base import clone
from threadpoolctl import threadpool_limits

from causalkit._base import _Refit
from causalkit.inference import _stratified_indices, bootstrap
from causalkit.nuisance import make_folds
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps

OUT = Path(__file__).parent / "results" / "policy" / "policy_bootstrap_variance_check.csv"
SHIFT = dgps.LEARNING_SHIFTS["strong"]


def _learner(r, n):
    rng = np.random.default_rng([910000, r])
    d = dgps.simulate("learning", rng, n_source=n, n_target=n, shift=SHIFT)
    fit = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", depth=2,
                              random_state=int(rng.integers(2**31 - 1))).fit(
        d["X_source"], d["y"], d["treatment"], X_target=d["X_target"])
    return fit, dgps.true_value("learning", fit.predict_proba, SHIFT, n_mc=200_000)


def _row(scheme, r, value, truth, se, replicates=None):
    row = {"scheme": scheme, "dataset": r, "error": value - truth, "std_error": se,
           "covered_normal": float(abs(value - truth) <= 1.959964 * se)}
    if replicates is not None:
        lo, hi = np.quantile(replicates, [0.025, 0.975])
        row["covered_percentile"] = float(lo <= truth <= hi)
    return row


def pipeline_bootstrap(fit, n_boot, random_state):
    """The whole learner refitted on each resample (policies and nuisances; the learner's
    bootstrap before it held the fold policies fixed), percentile interval."""
    return bootstrap(_Refit(fit, None), fit.data_, n_boot=n_boot, random_state=random_state,
                     strata=fit.data_.strata, point=fit.value_.value)


def _policies_fixed(fit, rng, n_boot):
    """Nuisances refitted on each resample; every copy keeps its unit's held-out action."""
    X, gamma, is_target = fit.value_estimator_.score_matrix()
    held = np.empty_like(gamma)
    for (_, test), model in zip(fit.folds_, fit.fold_models_):
        held[test] = fit._deploy(model, X[test])
    data, n_s = fit.data_, int(np.sum(~is_target))
    out = []
    for _ in range(n_boot):
        idx = _stratified_indices(rng, data.strata, data.n_rows)
        value = clone(fit.value_estimator_)._fit_data(data.take(idx))
        m = int(np.sum(idx < n_s))
        out.append(value.estimate_matrices(held[idx][:m], held[idx][m:], "dr").value)
    return np.array(out)


def _nuisances_fixed(fit, rng, n_boot):
    """Score rows resampled (units within each sample), fold policies re-learned on them."""
    X, gamma, is_target = fit.value_estimator_.score_matrix()
    data = fit.data_
    out = []
    for _ in range(n_boot):
        idx = _stratified_indices(rng, data.strata, data.n_rows)
        Xb, gb = X[idx], gamma[idx]
        held = np.empty_like(gb)
        for train, test in make_folds(fit.cv, idx.size, stratify=is_target[idx], groups=idx,
                                      random_state=int(rng.integers(2**31 - 1))):
            held[test] = fit._deploy(fit._fit_policy(Xb[train], gb[train], 0), Xb[test])
        # rows keep the sample sizes, so the mean of the stacked scores is the target-DR value
        out.append(float(np.mean(np.sum(held * gb, axis=1))))
    return np.array(out)


def _resampled(r, n, n_boot):
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit, truth = _learner(r, n)
        value = fit.value_.value
        boot = pipeline_bootstrap(fit, n_boot, np.random.SeedSequence([910001, r]))
        rows = [_row("pipeline", r, value, truth, boot.std_error, boot.replicates)]
        for scheme, draw, key in (("policies fixed", _policies_fixed, 910002),
                                  ("nuisances fixed", _nuisances_fixed, 910003)):
            reps = draw(fit, np.random.default_rng([key, r]), n_boot)
            rows.append(_row(scheme, r, value, truth, reps.std(ddof=1), reps))
        return rows


def _influence(r, n):
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit, truth = _learner(r, n)
        return [_row("influence", r, fit.value_.value, truth, fit.value_.std_error)]


def summary(table):
    """Per scheme: data sets, SD and mean of the error, mean SE, SD of error / SE, coverage."""
    table = table.assign(z=table["error"] / table["std_error"])
    return table.groupby("scheme", sort=False).agg(
        datasets=("error", "size"), sd_error=("error", "std"), mean_error=("error", "mean"),
        mean_se=("std_error", "mean"), sd_z=("z", "std"), coverage_normal=("covered_normal", "mean"),
        coverage_percentile=("covered_percentile", "mean"))


def main(quick=False):
    n, n_boot, n_resampled, n_influence = (300, 10, 2, 4) if quick else (1000, 100, 60, 400)
    jobs = [delayed(_resampled)(r, n, n_boot) for r in range(n_resampled)]
    jobs += [delayed(_influence)(r, n) for r in range(n_influence)]
    table = pd.DataFrame([row for rows in Parallel(n_jobs=2)(jobs) for row in rows])
    if not quick:
        table.to_csv(OUT, index=False)
    same = table[(table["scheme"] == "influence") & (table["dataset"] < n_resampled)]
    shown = pd.concat([table, same.assign(scheme="influence, resampled data sets only")])
    print(summary(shown).round(3).to_string())
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run that writes nothing")
    main(parser.parse_args().quick)
