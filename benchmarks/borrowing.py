"""Speed and scale of influence-based borrowing; prints numbers and ratios.

1. One AIB fit + influence-function estimate on the Paper A design (400 trial units, 800 external
   controls, 8 covariates): median milliseconds over repeats (target < 100 ms).
2. Scale: 1,000,000 external controls, 20 covariates: influence scores alone, and scores plus
   the full MSE-path selection (grid of 41 sizes); wall time and peak resident memory, and the
   ratio to one statsmodels OLS fit on the pooled data (target <= 10x, < 10 s, < 4 GiB); the
   trial has the Paper A shape (400 units, 100 controls). The selection runs along the nested
   path (:meth:`EfficientBorrowing.nested`); ``--compare`` also times the set-by-set route
   (one independent trial-participation fit per grid size) and prints the largest difference
   of the two MSE paths.

Usage: ``python benchmarks/borrowing.py [--n-external 1000000] [--repeats 20] [--compare]``.
BLAS runs on one thread (small matrices; more threads only add overhead on a shared machine).
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
        est = InfluenceBorrowing().fit(d["X"], d["y"], d["a"], trial=d["s"])
        est.estimate(inference="influence")
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def _set_by_set_path(engine, order, sizes):
    """The MSE path's estimates and SEs with every set fitted on its own."""
    fits = [engine.evaluate(order[:k]) for k in sizes]
    return np.array([[f.value, f.std_error] for f in fits])


def scale(n_external: int, n_features: int = 20, compare: bool = False):
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
    out = {"ols": time.perf_counter() - start}

    data = prepare_data(X, y, a, s)
    start = time.perf_counter()
    mu1, mu0, e, models = fit_nuisance(data, "auto", "constant")
    model0 = models["control"]
    nT = data.n_trial
    ctrl = data.controls
    scores = influence_scores(model0, data.X[:nT][ctrl], data.y[:nT][ctrl], data.X[nT:],
                              data.y[nT:])
    out["scores"] = time.perf_counter() - start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = EfficientBorrowing(data, data.y[nT:], mu1, mu0, e, 1.0)
        order, sizes = rank_order(scores), size_grid(data.n_external)
        path, _, out["selected"] = mse_path(engine, order, sizes)
        out["total"] = time.perf_counter() - start
        out["grid"] = len(path)
        if compare:
            start = time.perf_counter()
            ref = _set_by_set_path(engine, order, sizes)
            out["set_by_set"] = time.perf_counter() - start
            out["max_diff"] = float(np.max(np.abs(path[["estimate", "se"]].to_numpy() - ref)))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-external", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--compare", action="store_true",
                        help="also time the set-by-set selection and compare the paths")
    args = parser.parse_args(argv)
    with threadpool_limits(1):
        ms = single_fit(args.repeats)
        print(f"AIB fit+estimate, Paper A design: median {ms:.1f} ms "
              f"(target < 100 ms; ratio to target {ms / 100:.2f})")
        r = scale(args.n_external, compare=args.compare)
    ols, scores, total = r["ols"], r["scores"], r["total"]
    select = total - scores
    print(f"scale: {args.n_external:,} external controls x 20 covariates")
    print(f"  statsmodels OLS on pooled data : {ols:7.2f} s")
    print(f"  influence scores               : {scores:7.2f} s  ({scores / ols:5.1f}x OLS)")
    print(f"  selection, nested path         : {select:7.2f} s  ({select / ols:5.1f}x OLS)")
    print(f"  scores + selection ({r['grid']} sizes) : {total:7.2f} s  ({total / ols:5.1f}x OLS;"
          f" selected {r['selected']:,})")
    if args.compare:
        print(f"  selection, set by set          : {r['set_by_set']:7.2f} s  (nested path "
              f"{r['set_by_set'] / select:.1f}x faster; max |diff| of estimate/SE "
              f"{r['max_diff']:.1e})")
    print(f"  peak resident memory           : {_peak_gib():7.2f} GiB")


if __name__ == "__main__":
    main()
