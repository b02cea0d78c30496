"""Does the chain-estimation term bring MonotoneAIPW's default interval into band when the weights
are wrong and the outcome chain right, without widening it when both are right?

With flat (wrong) propensity and selection models and the right least-squares chain, the AIPW
estimate equals SequentialRegression's, but the efficient influence function at the fitted
nuisances leaves out the variance of estimating the chain
(:func:`causalkit.longterm._sandwich.chain_estimation_term`). This check fits MonotoneAIPW with its
default chain, once with its default weight models (right here) and once with flat ones
(``DummyClassifier(strategy="prior")``, as the wrong-weights rows of ``causalkit simulate
longterm-linear``), and compares three standard errors of the same estimate: the substitution
variance alone (``none``), plus the term with the sample gradient (``unshrunk``), and plus the
term with the gradient shrunk by the positive-part James-Stein factor (``shrunk``, the default).
SequentialTMLE's default and SequentialRegression's stacked sandwich are reported beside them.
Design: the linear design of that study at 10-40% drop-out per stage, n = 1000, 200 draws per
cell that no study uses (``default_rng([731000, rate in %, rep])``; both weight models see the
same draws).

Rows are appended per cell to ``simulations/results/longterm/longterm_chain_term_check_rows.csv``
(a rerun adds only the draws not there yet) and summarised in
``simulations/results/longterm/longterm_chain_term_check.csv``.

Usage: ``python simulations/longterm_chain_term_check.py [JOBS]`` (about 10 minutes on 2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _check import run_cells
from sklearn.dummy import DummyClassifier
from threadpoolctl import threadpool_limits

from causalkit.longterm import (
    LinearGaussianDesign,
    MonotoneAIPW,
    SequentialRegression,
    SequentialTMLE,
)
from causalkit.longterm._data import check_monotone_data
from causalkit.longterm._sandwich import chain_estimation_term
from causalkit.longterm._scores import with_chain_term

SEED = 731000
REPS = 200
CELLS = tuple({"setting": f"dropout{rate}"} for rate in (10, 20, 30, 40))
FOLDER = Path(__file__).parent / "results" / "longterm"
ROWS = FOLDER / "longterm_chain_term_check_rows.csv"
OUT = FOLDER / "longterm_chain_term_check.csv"
WEIGHTS = {"right": {}, "wrong": {"propensity_model": DummyClassifier(strategy="prior"),
                                  "selection_model": DummyClassifier(strategy="prior")}}
SES = ("none", "unshrunk", "shrunk", "tmle", "regression")
Z = 1.959964


def _stage_weights(fit, data):
    """(n, T, 2) stage weights of a fitted MonotoneAIPW (zero off the arm's responders)."""
    W = np.zeros((data.n, data.n_stages, 2))
    for arm in (0, 1):
        W[:, :, arm] = np.nan_to_num(fit.weights_) * (data.a == arm)[:, None]
    return W


def replicate(cell, rep):
    """The AIPW error and its three SEs, TMLE's and SequentialRegression's, with each weight
    model, on one draw."""
    warnings.simplefilter("ignore")
    rate = int(CELLS[cell]["setting"].removeprefix("dropout"))
    design = LinearGaussianDesign(dropout=(rate / 100,) * 3, xi=1.0)   # as longterm-linear
    s = design.sample(np.random.default_rng([SEED, rate, rep]), n=1000)
    args = (s["X"], s["outcome"], s["treatment"])
    data = check_monotone_data(*args, short=s["short"])
    row = {"setting": CELLS[cell]["setting"], "rep": rep}
    with threadpool_limits(1):
        regression = SequentialRegression().fit(*args, short=s["short"]).estimate()
        for weights, models in WEIGHTS.items():
            fit = MonotoneAIPW(**models).fit(*args, short=s["short"])
            chain, W = fit.fold_models_[0]["outcome"], _stage_weights(fit, data)
            phi = fit.influence_
            shrunk = with_chain_term(0.0, phi, chain_estimation_term(data, chain,
                                                                     "impute_missing", W))
            unshrunk = with_chain_term(0.0, phi, chain_estimation_term(
                data, chain, "impute_missing", W, shrink=False))
            none = fit.variance_ - shrunk
            row[f"{weights}_error"] = fit.ate_ - s["truth"]
            for kind, variance in (("none", none), ("unshrunk", none + unshrunk),
                                   ("shrunk", fit.variance_)):
                row[f"{weights}_{kind}_se"] = np.sqrt(variance / data.n)
            tmle = SequentialTMLE(**models).fit(*args, short=s["short"])
            row[f"{weights}_tmle_error"] = tmle.ate_ - s["truth"]
            row[f"{weights}_tmle_se"] = tmle.estimate().std_error
            row[f"{weights}_regression_error"] = regression.value - s["truth"]
            row[f"{weights}_regression_se"] = regression.std_error
    return row


def summarise(rows):
    table = []
    for setting, g in rows.groupby("setting", sort=False):
        for weights in WEIGHTS:
            for kind in SES:
                source = kind if kind in ("tmle", "regression") else None
                err = g[f"{weights}_{source}_error" if source else f"{weights}_error"]
                se = g[f"{weights}_{kind}_se"]
                sd = err.std(ddof=1)
                table.append({"setting": setting, "weights": weights, "se": kind,
                              "reps": err.size, "bias": err.mean(), "sd": sd,
                              "mean_se": se.mean(), "mean_se_over_sd": se.mean() / sd,
                              "coverage": float(np.mean(np.abs(err) <= Z * se))})
    return pd.DataFrame(table)


if __name__ == "__main__":
    run_cells(CELLS, replicate, summarise, reps=REPS, rows_path=ROWS, out_path=OUT,
              jobs=int(sys.argv[1]) if len(sys.argv) > 1 else 2)
