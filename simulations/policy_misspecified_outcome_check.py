"""Where the overlap checks stay silent (no shift, 1 SD), why does the default interval of
``TargetPolicyValue`` sometimes miss by more than 3 SE?

Draws no study uses (``default_rng([SEED, design, case, rep])``) from the overlap grid's
``estimation`` and ``nonlinear`` designs, target mean of :math:`x_1` shifted 0 and 1 SD,
n_S = n_T = 2000, ``REPS`` replications per cell. The value of the optimal policy is estimated
twice on each data set: with the defaults (a linear outcome model per arm, which the
``nonlinear`` design's :math:`0.5 x_1^2` term makes wrong) and with a correct outcome model
(``PolynomialFeatures(2)`` then least squares, per arm; both designs are quadratic or linear).
A third SE is computed on the default fit: the influence values plus the term from estimating
the logistic domain model, :math:`\\hat G^\\top \\hat H^{-1} (g_i - \\hat\\rho_i)\\tilde x_i`
(stacked M-estimation, Newey & McFadden 1994, section 6; :math:`\\hat G` the derivative of the
weighted source term in the model's coefficients, :math:`\\hat H` its Fisher information, the
fold models' out-of-fold probabilities standing in for one fit on all rows): it asks whether
the weights' own estimation is what the default SE leaves out.

Per cell and fit: bias with its Monte Carlo SE, SD, median SE over SD, coverage of the 95%
interval, the number of misses by more than 3 SE, and the number expected if every SE equalled
the SD and the errors were normal (:math:`2\\{1-\\Phi(3)\\}` per replication).

Writes ``simulations/results/policy/policy_misspecified_outcome_check.csv``.
Usage: ``python simulations/policy_misspecified_outcome_check.py [JOBS]`` (about 10 minutes on
2 cores).
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy.special import ndtr
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures
from threadpoolctl import threadpool_limits

from causalkit.policy import TargetPolicyValue, dgps

SEED, REPS = 516000, 400
DESIGNS = ("estimation", "nonlinear")
CASES = ("0 SD", "1 SD")
OUT = Path(__file__).parent / "results" / "policy" / "policy_misspecified_outcome_check.csv"


def _with_domain_term(est, out):
    """SE of the default fit's estimate ``out`` with the logistic domain model's estimation
    term. ``out.influence`` stacks the source rows' influence values, then the target rows',
    scaled to the stacked size; the source part is centred (the within-arm normalised weights
    make it so), which the gradient below uses."""
    phi = out.influence
    n_s = est.weights_.size
    n = phi.size
    x = np.c_[np.ones(n), np.r_[est.X_source_, est.X_target_]]
    rho = np.r_[est.domain_source_, est.domain_target_]
    g = np.r_[np.ones(n_s), np.zeros(n - n_s)]
    info = (x * (rho * (1 - rho))[:, None]).T @ x / n
    # the weight is (1 - rho) / rho times a constant: its log-derivative is -x
    grad = -(phi[:n_s, None] * n_s / n * x[:n_s]).mean(axis=0)
    term = ((g - rho)[:, None] * x) @ np.linalg.solve(info, grad)
    return (phi + term).std(ddof=1) / np.sqrt(n)


def replicate(i_design, i_case, rep):
    design, case = DESIGNS[i_design], CASES[i_case]
    shift, outside = dgps.OVERLAP_GRID[case]
    policy = dgps.optimal_policy(design)
    data = dgps.simulate(design, np.random.default_rng([SEED, i_design, i_case, rep]),
                         n_source=2000, n_target=2000, shift=shift, outside_share=outside)
    fits = {"default": {},
            "correct outcome model": {"outcome_model": make_pipeline(PolynomialFeatures(2),
                                                                     LinearRegression())}}
    rows = []
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, kwargs in fits.items():
            est = TargetPolicyValue(random_state=rep, **kwargs).fit(
                data["X_source"], data["y"], data["treatment"], X_target=data["X_target"])
            out = est.estimate(policy)
            row = {"design": design, "case": case, "fit": name, "rep": rep,
                   "estimate": out.value, "std_error": out.std_error,
                   "flagged": bool(est.overlap_["poor_overlap"])}
            rows.append(row)
            if name == "default":
                rows.append({**row, "fit": "default, SE with the domain-model term",
                             "std_error": _with_domain_term(est, out)})
    return rows


def summarise(raw):
    truth = {(d, c): dgps.true_value(d, dgps.optimal_policy(d), dgps.OVERLAP_GRID[c][0])
             for d in DESIGNS for c in CASES}
    error = raw["estimate"] - [truth[k] for k in zip(raw["design"], raw["case"], strict=True)]
    z = error.abs() / raw["std_error"]
    table = raw.assign(error=error, covered=z <= 1.959964, miss_3se=z > 3).groupby(
        ["design", "case", "fit"], sort=False).agg(
        reps=("rep", "size"), bias=("error", "mean"), sd=("error", "std"),
        median_se=("std_error", "median"), coverage=("covered", "mean"),
        misses_3se=("miss_3se", "sum"), flagged=("flagged", "mean")).reset_index()
    table.insert(5, "mc_se_bias", table["sd"] / np.sqrt(table["reps"]))
    table.insert(8, "median_se_over_sd", table.pop("median_se") / table["sd"])
    table.insert(11, "misses_expected", 2 * ndtr(-3.0) * table["reps"])
    return table


def main(jobs=2):
    runs = Parallel(n_jobs=jobs, batch_size=4)(
        delayed(replicate)(i, j, r) for i in range(len(DESIGNS)) for j in range(len(CASES))
        for r in range(REPS))
    table = summarise(pd.DataFrame([row for run in runs for row in run]))
    print(table.round(4).to_string(index=False))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False, float_format="%.6g")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
