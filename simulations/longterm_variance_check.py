"""Leverage correction of the substitution variance: HC2 (``D / sqrt(1 - h)``) against the
leave-one-out HC3 (``D / (1 - h)``, the default) in MonotoneAIPW and SequentialTMLE.

Draws no study uses (``default_rng([700000, rep])``) from the studies' own designs: IHDP
(747 children, 139 treated, 25 covariates, the real treatment) at 15% and 30% drop-out per
stage, 400 replications, and the linear design (n = 1000) at 10% and 40%, 200 replications.
Prints, per design and variance, the bias, the SD, the median SE over the SD and the coverage of
the 95% interval, and writes them to
``simulations/results/longterm/longterm_variance_check.csv``.

Usage: ``python simulations/longterm_variance_check.py [JOBS]`` (about 9 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

import causalkit.longterm._scores as scores
from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW, SequentialTMLE
from causalkit.longterm._sandwich import hc2_residual, loo_residual
from causalkit.longterm.studies import _ihdp_covariates

SEED = 700000
OUT = Path(__file__).parent / "results" / "longterm" / "longterm_variance_check.csv"
ESTIMATORS = {"MonotoneAIPW": MonotoneAIPW, "SequentialTMLE": SequentialTMLE}
RESIDUALS = {"HC2": hc2_residual, "HC3": loo_residual}


def designs():
    X, A = _ihdp_covariates()
    for rate in (0.15, 0.3):
        d = LinearGaussianDesign(n_features=X.shape[1], dropout=(rate,) * 3, xi=1.0, seed=21)
        d.intercepts(X, A)
        yield f"ihdp_dropout{int(100 * rate)}", 400, lambda rng, d=d: d.sample(rng, X=X,
                                                                                 treatment=A)
    for rate in (0.1, 0.4):
        d = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)
        d.intercepts()
        yield f"linear_dropout{int(100 * rate)}", 200, lambda rng, d=d: d.sample(rng, n=1000)


def replicate(sample, rep):
    warnings.simplefilter("ignore")
    s = sample(np.random.default_rng([SEED, rep]))
    rows = []
    for kind in RESIDUALS:
        with patch.object(scores, "loo_residual", RESIDUALS[kind]):
            for name, cls in ESTIMATORS.items():
                res = cls().fit(s["X"], s["outcome"], s["treatment"], short=s["short"]).estimate(
                    inference="influence")
                rows.append({"rep": rep, "variance": kind, "estimator": name,
                             "error": res.value - s["truth"], "std_error": res.std_error})
    return rows


def main(jobs=2):
    tables = []
    for setting, reps, sample in designs():
        runs = Parallel(n_jobs=jobs)(delayed(replicate)(sample, r) for r in range(reps))
        raw = pd.DataFrame([row for run in runs for row in run])
        covered = raw["error"].abs() <= 1.959964 * raw["std_error"]
        table = raw.assign(covered=covered).groupby(["estimator", "variance"]).agg(
            bias=("error", "mean"), sd=("error", "std"), median_se=("std_error", "median"),
            max_se=("std_error", "max"), coverage=("covered", "mean"), reps=("rep", "size"))
        table["median_se_over_sd"] = table["median_se"] / table["sd"]
        tables.append(table.reset_index().assign(setting=setting))
        print(setting, "\n", tables[-1].round(3).to_string(index=False), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pd.concat(tables).to_csv(OUT, index=False, float_format="%.6g")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
