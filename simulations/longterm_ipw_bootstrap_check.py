"""Would the pipeline bootstrap give :class:`~causalkit.longterm.SequentialIPW` intervals that
cover 0.93-0.97 on the linear design at 10-40% drop-out per stage?

Its default interval treats the weights as known and over-covers at light drop-out (0.995,
0.9875 and 0.9775 at 10, 20 and 30% in ``causalkit simulate longterm-linear``): estimating the
weights lowers the variance. The influence function with the estimation term
(``variance="estimated_weights"``) covers 0.9625 at 10% but 0.9225, 0.91 and 0.88 at 20-40%,
where a sample seldom holds the heavy-weight units
(``simulations/longterm_influence_tails_check.py``). This check draws ``REPS`` data sets per
rate that no study uses (``default_rng([SEED, rate in %, rep])``, the study's design, n = 1000)
and fits the default ``SequentialIPW()`` once, reporting the coverage of its default interval,
of the estimated-weights interval and of the pipeline bootstrap (``N_BOOT`` resamples, every
weight model refitted; percentile and normal intervals), each interval's median SE over the
estimates' SD, and the estimates' bias and SD.

Writes ``simulations/results/longterm/longterm_ipw_bootstrap_check.csv`` (rows:
``..._rows.csv``; a rerun resumes). Usage: ``python simulations/longterm_ipw_bootstrap_check.py
[JOBS]`` (about 15 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _check import run_cells
from threadpoolctl import threadpool_limits

from causalkit.longterm import LinearGaussianDesign, SequentialIPW

RESULTS = Path(__file__).parent / "results" / "longterm"
OUT = RESULTS / "longterm_ipw_bootstrap_check.csv"
ROWS = RESULTS / "longterm_ipw_bootstrap_check_rows.csv"
SEED, REPS, N, N_BOOT = 742000, 200, 1000, 100
RATES = (0.1, 0.2, 0.3, 0.4)
Z = 1.959963984540054


def replicate(i, rep):
    rate = RATES[i]
    design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)   # as longterm-linear
    s = design.sample(np.random.default_rng([SEED, round(100 * rate), rep]), n=N)
    args = (s["X"], s["outcome"], s["treatment"])
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        est = SequentialIPW(random_state=rep).fit(*args, short=s["short"])
        known = est.estimate(inference="influence")
        boot = est.estimate(inference="bootstrap", n_boot=N_BOOT)
        estimated = SequentialIPW(variance="estimated_weights", random_state=rep).fit(
            *args, short=s["short"]).estimate(inference="influence")
    lower, upper = boot.conf_int(method="percentile")
    return {"setting": f"dropout{round(100 * rate)}", "rep": rep, "truth": s["truth"],
            "estimate": known.value, "se_known_weights": known.std_error,
            "se_estimated_weights": estimated.std_error, "se_bootstrap": boot.std_error,
            "percentile_lower": lower, "percentile_upper": upper}


def summarise(rows):
    out = []
    for setting, g in rows.groupby("setting", sort=False):
        error = g.estimate - g.truth
        sd = error.std(ddof=1)
        row = {"setting": setting, "reps": len(g), "bias": error.mean(),
               "mc_se": sd / np.sqrt(len(g)), "sd": sd}
        for name in ("known_weights", "estimated_weights", "bootstrap"):
            se = g[f"se_{name}"]
            row[f"median_se_over_sd_{name}"] = se.median() / sd
            row[f"coverage_{name}"] = float(np.mean(np.abs(error) <= Z * se))
        row["coverage_bootstrap_percentile"] = float(np.mean(
            (g.percentile_lower <= g.truth) & (g.truth <= g.percentile_upper)))
        out.append(row)
    return pd.DataFrame(out)


def main(jobs=2):
    cells = [{"setting": f"dropout{round(100 * rate)}"} for rate in RATES]
    run_cells(cells, replicate, summarise, reps=REPS, rows_path=ROWS, out_path=OUT, jobs=jobs)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
