"""Why the learner's pipeline bootstrap under-covers: copies of a unit split across folds.

``TargetPolicyLearner.estimate(inference="bootstrap")`` refits the whole learner on resamples
drawn with replacement. Inside a resample the cross-fitting folds (the value estimator's nuisance
folds and the learner's held-out folds) are drawn over rows, so copies of one unit can sit in a
training fold and in the fold it is evaluated on: the held-out value of a resample is then partly
in-sample, and optimistic. This check measures, per data set, the mean of the bootstrap
replicates minus the full-sample held-out value, in units of the bootstrap SE, twice: with the
package's folds (``package``) and with folds that keep every copy of a unit in one fold
(``grouped``, patched in here; the package has no such option yet). Unbiased replicates give
about 0; an upward shift moves the percentile interval above the truth.

Design: the ``learning`` design under strong shift, n_S = n_T = 1000, depth-2 tree, 2-fold
cross-fitting, the data sets of the ``policy-bootstrap`` study's first replications
(``default_rng([2024, r])``), 60 resamples each. Prints the result for both fold schemes.

Usage: ``python simulations/policy_bootstrap_fold_check.py [DATASETS]`` (12 data sets: about
2 minutes per scheme).
"""
import sys
import warnings

import numpy as np

import causalkit.policy._data as data_module
import causalkit.policy.learner as learner_module
import causalkit.policy.value as value_module
from causalkit.nuisance import make_folds
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps, studies

N_BOOT = 60


def _grouped(ids, k, seed):
    """``k`` folds that keep every copy of an id in one fold."""
    unique = np.unique(ids)
    label = np.random.default_rng(seed).permutation(unique.size) % k
    fold = label[np.searchsorted(unique, ids)]
    return [(np.flatnonzero(fold != j), np.flatnonzero(fold == j)) for j in range(k)]


def group_copies():
    """Patch the two-sample container and both fold makers so that a resample's folds keep
    the copies of a unit together; returns the state to clear before each full-sample fit."""
    state = {}
    take, value_folds = data_module.TwoSampleData.take, value_module.TargetPolicyValue._folds

    def tracked_take(self, idx):
        idx = np.asarray(idx)
        state["source"] = idx[idx < self.n_source]
        state["target"] = idx[idx >= self.n_source]
        return take(self, idx)

    def value_grouped(self, a_idx, n_target):
        if not state:
            return value_folds(self, a_idx, n_target)
        return _grouped(state["source"], self.cv, 1), _grouped(state["target"], self.cv, 2)

    def learner_grouped(cv, n, stratify=None, random_state=None):
        if not state:
            return make_folds(cv, n, stratify=stratify, random_state=random_state)
        return _grouped(np.r_[state["source"], state["target"]], cv, 3)

    data_module.TwoSampleData.take = tracked_take
    value_module.TargetPolicyValue._folds = value_grouped
    learner_module.make_folds = learner_grouped
    return state


def shifts(n_sets, state):
    """(replicate mean - point) / SE for each data set."""
    shift = dgps.LEARNING_SHIFTS["strong"]
    out = []
    for r in range(n_sets):
        state.clear()
        data = studies._design(np.random.default_rng([2024, r]), design="learning", shift=shift,
                               truth=0.0, n_source=1000, n_target=1000)
        fit = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", depth=2,
                                  random_state=data["seed"]).fit(
            data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
        boot = fit.estimate(inference="bootstrap", n_boot=N_BOOT, progress=False)
        out.append((boot.replicates.mean() - boot.value) / boot.std_error)
    return np.array(out)


def main(n_sets=12):
    warnings.simplefilter("ignore")
    package = shifts(n_sets, {})
    grouped = shifts(n_sets, group_copies())
    for name, d in (("package folds", package), ("grouped folds", grouped)):
        print(f"{name}: (replicate mean - point) / SE = {d.mean():.3f} "
              f"+- {d.std(ddof=1) / np.sqrt(d.size):.3f} over {d.size} data sets")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 12)
