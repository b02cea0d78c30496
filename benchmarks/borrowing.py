"""Speed and scale of the borrowing estimators; prints numbers and ratios.

1. One AIB fit + influence-function estimate on the Paper A design (400 trial units, 800 external
   controls, 8 covariates): median milliseconds over repeats (target < 100 ms).
2. Scale: 1,000,000 external controls, 20 covariates: influence scores alone, and scores plus
   the full MSE-path selection (grid of 41 sizes); wall time and peak resident memory, and the
   ratio to one statsmodels OLS fit on the pooled data (target <= 10x, < 10 s, < 4 GiB); the
   trial has the Paper A shape (400 units, 100 controls). The selection runs along the nested
   path (:meth:`EfficientBorrowing.nested`); ``--compare`` also times the set-by-set route
   (one independent trial-participation fit per grid size) and prints the largest difference
   of the two MSE paths.
3. The recommended estimator with its default inference on NSW/CPS:
   ``AdaptiveBorrowing(random_state=0).fit(...).estimate()`` (the FAB interval, computed from
   the fit; ``inference="bootstrap"`` is the 200-resample pipeline bootstrap) against the
   reference a practitioner would run instead, a 200-resample bootstrap of one statsmodels OLS of the outcome on treatment and covariates over the same
   16,437 rows; the two interleaved, medians over ``--repeats-nsw`` (target < 5 s on 2 cores).
4. The recommended estimator at scale, on the data of 2: ``AdaptiveBorrowing().fit(...)`` and
   its default estimate, against one statsmodels OLS fit on the pooled data
   (interleaved, medians over 3; target <= 2x), and its peak traced memory (``tracemalloc``,
   an untimed run) in copies of X (target <= 3).

Usage: ``python benchmarks/borrowing.py [--n-external 1000000] [--repeats 20] [--compare]
[--repeats-nsw 3]``. BLAS runs on one thread (small matrices; more threads only add overhead on a
shared machine).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
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


def scale_data(n_external: int, n_features: int = 20):
    """``(X, y, a, s)``: a Paper A-shaped trial (400 units, 100 controls) and ``n_external``
    shifted external controls, 20% of all outcomes shifted by 0.5."""
    rng = np.random.default_rng(1)
    n_trial = 400
    X = np.vstack([rng.normal(size=(n_trial, n_features)),
                   rng.normal(0.2, 1.0, size=(n_external, n_features))])
    beta = rng.normal(size=n_features) / np.sqrt(n_features)
    s = np.r_[np.ones(n_trial, int), np.zeros(n_external, int)]
    a = np.r_[rng.permutation(np.repeat([1, 0], [300, 100])), np.zeros(n_external, int)]
    y = 1 + X @ beta + a + rng.normal(size=X.shape[0]) + 0.5 * (rng.random(X.shape[0]) < 0.2)
    return X, y, a, s


def scale(X, y, a, s, compare: bool = False):
    import statsmodels.api as sm

    from causalkit.borrowing._base import fit_nuisance
    from causalkit.borrowing._data import prepare_data
    from causalkit.borrowing.efficient import EfficientBorrowing
    from causalkit.borrowing.influence import influence_scores
    from causalkit.borrowing.selection import mse_path, rank_order, size_grid

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


def _ols_bootstrap(y, design, n_boot: int, seed: int = 0) -> None:
    """``n_boot`` statsmodels OLS fits on resampled rows (the reference of item 3)."""
    import statsmodels.api as sm

    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        idx = rng.integers(0, y.size, y.size)
        sm.OLS(y[idx], design[idx]).fit()


def adaptive_nsw_cps(repeats: int):
    """Median seconds of the default ``AdaptiveBorrowing`` estimate on NSW/CPS and of the OLS
    bootstrap reference, interleaved."""
    import statsmodels.api as sm

    from causalkit.borrowing import AdaptiveBorrowing
    from causalkit.datasets import NSW_COVARIATES, load_nsw_cps

    frame = load_nsw_cps()
    X = frame[NSW_COVARIATES].to_numpy(float)
    y, a, s = frame["re78"].to_numpy(float), frame["treat"].to_numpy(), frame["trial"].to_numpy()
    design = sm.add_constant(np.column_stack([a, X]))
    ours, ref = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        AdaptiveBorrowing(random_state=0).fit(X, y, a, trial=s).estimate(progress=False)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        _ols_bootstrap(y, design, 200)
        ref.append(time.perf_counter() - start)
    return float(np.median(ours)), float(np.median(ref))


def adaptive_scale(X, y, a, s, repeats: int = 3):
    """Median seconds of ``AdaptiveBorrowing`` (fit + default estimate) and of one statsmodels
    OLS on the pooled data, interleaved; then the estimator's peak traced memory in copies of
    ``X``."""
    import statsmodels.api as sm

    from causalkit.borrowing import AdaptiveBorrowing

    def fit():
        AdaptiveBorrowing(random_state=0).fit(X, y, a, trial=s).estimate()

    ours, ols = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            start = time.perf_counter()
            fit()
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            sm.OLS(y, sm.add_constant(X)).fit()
            ols.append(time.perf_counter() - start)
        tracemalloc.start()
        fit()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return float(np.median(ours)), float(np.median(ols)), peak / X.nbytes


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-external", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--repeats-nsw", type=int, default=3)
    parser.add_argument("--compare", action="store_true",
                        help="also time the set-by-set selection and compare the paths")
    args = parser.parse_args(argv)
    with threadpool_limits(1):
        ms = single_fit(args.repeats)
        print(f"AIB fit+estimate, Paper A design: median {ms:.1f} ms "
              f"(target < 100 ms; ratio to target {ms / 100:.2f})")
        data = scale_data(args.n_external)
        r = scale(*data, compare=args.compare)
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
    ours, ref = adaptive_nsw_cps(args.repeats_nsw)
    print(f"AdaptiveBorrowing, default estimate() on NSW/CPS: median {ours:.2f} s (target < 5 s)"
          f"; 200-resample OLS bootstrap {ref:.2f} s; ratio {ours / ref:.1f}x")
    with threadpool_limits(1):
        ours, ols, copies = adaptive_scale(*data)
    print(f"AdaptiveBorrowing at scale: fit + default estimate {ours:.2f} s, statsmodels OLS "
          f"{ols:.2f} s, ratio {ours / ols:.2f}x (target <= 2x); peak traced memory "
          f"{copies:.2f} copies of X (target <= 3)")


if __name__ == "__main__":
    main()
