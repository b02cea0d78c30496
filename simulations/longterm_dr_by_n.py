"""The doubly robust long-term estimators as n grows, with the right and with a wrong outcome
chain: does SequentialTMLE's bias with a wrong chain vanish, and which variance estimate gives
intervals that cover with either chain?

With a constant (wrong) outcome chain SequentialTMLE equals ``SequentialIPW(normalize=True)``,
the ratio (Hajek) form, whose bias is a finite-sample one: it vanishes as n grows, and faster than
the SD, so that in Monte Carlo SE units it shrinks. In ``causalkit simulate longterm-linear``
(n = 1000) that bias is -2.5 and -3.9 MC SE at 30% and 40% drop-out per stage. The default
(substitution) variance integrates a model of the stage residuals' second moment over the units
at risk; with a wrong chain the residuals carry the chain's error, which that model must follow
(it fits their mean as well as their spread; when it modelled their square log-linearly, this
check found the default interval short with a constant chain, 0.725-0.8775, in the results at
commit c44f9bb). The empirical variance of the estimated influence function
(``variance="empirical"``) needs no model.

This fits SequentialTMLE and MonotoneAIPW, both with their default weights, once with the
default chain (OLS per stage and arm: right here) and once with a constant one
(``DummyRegressor``, as the study's wrong-chain rows), on the linear design of that study at 30%
and 40% drop-out per stage and n = 1000, 4000 and 16,000, 400 draws per cell that no study uses
(``default_rng([712000, rate in %, n, rep])``; both chains see the same draws). Reported per
cell, chain and estimator: bias, its MC SE and their ratio, ``bias * n / 1000`` (level for a
bias of order 1/n), ``sd * sqrt(n / 1000)`` (level for a spread of order 1/sqrt(n)), and the
mean SE over the SD and the coverage of the 95% normal interval for three standard errors: the
default (substitution), the empirical one, and the larger of the two (``max``).

Rows are appended per cell to ``simulations/results/longterm/longterm_dr_by_n_rows.csv`` (a rerun
adds only the draws not there yet) and summarised in
``simulations/results/longterm/longterm_dr_by_n.csv``.

Usage: ``python simulations/longterm_dr_by_n.py [JOBS]`` (about 12 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _check import run_cells
from sklearn.dummy import DummyRegressor
from threadpoolctl import threadpool_limits

from causalkit.inference import Estimate
from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW, SequentialTMLE

SEED = 712000
REPS = 400
CELLS = tuple({"setting": f"dropout{round(100 * rate)}", "n": n}
              for rate in (0.3, 0.4) for n in (1000, 4000, 16_000))
FOLDER = Path(__file__).parent / "results" / "longterm"
ROWS = FOLDER / "longterm_dr_by_n_rows.csv"
OUT = FOLDER / "longterm_dr_by_n.csv"
ESTIMATORS = {"SequentialTMLE": SequentialTMLE, "MonotoneAIPW": MonotoneAIPW}
CHAINS = {"right": {}, "wrong": {"outcome_model": DummyRegressor()}}
Z = 1.959964


def replicate(cell, rep):
    """Each estimator's error and SEs on one draw, with each chain."""
    warnings.simplefilter("ignore")
    setting, n = CELLS[cell]["setting"], CELLS[cell]["n"]
    rate = int(setting.removeprefix("dropout"))
    design = LinearGaussianDesign(dropout=(rate / 100,) * 3, xi=1.0)   # as longterm-linear
    design.intercepts()
    s = design.sample(np.random.default_rng([SEED, rate, n, rep]), n=n)
    row = {"setting": setting, "n": n, "rep": rep}
    with threadpool_limits(1):
        for chain, models in CHAINS.items():
            for name, make in ESTIMATORS.items():
                fit = make(**models).fit(s["X"], s["outcome"], s["treatment"], short=s["short"])
                key = f"{name}_{chain}"
                row[f"{key}_error"] = fit.ate_ - s["truth"]
                row[f"{key}_substitution_se"] = fit.estimate().std_error
                row[f"{key}_empirical_se"] = Estimate.from_influence(
                    fit.ate_, fit.influence_).std_error
    return row


def summarise(rows):
    table = []
    for (setting, n), g in rows.groupby(["setting", "n"], sort=False):
        for chain in CHAINS:
            for name in ESTIMATORS:
                key = f"{name}_{chain}"
                err = g[f"{key}_error"]
                sd, mc_se = err.std(ddof=1), err.std(ddof=1) / np.sqrt(err.size)
                ses = {kind: g[f"{key}_{kind}_se"] for kind in ("substitution", "empirical")}
                ses["max"] = np.maximum(ses["substitution"], ses["empirical"])
                row = {"setting": setting, "n": n, "chain": chain, "estimator": name,
                       "reps": err.size, "bias": err.mean(), "mc_se": mc_se,
                       "bias_over_mc_se": err.mean() / mc_se,
                       "bias_times_n_over_1000": err.mean() * n / 1000,
                       "sd_times_sqrt_n_over_1000": sd * np.sqrt(n / 1000)}
                for kind, se in ses.items():
                    row[f"{kind}_se_over_sd"] = se.mean() / sd
                    row[f"coverage_{kind}"] = float(np.mean(np.abs(err) <= Z * se))
                table.append(row)
    return pd.DataFrame(table)


if __name__ == "__main__":
    run_cells(CELLS, replicate, summarise, reps=REPS, rows_path=ROWS, out_path=OUT,
              jobs=int(sys.argv[1]) if len(sys.argv) > 1 else 2)
