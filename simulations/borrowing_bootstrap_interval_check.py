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
the estimates and the mean excess kurtosis of the bootstrap replicates. The column
``normal_replicates_ratio`` is the same half-length ratio for replicates drawn from a normal law
(20,000 sets of the cell's number of resamples): with ``np.quantile``'s default rule the 2.5%
and 97.5% points of 100 or 200 replicates lie inside the law's (Hyndman & Fan 1996, *The
American Statistician* 50(4)), so the percentile interval is shorter than the normal one even
when nothing but the number of resamples is at work.

The table adds the same summary of the two studies' committed rows (``draws``: ``study, seed
2024``; their replicates are not stored, so no kurtosis). Writes
``simulations/results/borrowing/borrowing_bootstrap_interval_check.csv`` (rows:
``..._rows.csv``; a rerun resumes). Usage: ``python
simulations/borrowing_bootstrap_interval_check.py [JOBS]`` (about 18 minutes on 2 cores).
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
from causalkit.simulation import load_results

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
N_BOOT = {(name, cell): n_boot for name, cell, n_boot, _ in CELLS}


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


def study_rows():
    """The committed rows of the two studies (seed 2024), in the check's columns."""
    rows = []
    for study in ("borrowing-bootstrap-paper-a", "borrowing-bootstrap-selective"):
        for path in sorted((RESULTS.parent / study).glob("*.jsonl")):
            cell = path.stem.removeprefix(f"{study}_")
            rows.append(load_results(path).assign(cell=cell))
    rows = pd.concat(rows, ignore_index=True).rename(columns={"std_error": "bootstrap_se",
                                              "ci_lower": "percentile_lower",
                                              "ci_upper": "percentile_upper"})
    return rows.assign(draws="study, seed 2024", excess_kurtosis=np.nan)


def summarise(rows):
    if "draws" not in rows:     # the check's own rows
        rows = rows.assign(draws=f"check, seed {SEED}",
                           n_boot=[N_BOOT[key] for key in zip(rows.estimator, rows.cell)])
    out = []
    for (draws, name, cell), g in rows.groupby(["draws", "estimator", "cell"], sort=False):
        pct = (g.percentile_lower <= g.truth) & (g.truth <= g.percentile_upper)
        half = Z * g.bootstrap_se
        normal = (g.estimate - half <= g.truth) & (g.truth <= g.estimate + half)
        n = len(g)
        out.append({"draws": draws, "estimator": name, "cell": cell, "n_reps": n,
                    "n_boot": int(g.n_boot.iloc[0]),
                    "coverage_percentile": pct.mean(), "coverage_normal": normal.mean(),
                    "mc_se": np.sqrt(0.95 * 0.05 / n),
                    "covered_by_normal_only": int((normal & ~pct).sum()),
                    "covered_by_percentile_only": int((pct & ~normal).sum()),
                    "half_length_percentile_over_normal":
                        ((g.percentile_upper - g.percentile_lower) / (2 * half)).mean(),
                    "median_se_over_sd": g.bootstrap_se.median() / g.estimate.std(ddof=1),
                    "mean_excess_kurtosis": g.excess_kurtosis.mean(),
                    "normal_replicates_ratio": _normal_ratio(int(g.n_boot.iloc[0]))})
    return pd.DataFrame(out)


def _normal_ratio(n_boot, sets=20000):
    """Mean half-length ratio, percentile over normal interval, of ``n_boot`` normal
    replicates."""
    draws = np.random.default_rng([SEED, n_boot]).normal(size=(sets, n_boot))
    lower, upper = np.quantile(draws, [0.025, 0.975], axis=1)
    return float(np.mean((upper - lower) / (2 * Z * draws.std(axis=1, ddof=1))))


def main(jobs=2):
    cells = [{"estimator": name, "cell": cell} for name, cell, _, _ in CELLS]
    check = run_cells(cells, replicate, summarise, reps=REPS, rows_path=ROWS, out_path=OUT,
                      jobs=jobs)
    table = pd.concat([summarise(study_rows()), check], ignore_index=True)
    table.to_csv(OUT, index=False, float_format="%.6g")
    print(table.round(3).to_string(index=False))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
