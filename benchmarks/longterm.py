"""Speed of the long-term estimators.

1. IHDP-size problem (747 units, 25 covariates, 3 stages): fit + influence-function estimate
   of every non-neural estimator (target < 1 s each), SeqMSM with its default bootstrap, and
   BalanceNet with default settings (target < 60 s).
2. Scale check: n = 200,000, T = 4, linear/logistic nuisances, for SequentialIPW,
   SequentialRegression, SequentialTMLE and MonotoneAIPW (target: MonotoneAIPW < 15 s on
   2 cores), each also as a ratio to the floor measured in the same run: one scikit-learn
   ``LogisticRegression`` (propensity) plus, per stage, one ``LogisticRegression``
   (continuation) and one ``LinearRegression`` (outcome) on the same rows, the least work any
   estimator with these nuisance models does, fitted with one BLAS thread as the estimators
   fit (faster than with the process's pool here).
3. MonotoneAIPW and SequentialTMLE fit + estimate at n = 2,000 and at the scale check's n with
   one BLAS thread while fitting (the estimators' default, ``_fit_blas_threads``) and with the
   process's BLAS pool, one after the other (best of 2).

Prints wall-clock and process-CPU seconds and their ratios to the target (< 1 meets
it); torch uses one thread. Run: .venv/bin/python
benchmarks/longterm.py [--quick] [--scale-only]. Timings depend on machine load; report the
load with them.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from causalkit._base import fit_blas_threads


def _time(make, data, repeat=1, inference="influence"):
    """Best wall-clock and process-CPU seconds of fit + estimate over ``repeat`` runs
    (``inference=None``: the fit alone)."""
    wall = cpu = np.inf
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        est = make().fit(data["X"], data["outcome"], data["treatment"], short=data["short"])
        if inference is not None:
            est.estimate(inference=inference)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def _report(name, times, target):
    wall, cpu = times
    print(f"  {name:<24}wall {wall:8.3f} s  cpu {cpu:8.3f} s   ratio wall/target "
          f"{wall / target:6.3f}  cpu/target {cpu / target:6.3f}")


def _floor(data, repeat=1):
    """Best wall-clock and process-CPU seconds of the floor: one propensity logistic
    regression on everybody, then per stage a continuation logistic regression on the units
    at risk and an outcome linear regression on its responders (same features as the
    estimators' default models), with one BLAS thread."""
    X, a = data["X"], data["treatment"]
    Z = np.column_stack([data["short"], data["outcome"]])
    observed = ~np.isnan(Z)
    wall = cpu = np.inf
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        with threadpool_limits(1, user_api="blas"):
            _floor_fits(X, a, Z, observed)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def _floor_fits(X, a, Z, observed):
    from sklearn.linear_model import LinearRegression, LogisticRegression
    LogisticRegression().fit(X, a)
    at_risk = np.ones(len(a), dtype=bool)
    for k in range(Z.shape[1]):
        H = np.column_stack([X, a, Z[:, :k]])[at_risk]
        LogisticRegression().fit(H, observed[at_risk, k])
        at_risk = at_risk & observed[:, k]
        H = np.column_stack([X, a, Z[:, :k]])[at_risk]
        LinearRegression().fit(H, Z[at_risk, k])


def _ihdp_size(names):
    """Section 1: the IHDP-size problem."""
    from causalkit.longterm import LinearGaussianDesign, SeqMSM
    from causalkit.longterm.balancenet import BalanceNet
    from causalkit.longterm.studies import _ihdp_covariates
    X, A = _ihdp_covariates()
    design = LinearGaussianDesign(n_features=X.shape[1], dropout=(0.3,) * 3, seed=21)
    data = design.sample(np.random.default_rng(0), X=X, treatment=A)
    print("\nIHDP-size problem (n = 747, p = 25, T = 3); best of 3; target 1 s")
    for name, make in names.items():
        _report(name, _time(make, data, repeat=3), 1.0)
    _report("SeqMSM + bootstrap (200)", _time(SeqMSM, data, inference="bootstrap"), 60.0)
    print("  (the bootstrap line is SeqMSM's default inference; compared with 60 s)")
    print("  BalanceNet: target 60 s")
    _report("BalanceNet (defaults, fit)",
            _time(lambda: BalanceNet(random_state=0, device="cpu"), data, inference=None), 60.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 20,000 in the scale check")
    parser.add_argument("--scale-only", action="store_true", help="only the scale check")
    args = parser.parse_args(argv)
    import torch

    from causalkit.longterm import (
        CompleteCase,
        LinearGaussianDesign,
        MonotoneAIPW,
        NaiveIPW,
        SeqMSM,
        SequentialIPW,
        SequentialRegression,
        SequentialTMLE,
    )
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    fast = {"SequentialIPW": SequentialIPW, "SequentialRegression": SequentialRegression,
            "SequentialTMLE": SequentialTMLE, "MonotoneAIPW": MonotoneAIPW}
    if not args.scale_only:
        _ihdp_size({**fast, "SeqMSM": SeqMSM, "CompleteCase": CompleteCase,
                    "NaiveIPW": NaiveIPW})

    n = 20_000 if args.quick else 200_000
    design = LinearGaussianDesign(n_features=10, dropout=(0.15,) * 4, seed=3)
    big = design.sample(np.random.default_rng(1), n=n)
    floor = _floor(big, repeat=2)
    print(f"\nScale check (n = {n:,}, p = 10, T = 4); target 15 s; best of 2")
    _report("floor (sklearn fits)", floor, 15.0)
    for name, make in fast.items():
        times = _time(make, big, repeat=2)
        _report(name, times, 15.0)
        print(f"  {'':<24}ratio to the floor: wall {times[0] / floor[0]:.2f}  "
              f"cpu {times[1] / floor[1]:.2f}")
    small = design.sample(np.random.default_rng(2), n=2000)
    print("\nOne BLAS thread while fitting (the default) / the process's BLAS pool, best of 2")
    for name in ("MonotoneAIPW", "SequentialTMLE"):
        for label, data in (("n = 2,000", small), (f"n = {n:,}", big)):
            one = _time(fast[name], data, repeat=2)[0]
            with fit_blas_threads(None):
                pool = _time(fast[name], data, repeat=2)[0]
            print(f"  {name:<16}{label:<12} {one:7.3f} s / {pool:7.3f} s = {one / pool:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
