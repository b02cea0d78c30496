"""Would the two-sample pipeline bootstrap give the trimmed estimate (``on_poor_overlap="trim"``)
an interval that covers the value of the trimmed target population, where its influence
interval, which treats the overlap region as fixed, falls short?

Draws no study uses (``default_rng([990000, cell, rep])``) from the overlap grid's cells whose
trimmed coverage was outside 0.93-0.97 in the ``policy-overlap`` study (``estimation`` with 10% and
30% of the target 5 SD outside the source; ``nonlinear`` shifted 4 SD and with 10% and 30% outside)
and the ``estimation`` 4 SD cell at the band's edge; n_S = n_T = 2000, 100 data sets per cell, and
200 in the ``nonlinear`` 30%-outside cell, the one whose bootstrap coverage was outside 0.93-0.97
after 100 (a follow-up: its second 100 were added by a resumed run and are reported beside the
first). Each data set is fitted once with ``TargetPolicyValue(on_poor_overlap="trim")`` (the
default nuisance models) and the optimal policy's value estimated with the influence interval and
with ``inference="bootstrap"`` (100 resamples; every nuisance, and so the region, refitted on
each); the truth is the value of the trimmed target population over the fitted region (Monte Carlo,
100,000 draws). Coverage is reported for the influence interval, the bootstrap percentile interval
and the normal interval with the bootstrap SE.

Rows are appended per cell to ``simulations/results/policy/policy_trim_bootstrap_check_rows.csv``
(a rerun adds only the data sets not there yet) and summarised in
``simulations/results/policy/policy_trim_bootstrap_check.csv``.

Usage: ``python simulations/policy_trim_bootstrap_check.py [JOBS]`` (about 18 CPU seconds per
data set: about 105 minutes with 2 jobs).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
from _check import run_cells
from threadpoolctl import threadpool_limits

from causalkit.policy import TargetPolicyValue, dgps

SEED = 990000
#: Data sets per cell (``CELLS`` order): the follow-up cell has 200.
REPS = (100, 100, 100, 100, 200, 100)
N_BOOT = 100
CELLS = (("estimation", "10% outside"), ("estimation", "30% outside"),
         ("nonlinear", "4 SD"), ("nonlinear", "10% outside"), ("nonlinear", "30% outside"),
         ("estimation", "4 SD"))
FOLDER = Path(__file__).parent / "results" / "policy"
ROWS = FOLDER / "policy_trim_bootstrap_check_rows.csv"
OUT = FOLDER / "policy_trim_bootstrap_check.csv"
Z = 1.959964


def replicate(cell, rep):
    warnings.simplefilter("ignore")
    design, case = CELLS[cell]
    shift, outside = dgps.OVERLAP_GRID[case]
    policy = dgps.optimal_policy(design)
    data = dgps.simulate(design, np.random.default_rng([SEED, cell, rep]), n_source=2000,
                         n_target=2000, shift=shift, outside_share=outside)
    with threadpool_limits(1):
        est = TargetPolicyValue(on_poor_overlap="trim", random_state=rep).fit(
            data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
        influence = est.estimate(policy, inference="influence")
        boot = est.estimate(policy, inference="bootstrap", n_boot=N_BOOT)
    truth = dgps.true_value(design, policy, shift, outside_share=outside,
                            region=est.overlap_region, n_mc=100_000, seed=rep)
    lo, hi = boot.conf_int()
    return {"design": design, "case": case, "rep": rep, "truth": truth,
            "error": influence.value - truth, "influence_se": influence.std_error,
            "bootstrap_se": boot.std_error, "percentile_lo": lo - truth,
            "percentile_hi": hi - truth, "n_trimmed_target": est.n_trimmed_target_}


def summarise(rows):
    rows = rows.assign(
        influence=(rows.error.abs() <= Z * rows.influence_se),
        percentile=(rows.percentile_lo <= 0) & (rows.percentile_hi >= 0),
        bootstrap_normal=(rows.error.abs() <= Z * rows.bootstrap_se))
    table = rows.groupby(["design", "case"], sort=False).agg(
        reps=("rep", "size"), bias=("error", "mean"), sd=("error", "std"),
        mean_influence_se=("influence_se", "mean"), mean_bootstrap_se=("bootstrap_se", "mean"),
        coverage_influence=("influence", "mean"), coverage_percentile=("percentile", "mean"),
        coverage_bootstrap_normal=("bootstrap_normal", "mean"),
        mean_n_trimmed_target=("n_trimmed_target", "mean"))
    table.insert(3, "mc_se", table["sd"] / np.sqrt(table["reps"]))
    table["influence_se_over_sd"] = table["mean_influence_se"] / table["sd"]
    table["bootstrap_se_over_sd"] = table["mean_bootstrap_se"] / table["sd"]
    return table.reset_index()


def main(jobs=2):
    run_cells([{"design": design, "case": case} for design, case in CELLS], replicate,
              summarise, reps=REPS, rows_path=ROWS, out_path=OUT, jobs=jobs)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
