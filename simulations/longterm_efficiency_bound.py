"""How small can the spread of a doubly robust long-term estimator be on the linear design?

The semiparametric efficiency bound for the ATE when the drop-out and treatment mechanisms are
known or modelled parametrically and the outcome law is otherwise unrestricted is
``Var(phi) / n``, with ``phi`` the efficient influence function at the true nuisances
(:meth:`causalkit.longterm.LinearGaussianDesign.efficient_influence`; Robins, Rotnitzky & Zhao
1994; Tsiatis 2006, Thm. 10.1 and 10.4). An estimator that stays consistent with a wrong outcome
chain whenever the weights are right is regular in that model, so its asymptotic SD is at least
the bound; SequentialRegression, which also assumes the chain's linear form, is not bound by it.

For each design of ``causalkit simulate longterm-linear`` (n = 1000, three stages, 10-40%
drop-out per stage) this computes the bound's SD at n = 1000
(:meth:`~causalkit.longterm.LinearGaussianDesign.efficient_variance`, the drop-out and noise
integrated out) from 8 batches of 1,000,000 complete chains no study uses
(``default_rng([711000, rate in %, batch])``), with its Monte Carlo SE from the spread of the
batches, and sets it beside the committed SDs of SequentialRegression and of MonotoneAIPW (its
default) in ``simulations/results/longterm-linear`` and the mean of MonotoneAIPW's SE there.
At 40% drop-out it also fits both estimators (defaults) on 400 draws each at n = 1000, 4000
and 16,000 (``default_rng([711000, 40, n, rep])``), giving the SD times ``sqrt(n / 1000)``
(the scale on which the bound is constant) and the SD ratio to SequentialRegression with its
95% percentile interval over resampled replications (paired). Writes
``simulations/results/longterm/longterm_efficiency_bound.csv`` (the bound) and
``longterm_efficiency_bound_by_n.csv`` (the spread by sample size).

Usage: ``python simulations/longterm_efficiency_bound.py [JOBS]`` (about 5 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _check import sd_ratio
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW, SequentialRegression

SEED = 711000
BATCHES, BATCH = 8, 1_000_000
N = 1000
RATES = (0.1, 0.2, 0.3, 0.4)
RESULTS = Path(__file__).parent / "results"
STUDY = RESULTS / "longterm-linear" / "longterm-linear_summary.csv"
OUT = RESULTS / "longterm" / "longterm_efficiency_bound.csv"
BY_N = RESULTS / "longterm" / "longterm_efficiency_bound_by_n.csv"
SIZES, REPS = (1000, 4000, 16_000), 400
ESTIMATORS = {"SequentialRegression": SequentialRegression, "MonotoneAIPW": MonotoneAIPW}


def bound(rate):
    """SD of the efficient influence function over sqrt(N), and its Monte Carlo SE."""
    design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)   # as longterm-linear
    design.intercepts()
    variances = np.array([
        design.efficient_variance(np.random.default_rng([SEED, round(100 * rate), b]), BATCH)
        for b in range(BATCHES)])
    var = variances.mean()
    sd = np.sqrt(var / N)
    return {"setting": f"dropout{round(100 * rate)}", "n": N, "chains": BATCHES * BATCH,
            "bound_sd": sd,
            "bound_sd_mc_se": sd * variances.std(ddof=1) / np.sqrt(BATCHES) / (2 * var)}


def replicate(design, n, rep):
    """Both estimators' error on one draw of size ``n``."""
    warnings.simplefilter("ignore")
    s = design.sample(np.random.default_rng([SEED, 40, n, rep]), n=n)
    with threadpool_limits(1):
        return [{"estimator": name, "n": n, "rep": rep,
                 "error": make().fit(s["X"], s["outcome"], s["treatment"],
                                     short=s["short"]).ate_ - s["truth"]}
                for name, make in ESTIMATORS.items()]


def by_sample_size(jobs):
    design = LinearGaussianDesign(dropout=(0.4,) * 3, xi=1.0)
    design.intercepts()
    rows = Parallel(n_jobs=jobs)(delayed(replicate)(design, n, rep) for n in SIZES
                                 for rep in range(REPS))
    errors = pd.DataFrame([row for pair in rows for row in pair]).pivot(
        index=["n", "rep"], columns="estimator", values="error")
    rng = np.random.default_rng(SEED)
    table = []
    for n, g in errors.groupby(level="n"):
        reference = g["SequentialRegression"].to_numpy()
        for name in ESTIMATORS:
            err = g[name].to_numpy()
            ratio, lo, hi = sd_ratio(err, reference, rng)
            table.append({"estimator": name, "n": n, "reps": err.size, "bias": err.mean(),
                          "mc_se": err.std(ddof=1) / np.sqrt(err.size), "sd": err.std(ddof=1),
                          "sd_times_sqrt_n_over_1000": err.std(ddof=1) * np.sqrt(n / N),
                          "sd_over_sequential_regression": ratio,
                          "sd_over_sequential_regression_lo": lo,
                          "sd_over_sequential_regression_hi": hi})
    return pd.DataFrame(table)


def main(jobs=2):
    table = pd.DataFrame([bound(rate) for rate in RATES])
    study = pd.read_csv(STUDY).pivot(index="setting", columns="estimator",
                                     values=["sd", "mean_se"])
    table["sequential_regression_sd"] = table["setting"].map(study["sd", "SequentialRegression"])
    table["monotone_aipw_sd"] = table["setting"].map(study["sd", "MonotoneAIPW"])
    table["monotone_aipw_mean_se"] = table["setting"].map(study["mean_se", "MonotoneAIPW"])
    table["bound_over_sequential_regression"] = (table["bound_sd"]
                                                 / table["sequential_regression_sd"])
    table["monotone_aipw_over_sequential_regression"] = (table["monotone_aipw_sd"]
                                                         / table["sequential_regression_sd"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False, float_format="%.6g")
    with pd.option_context("display.width", 200):
        print(table.round(4).to_string(index=False))
    spread = by_sample_size(jobs)
    spread.to_csv(BY_N, index=False, float_format="%.6g")
    with pd.option_context("display.width", 200):
        print(spread.round(4).to_string(index=False))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
