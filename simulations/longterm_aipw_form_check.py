"""Can a variance-reducing form of MonotoneAIPW meet both bars of the linear design at heavy
drop-out: a spread at most 1.3 times SequentialRegression's with the right outcome chain, and a
bias within 2 Monte Carlo SE with a wrong (constant) chain, where only the weights protect it?

Each replication fits MonotoneAIPW once per chain (the defaults: OLS chain or a constant one,
in-sample logistic weights) and evaluates on its components (``aipw_components``) the plain
form (the default), the ratio (Hajek) form (``normalize=True``), the ratio form with its
first-order bias removed by the jackknife over units (Quenouille 1956, *Biometrika* 43; each
stage's ``sum W D / sum W`` recomputed without unit ``i``), and the plain form with the
cumulative weight capped at 100, 200, 500 and 1000 (``weight_cap``). SequentialRegression on the
same draw is the reference for the spread. Draws no study uses (``default_rng([970000, rep])``):
the linear design (n = 1000, three stages) at 30% and 40% drop-out per stage, 400 replications.

``sd_ratio`` is the form's SD over SequentialRegression's with a percentile interval from 2,000
resamples of the replications (paired); the rows ``plain (default), study draws`` give the same
ratio for the default on the committed draws of ``simulations/results/longterm-linear``. Writes
``simulations/results/longterm/longterm_aipw_form_check.csv``.

Usage: ``python simulations/longterm_aipw_form_check.py [JOBS]`` (about 2 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pandas as pd
from _check import sd_ratio
from joblib import Parallel, delayed
from sklearn.dummy import DummyRegressor
from threadpoolctl import threadpool_limits

import causalkit.longterm.aipw as aipw
from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW, SequentialRegression
from causalkit.longterm._scores import combine_aipw

SEED = 970000
REPS = 400
RATES = (0.3, 0.4)
CAPS = (100, 200, 500, 1000)
RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "longterm" / "longterm_aipw_form_check.csv"
DEFAULT = "plain (default)"


def forms(m_first, W, D):
    """Effect estimate of every form from one fit's components (``aipw_components``)."""
    n = W.shape[0]
    means = {DEFAULT: combine_aipw(m_first, W, D).mean(axis=0),
             "ratio (normalize=True)": combine_aipw(m_first, W, D, normalize=True).mean(axis=0)}
    total, weighted = W.sum(axis=0), (W * D).sum(axis=0)                  # (T, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        leave_one_out = np.where(total - W > 0, (weighted - W * D) / (total - W),
                                 weighted / total)                          # (n, T, 2)
    jackknifed = n * weighted / total - (n - 1) * leave_one_out.mean(axis=0)
    means["ratio, jackknifed"] = m_first.mean(axis=0) + jackknifed.sum(axis=0)
    for cap in CAPS:
        means[f"plain, weight_cap={cap}"] = combine_aipw(m_first, np.minimum(W, cap),
                                                         D).mean(axis=0)
    return {name: float(mu[1] - mu[0]) for name, mu in means.items()}


def fit_with_parts(args, short, **kwargs):
    """MonotoneAIPW fitted with ``kwargs``, and the components its scores were built from."""
    captured = {}

    def keep(m_first, W, D, normalize=False):
        captured["parts"] = (m_first, W, D)
        return combine_aipw(m_first, W, D, normalize)

    with patch.object(aipw, "combine_aipw", keep):
        est = MonotoneAIPW(**kwargs).fit(*args, short=short)
    return est, captured["parts"]


def replicate(design, rep):
    warnings.simplefilter("ignore")
    s = design.sample(np.random.default_rng([SEED, rep]), n=1000)
    args, short = (s["X"], s["outcome"], s["treatment"]), s["short"]
    rows = []
    with threadpool_limits(1):
        rows.append({"chain": "right", "form": "SequentialRegression",
                     "estimate": SequentialRegression().fit(*args, short=short).ate_})
        for chain, kwargs in (("right", {}),
                              ("wrong (constant)", {"outcome_model": DummyRegressor()})):
            est, parts = fit_with_parts(args, short, **kwargs)
            se = est.estimate(inference="influence").std_error
            for form, value in forms(*parts).items():
                rows.append({"chain": chain, "form": form, "estimate": value,
                             "std_error": se if form == DEFAULT else np.nan})
    return [{**r, "rep": rep, "error": r["estimate"] - s["truth"]} for r in rows]


def summarise(raw, setting, rng):
    reference = raw.query("form == 'SequentialRegression'").sort_values("rep")["error"].to_numpy()
    rows = []
    for (chain, form), g in raw.groupby(["chain", "form"], sort=False):
        err = g.sort_values("rep")["error"].to_numpy()
        mc_se = err.std(ddof=1) / np.sqrt(err.size)
        ratio, lo, hi = sd_ratio(err, reference, rng)
        se = g["std_error"].to_numpy()
        covered = np.abs(err) <= 1.959964 * se
        rows.append({"setting": setting, "chain": chain, "form": form, "reps": err.size,
                     "bias": err.mean(), "mc_se": mc_se, "bias_over_mc_se": err.mean() / mc_se,
                     "sd": err.std(ddof=1), "sd_ratio": ratio, "sd_ratio_lo": lo,
                     "sd_ratio_hi": hi,
                     "median_se_over_sd": np.median(se) / err.std(ddof=1) if form == DEFAULT
                     else np.nan,
                     "coverage": covered.mean() if form == DEFAULT else np.nan})
    return rows


def study_draws(setting, rng):
    """The default's SD ratio (with its interval) on the committed study draws of
    ``setting``, and their number."""
    path = RESULTS / "longterm-linear" / f"longterm-linear_{setting}_estimates.csv"
    table = pd.read_csv(path).pivot(index="rep", columns="estimator", values="estimate")
    return (*sd_ratio(table["MonotoneAIPW"].to_numpy(),
                      table["SequentialRegression"].to_numpy(), rng), len(table))


def main(jobs=2):
    rng = np.random.default_rng(SEED)
    rows = []
    for rate in RATES:
        design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)
        design.intercepts()
        runs = Parallel(n_jobs=jobs)(delayed(replicate)(design, r) for r in range(REPS))
        raw = pd.DataFrame([row for run in runs for row in run])
        setting = f"dropout{int(100 * rate)}"
        rows += summarise(raw, setting, rng)
        table = pd.DataFrame(rows).query("setting == @setting")
        print(setting, "\n", table.drop(columns="setting").round(4).to_string(index=False))
        ratio, lo, hi, reps = study_draws(setting, rng)
        rows.append({"setting": setting, "chain": "right", "form": f"{DEFAULT}, study draws",
                     "reps": reps, "sd_ratio": ratio, "sd_ratio_lo": lo, "sd_ratio_hi": hi})
        print(f"default on the study draws: SD ratio {ratio:.3f} [{lo:.3f}, {hi:.3f}]",
              flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(OUT, index=False, float_format="%.6g")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
