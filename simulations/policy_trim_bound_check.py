"""Density-ratio bound of the overlap region kept by ``on_poor_overlap="trim"``: 20 (the
default, ``causalkit.policy.value.TRIM_DENSITY_RATIO``) against 10 and 5.

Draws no study uses (``default_rng([900000, rep])``) from the overlap grid's designs
(``estimation`` and ``nonlinear``, target mean of :math:`x_1` shifted 2 and 4 SD,
n_S = n_T = 2000, 80 replications): the value of the optimal policy is estimated with
``TargetPolicyValue(on_poor_overlap="trim")`` and compared with the value of the trimmed target
population (Monte Carlo over the fitted region, 100,000 draws). The cells with 10% or 30% of the
target 5 SD outside the source are left out: there the source's quantile box, not the ratio
bound, trims the outside units, and the three bounds trim the same units. Prints, per cell and
bound, the bias (with its Monte Carlo SE), the SD, the mean SE over the SD, the coverage of the
95% interval and the mean number of target units trimmed, and writes them to
``simulations/results/policy/policy_trim_bound_check.csv``.

Usage: ``python simulations/policy_trim_bound_check.py [JOBS]`` (about 8 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

import causalkit.policy.value as value_module
from causalkit.policy import TargetPolicyValue, dgps

SEED = 900000
REPS = 80
BOUNDS = (20.0, 10.0, 5.0)
CASES = ("2 SD", "4 SD")
OUT = Path(__file__).parent / "results" / "policy" / "policy_trim_bound_check.csv"


def replicate(design, case, rep):
    warnings.simplefilter("ignore")
    shift, outside = dgps.OVERLAP_GRID[case]
    policy = dgps.optimal_policy(design)
    data = dgps.simulate(design, np.random.default_rng([SEED, rep]), n_source=2000,
                         n_target=2000, shift=shift, outside_share=outside)
    rows = []
    for bound in BOUNDS:
        with patch.object(value_module, "TRIM_DENSITY_RATIO", bound):
            est = TargetPolicyValue(on_poor_overlap="trim", random_state=rep).fit(
                data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
            out = est.estimate(policy)
            truth = dgps.true_value(design, policy, shift, outside_share=outside,
                                    region=est.overlap_region, n_mc=100_000, seed=rep)
        rows.append({"design": design, "case": case, "bound": bound, "rep": rep,
                     "error": out.value - truth, "std_error": out.std_error,
                     "n_trimmed_target": est.n_trimmed_target_})
    return rows


def main(jobs=2):
    runs = Parallel(n_jobs=jobs)(delayed(replicate)(design, case, r)
                                 for design in ("estimation", "nonlinear") for case in CASES
                                 for r in range(REPS))
    raw = pd.DataFrame([row for run in runs for row in run])
    covered = raw["error"].abs() <= 1.959964 * raw["std_error"]
    table = raw.assign(covered=covered).groupby(["design", "case", "bound"], sort=False).agg(
        bias=("error", "mean"), sd=("error", "std"), mean_se=("std_error", "mean"),
        coverage=("covered", "mean"), n_trimmed_target=("n_trimmed_target", "mean"),
        reps=("rep", "size")).reset_index()
    table.insert(4, "mc_se_bias", table["sd"] / np.sqrt(table["reps"]))
    table["mean_se_over_sd"] = table["mean_se"] / table["sd"]
    print(table.round(4).to_string(index=False))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False, float_format="%.6g")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
