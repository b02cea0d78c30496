"""Why the learner's pipeline bootstrap under-covered: copies of a unit split across folds.

The pipeline bootstrap (:func:`policy_bootstrap_variance_check.pipeline_bootstrap`; the
learner's ``estimate(inference="bootstrap")`` when this check was run) refits the whole learner
on resamples drawn with replacement. If the cross-fitting folds inside a resample (the value
estimator's nuisance folds and the learner's held-out folds) are drawn over rows, copies of one
unit can sit in a training fold and in the fold it is evaluated on: the held-out value of a
resample is then partly in-sample, and optimistic. The package's folds keep the copies
together: the containers' ``take`` carries the unit of every row and ``make_folds(groups=...)``
splits units. This check
measures, per data set, the mean of the bootstrap replicates minus the full-sample held-out
value, in units of the bootstrap SE, twice: with the package's folds (``units``) and with folds
over rows (``rows``: ``groups`` dropped, patched in here, the former behaviour). Unbiased
replicates give about 0; an upward shift moves the percentile interval above the truth.

Design: the ``learning`` design under strong shift, n_S = n_T = 1000, depth-2 tree, 2-fold
cross-fitting, the data sets of the ``policy-bootstrap`` study's first replications
(``default_rng([2024, r])``), 60 resamples each. Prints the result for both fold schemes.

Usage: ``python simulations/policy_bootstrap_fold_check.py [DATASETS]`` (12 data sets: about
2 minutes per scheme).
"""
import sys
import warnings
from unittest import mock

import numpy as np
from policy_bootstrap_variance_check import pipeline_bootstrap

import causalkit.policy.learner as learner_module
import causalkit.policy.value as value_module
from causalkit.nuisance import make_folds
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps, studies

N_BOOT = 60


def _over_rows(cv, n, *, groups=None, **kwargs):
    """``make_folds`` with the units ignored: folds over rows, copies split."""
    return make_folds(cv, n, **kwargs)


def shifts(n_sets):
    """(replicate mean - point) / SE for each data set."""
    shift = dgps.LEARNING_SHIFTS["strong"]
    out = []
    for r in range(n_sets):
        data = studies._design(np.random.default_rng([2024, r]), design="learning", shift=shift,
                               truth=0.0, n_source=1000, n_target=1000)
        fit = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", depth=2,
                                  random_state=data["seed"]).fit(
            data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
        boot = pipeline_bootstrap(fit, N_BOOT, fit.seed_for("bootstrap"))
        out.append((boot.replicates.mean() - boot.value) / boot.std_error)
    return np.array(out)


def main(n_sets=12):
    warnings.simplefilter("ignore")
    units = shifts(n_sets)
    with mock.patch.object(value_module, "make_folds", _over_rows), \
            mock.patch.object(learner_module, "make_folds", _over_rows):
        rows = shifts(n_sets)
    for name, d in (("folds over units (package)", units), ("folds over rows", rows)):
        print(f"{name}: (replicate mean - point) / SE = {d.mean():.3f} "
              f"+- {d.std(ddof=1) / np.sqrt(d.size):.3f} over {d.size} data sets")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 12)
