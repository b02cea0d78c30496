"""Which pipeline-bootstrap interval should the selecting borrowing estimators report: the
percentile interval or the normal interval with the bootstrap SE? A check on draws that no study
uses.

The studies ``borrowing-bootstrap-paper-a`` (AIB, ACIB) and ``borrowing-bootstrap-selective``
(seed 2024) store both intervals of every fit. This check draws other data sets,
``default_rng([SEED, cell, rep])``, 100 per cell: ``SelectiveBorrowing`` on the grid cells
``linear-exchangeable`` and ``linear-bias0.5x30`` (its default 200 resamples) and the papers'
``InfluenceBorrowing`` / ``CalibratedInfluenceBorrowing`` on Paper A's linear design without
bias (100 resamples, as their study), each fitted as the studies fit it
(:class:`causalkit.borrowing.studies.StudyEstimator`). Per cell the table gives both coverages,
the replications covered by one interval only (a paired comparison), the mean ratio of the
percentile interval's half-length to the normal one's, the median bootstrap SE over the SD of
the estimates, and the mean excess kurtosis of the bootstrap replicates (a selection rule that
borrows more in some resamples than in others gives a bootstrap law with heavier tails than the
normal: its central 95% is then narrower than 1.96 bootstrap SEs either side).

Writes ``simulations/results/borrowing/borrowing_bootstrap_interval_check.csv`` (rows:
``..._rows.csv``; a rerun resumes). Usage: ``python
simulations/borrowing_bootstrap_interval_check.py [JOBS]`` (about 40 minutes on 2 cores).
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from _check import run_cells
from scipy.stats import kurtosis
from threadpoolctl import threadpool_limits

from causalkit.borrowing.designs import paper_a_design
from causalkit.borrowing.studies import GRID_SCENARIOS, StudyEstimator

RESULTS = Path(__file__).parent / "results" / "borrowing"
OUT = RESULTS / "borrowing_bootstrap_interval_check.csv"
ROWS = RESULTS / "borrowing_bootstrap_interval_check_rows.csv"
SEED, REPS = 517000, 100
#: (estimator, cell, resamples, trial propensity model as in the estimator's study)
CELLS = [("selective", "linear-exchangeable", 200, "constant"),
         ("selective", "linear-bias0.5x30", 200, "constant"),
         ("aib", "linear-exchangeable", 100, None),
         ("acib", "linear-exchangeable", 100, None)]
Z = 1.959963984540054


def replicate(i, rep):
    name, cell, n_boot, propensity = CELLS[i]
    design, kwargs, _ = GRID_SCENARIOS[cell]
    assert design is paper_a_design
    data = design(np.random.default_rng([SEED, i, rep]), **kwargs)
    params = {} if propensity is None else {"propensity": propensity}
    with threadpool_limits(1):
        out = StudyEstimator(name, inference="bootstrap", n_boot=n_boot, **params)(data)
    lower, upper = out.conf_int(method="percentile")
    return {"estimator": name, "cell": cell, "rep": rep, "truth": data["truth"],
            "estimate": out.value, "bootstrap_se": out.std_error,
            "percentile_lower": lower, "percentile_upper": upper,
            "excess_kurtosis": float(kurtosis(out.replicates))}


def summarise(rows):
    out = []
    for (name, cell), g in rows.groupby(["estimator", "cell"], sort=False):
        pct = (g.percentile_lower <= g.truth) & (g.truth <= g.percentile_upper)
        half = Z * g.bootstrap_se
        normal = (g.estimate - half <= g.truth) & (g.truth <= g.estimate + half)
        n = len(g)
        out.append({"estimator": name, "cell": cell, "n_reps": n,
                    "coverage_percentile": pct.mean(), "coverage_normal": normal.mean(),
                    "mc_se": np.sqrt(0.95 * 0.05 / n),
                    "covered_by_normal_only": int((normal & ~pct).sum()),
                    "covered_by_percentile_only": int((pct & ~normal).sum()),
                    "half_length_percentile_over_normal":
                        ((g.percentile_upper - g.percentile_lower) / (2 * half)).mean(),
                    "median_se_over_sd": g.bootstrap_se.median() / g.estimate.std(ddof=1),
                    "mean_excess_kurtosis": g.excess_kurtosis.mean()})
    return pd.DataFrame(out)


def main(jobs=2):
    cells = [{"estimator": name, "cell": cell} for name, cell, _, _ in CELLS]
    run_cells(cells, replicate, summarise, reps=REPS, rows_path=ROWS, out_path=OUT, jobs=jobs)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
