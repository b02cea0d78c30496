"""Speed and scale of influence-based borrowing; prints numbers and ratios.

1. One AIB fit + analytic estimate on the Paper A design (400 trial units, 800 external
   controls, 8 covariates): median milliseconds over repeats (target < 100 ms).
2. Scale: 1,000,000 external controls, 20 covariates: influence scores alone, and scores plus
   the full MSE-path selection (grid of 41 sizes); wall time and peak resident memory, and the
   ratio to one statsmodels OLS fit on the pooled data (target <= 10x, < 10 s, < 4 GiB); the
   trial has the Paper A shape (400 units, 100 controls).

Usage: ``python benchmarks/borrowing.py [--n-external 1000000] [--repeats 20]``. BLAS runs on
one thread (small matrices; more threads only add overhead on a shared machine).
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def single_fit(repeats: int) -> float:
    from causalkit.borrowing import InfluenceBorrowing
    from causalkit.borrowing.designs import paper_a_design

    d = paper_a_design(np.random.default_rng(0), bias=0.3)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        InfluenceBorrowing().fit(d["X"], d["y"], d["a"], d["s"]).estimate(inference="analytic")
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def scale(n_external: int, n_features: int = 20):
    import statsmodels.api as sm

    from causalkit.borrowing._base import fit_nuisance
    from causalkit.borrowing._data import prepare_data
    from causalkit.borrowing.efficient import EfficientBorrowing
    from causalkit.borrowing.influence import influence_scores
    from causalkit.borrowing.selection import mse_path, rank_order, size_grid

    rng = np.random.default_rng(1)
    n_trial = 400
    X = np.vstack([rng.normal(size=(n_trial, n_features)),
                   rng.normal(0.2, 1.0, size=(n_external, n_features))])
    beta = rng.normal(size=n_features) / np.sqrt(n_features)
    s = np.r_[np.ones(n_trial, int), np.zeros(n_external, int)]
    a = np.r_[rng.permutation(np.repeat([1, 0], [300, 100])), np.zeros(n_external, int)]
    y = 1 + X @ beta + a + rng.normal(size=X.shape[0]) + 0.5 * (rng.random(X.shape[0]) < 0.2)

    start = time.perf_counter()
    sm.OLS(y, sm.add_constant(X)).fit()
    t_ols = time.perf_counter() - start

    data = prepare_data(X, y, a, s)
    start = time.perf_counter()
    mu1, mu0, e, model0 = fit_nuisance(data, "auto", "constant")
    nT = data.n_trial
    ctrl = data.controls
    scores = influence_scores(model0, data.X[:nT][ctrl], data.y[:nT][ctrl], data.X[nT:],
                              data.y[nT:])
    t_scores = time.perf_counter() - start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = EfficientBorrowing(data, data.y[nT:], mu1, mu0, e, 1.0)
        path, _, k = mse_path(engine, rank_order(scores), size_grid(data.n_external))
    t_total = time.perf_counter() - start
    return t_ols, t_scores, t_total, k, len(path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-external", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    with threadpool_limits(1):
        ms = single_fit(args.repeats)
        print(f"AIB fit+estimate, Paper A design: median {ms:.1f} ms "
              f"(target < 100 ms; ratio to target {ms / 100:.2f})")
        t_ols, t_scores, t_total, k, n_grid = scale(args.n_external)
    print(f"scale: {args.n_external:,} external controls x 20 covariates")
    print(f"  statsmodels OLS on pooled data : {t_ols:7.2f} s")
    print(f"  influence scores               : {t_scores:7.2f} s  ({t_scores / t_ols:5.1f}x OLS)")
    print(f"  scores + selection ({n_grid} sizes) : {t_total:7.2f} s  ({t_total / t_ols:5.1f}x OLS;"
          f" selected {k:,})")
    print(f"  peak resident memory           : {_peak_gib():7.2f} GiB")


if __name__ == "__main__":
    main()
