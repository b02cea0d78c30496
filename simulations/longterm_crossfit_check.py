"""Cross-fitted (cv=5) versus in-sample (cv=1) weights in MonotoneAIPW with a wrong (constant)
outcome chain: linear-Gaussian design, n = 1000, seed 20261202, replications FIRST..LAST-1.

Usage: ``python simulations/longterm_crossfit_check.py RATE FIRST LAST``; writes
``simulations/results/longterm/longterm-linear_crossfit_check_dropout<RATE%>.csv`` and prints the
bias of each version in Monte Carlo standard errors.
"""
import sys
import warnings

import numpy as np
import pandas as pd
from sklearn.dummy import DummyRegressor

from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW

SEED, N, TRUTH = 20261202, 1000, 3.0


def main(rate: float, first: int, last: int) -> pd.DataFrame:
    design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)
    design.intercepts()
    rows = []
    for rep in range(first, last):
        s = design.sample(np.random.default_rng([SEED, rep]), n=N)
        args = (s["X"], s["treatment"], s["short"], s["outcome"])
        row = {"rep": rep}
        for cv in (5, 1):
            fit = MonotoneAIPW(outcome_model=DummyRegressor(), cv=cv, random_state=1).fit(*args)
            row[f"cv{cv}"] = fit.ate_
            row[f"clip{cv}"] = int(fit.n_clipped_.sum())
        rows.append(row)
    table = pd.DataFrame(rows)
    name = f"longterm-linear_crossfit_check_dropout{int(100 * rate)}.csv"
    table.to_csv(f"simulations/results/longterm/{name}", index=False)
    for col in ("cv5", "cv1"):
        err = table[col] - TRUTH
        mc_se = err.std() / np.sqrt(len(err))
        print(f"{col}: reps {len(err)}, bias {err.mean():+.4f}, MC SE {mc_se:.4f}, "
              f"z {err.mean() / mc_se:+.2f}")
    print("clipped units cv5/cv1 total", table["clip5"].sum(), table["clip1"].sum())
    return table


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    main(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
