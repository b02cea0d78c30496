"""Does a ridge penalty on the continuation (selection) model tame MonotoneAIPW's weights?

The default propensity and selection models are logistic regressions with negligible shrinkage
(``C = 1e4`` on standardised columns). This check refits MonotoneAIPW with ``C = 10`` and
``C = 1`` (scikit-learn's default) for both, on draws no study uses (``default_rng([700000,
rep])``, the designs of ``simulations/longterm_variance_check.py``: IHDP at 15% and 30% drop-out
per stage, the linear design at 40%; 150 replications each), beside SequentialRegression.
Prints, per design and ``C``: bias (Monte Carlo SE), SD, SD relative to SequentialRegression's,
median SE over SD, largest SE, coverage of the 95% interval and the number of replications in
which some continuation probability hit the 0.01 floor.

Usage: ``python simulations/longterm_selection_penalty_check.py [REPS]`` (about 5 minutes on
2 cores).
"""
import sys
import warnings

import numpy as np
from joblib import Parallel, delayed
from longterm_variance_check import SEED, designs
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from causalkit.longterm import MonotoneAIPW, SequentialRegression

PENALTIES = (1e4, 10.0, 1.0)


def replicate(sample, rep):
    """(C, clipped units, SE, error) per penalty, then SequentialRegression's (0, 0, SE, error)."""
    warnings.simplefilter("ignore")
    s = sample(np.random.default_rng([SEED, rep]))
    args = (s["X"], s["outcome"], s["treatment"])
    rows = []
    for c in PENALTIES:
        logit = make_pipeline(StandardScaler(),
                              LogisticRegression(C=c, solver="newton-cholesky", max_iter=200))
        fit = MonotoneAIPW(propensity_model=logit, selection_model=logit).fit(
            *args, short=s["short"])
        res = fit.estimate(inference="influence")
        rows.append((c, fit.n_clipped_.sum(), res.std_error, res.value - s["truth"]))
    res = SequentialRegression().fit(*args, short=s["short"]).estimate(inference="influence")
    rows.append((0.0, 0, res.std_error, res.value - s["truth"]))
    return rows


def main(reps=150):
    for name, _, sample in designs():
        if name == "linear_dropout10":
            continue
        runs = np.array(Parallel(n_jobs=2)(delayed(replicate)(sample, r) for r in range(reps)))
        sd_reference = runs[:, -1, 3].std()
        for i, c in enumerate(PENALTIES):
            err, se = runs[:, i, 3], runs[:, i, 2]
            print(f"{name} C={c:g}: bias {err.mean():.4f} (MC SE {err.std() / np.sqrt(reps):.4f})"
                  f" SD {err.std():.3f} SD/SequentialRegression {err.std() / sd_reference:.2f}"
                  f" median SE/SD {np.median(se) / err.std():.2f} max SE {se.max():.2f}"
                  f" coverage {np.mean(np.abs(err) <= 1.959964 * se):.3f}"
                  f" replications with a floored probability {(runs[:, i, 1] > 0).sum()}",
                  flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 150)
