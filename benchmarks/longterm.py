"""Speed of the long-term estimators.

1. IHDP-size problem (747 units, 25 covariates, 3 stages): fit + influence-function estimate
   of every non-neural estimator (target < 1 s each), SeqMSM with its default bootstrap, and
   BalanceNet with default settings (target < 60 s).
2. Scale check: n = 200,000, T = 4, linear/logistic nuisances, for SequentialIPW,
   SequentialRegression and MonotoneAIPW (target < 30 s each).

Prints wall-clock and process-CPU seconds and their ratios to the target (< 1 meets
it); torch uses one thread. Run: .venv/bin/python
benchmarks/longterm.py [--quick]. Timings depend on machine load; report the load with them.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 20,000 in the scale check")
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
    )
    from causalkit.longterm.balancenet import BalanceNet
    from causalkit.longterm.studies import _ihdp_covariates
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    X, A = _ihdp_covariates()
    design = LinearGaussianDesign(n_features=X.shape[1], dropout=(0.3,) * 3, seed=21)
    data = design.sample(np.random.default_rng(0), X=X, treatment=A)
    print("\nIHDP-size problem (n = 747, p = 25, T = 3); best of 3; target 1 s")
    for name, make in [("SequentialIPW", SequentialIPW), ("SequentialRegression",
                       SequentialRegression), ("SeqMSM", SeqMSM),
                       ("MonotoneAIPW (5-fold)", MonotoneAIPW), ("CompleteCase", CompleteCase),
                       ("NaiveIPW", NaiveIPW)]:
        _report(name, _time(make, data, repeat=3), 1.0)
    _report("SeqMSM + bootstrap (200)", _time(SeqMSM, data, inference="bootstrap"), 60.0)
    print("  (the bootstrap line is SeqMSM's default inference; compared with 60 s)")
    print("  BalanceNet: target 60 s")
    _report("BalanceNet (defaults, fit)",
            _time(lambda: BalanceNet(random_state=0, device="cpu"), data, inference=None), 60.0)

    n = 20_000 if args.quick else 200_000
    design = LinearGaussianDesign(n_features=10, dropout=(0.15,) * 4, seed=3)
    big = design.sample(np.random.default_rng(1), n=n)
    print(f"\nScale check (n = {n:,}, p = 10, T = 4); target 30 s")
    for name, make in [("SequentialIPW", SequentialIPW),
                       ("SequentialRegression", SequentialRegression),
                       ("MonotoneAIPW (5-fold)", MonotoneAIPW)]:
        _report(name, _time(make, big), 30.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
