"""Cross-fitted (cv=5) versus in-sample (cv=1) weights in MonotoneAIPW with a wrong (constant)
outcome chain, in the plain and the normalised (ratio) form of the stage corrections:
linear-Gaussian design, n units (default 1000), seed 20261202, replications FIRST..LAST-1.

Usage: ``python simulations/longterm_crossfit_check.py RATE FIRST LAST [N]``; writes
``simulations/results/longterm/longterm-linear_crossfit_check_dropout<RATE%>[_n<N>].csv`` (one row
appended per replication; replications already there are skipped) and prints the bias of each
version in Monte Carlo standard errors.
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.dummy import DummyRegressor
from tqdm import tqdm

from causalkit.longterm import LinearGaussianDesign, MonotoneAIPW

SEED, TRUTH = 20261202, 3.0
VARIANTS = {"cv5": (5, False), "cv1": (1, False), "cv5_normalized": (5, True),
            "cv1_normalized": (1, True)}


def _replicate(design, rep: int, n: int) -> dict:
    s = design.sample(np.random.default_rng([SEED, rep]), n=n)
    roles = dict(X=s["X"], y=s["outcome"], treatment=s["treatment"], short=s["short"])
    row = {"rep": rep}
    for name, (cv, normalize) in VARIANTS.items():
        fit = MonotoneAIPW(outcome_model=DummyRegressor(), cv=cv, normalize=normalize,
                           random_state=1).fit(**roles)
        row[name] = fit.ate_
        row[f"clip_{name}"] = int(fit.n_clipped_.sum())
    return row


def main(rate: float, first: int, last: int, n: int = 1000) -> pd.DataFrame:
    """Run the missing replications of FIRST..LAST-1, appending each to the CSV as it ends
    (an interrupted run resumes where it stopped), and summarise the whole file."""
    design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)
    design.intercepts()
    size = "" if n == 1000 else f"_n{n}"
    path = Path(f"simulations/results/longterm/longterm-linear_crossfit_check_dropout"
                f"{int(100 * rate)}{size}.csv")
    done = set(pd.read_csv(path)["rep"]) if path.exists() else set()
    for rep in tqdm(sorted(set(range(first, last)) - done), desc="replications"):
        row = pd.DataFrame([_replicate(design, rep, n)])
        row.to_csv(path, mode="a", header=not path.exists(), index=False)
    table = pd.read_csv(path).sort_values("rep")
    for col in VARIANTS:
        err = table[col] - TRUTH
        mc_se = err.std() / np.sqrt(len(err))
        print(f"{col}: reps {len(err)}, bias {err.mean():+.4f}, MC SE {mc_se:.4f}, "
              f"z {err.mean() / mc_se:+.2f}")
    print("clipped units", {v: int(table[f"clip_{v}"].sum()) for v in VARIANTS})
    return table


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    main(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), *map(int, sys.argv[4:5]))
