"""Cost of the experiment engine against a plain joblib loop.

Two workloads, each run ``--reps`` times: a trivial one (the mean of 50 normal draws) and a small
real one (the package's Neyman difference in means on n = 400 units, with its interval):

* reference: ``joblib.Parallel(n_jobs)(delayed(one)(seed, r) for r in range(reps))`` and one
  ``DataFrame.to_csv`` of all rows at the end (no resume, no crash safety);
* engine: ``run_study(..., out=FILE, progress=False)``: JSON Lines store (records written in
  batches at most 50 ms after they finish, ``fsync`` at most once a second), lock, design
  fingerprint, per-replication warning counts and timings.

Both run at ``n_jobs`` 1 and 2, ``--repeat`` times each, interleaved, each run writing a new
file; printed are the best time of each and the median of the paired ratios engine / reference
(target: at most 1.5). Each timed run follows an untimed 50-replication run of the same kind,
so both start with a warm worker pool: the engine's loky pool carries an initializer (workers
exit when the study's process dies), so going from a plain joblib loop to the engine, or back,
restarts the pool once. That one-off cost per switch is printed as ``switch s`` (the median
duration of the engine's warm-up runs, which follow a reference run). Timings depend on
machine load; the numbers printed are what this run measured.

    python benchmarks/simulation_engine.py [--reps 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from causalkit.inference import difference_in_means
from causalkit.simulation import run_study


def design(rng, n=50):
    a = rng.permutation(np.repeat([0, 1], n // 2))
    return {"truth": 0.5, "y": 0.5 * a + rng.normal(size=n), "a": a}


def mean(data):
    return float(np.mean(data["y"]))


def dim(data):
    return difference_in_means(data["y"], data["a"])


#: name -> (design, estimator, what it is)
WORKLOADS = {"trivial": (design, mean, "mean of 50 normal draws"),
             "dim": (partial(design, n=400), dim,
                     "Neyman difference in means with its interval, n = 400")}


def one(workload, seed, rep):
    make, estimator, _ = WORKLOADS[workload]
    data = make(np.random.default_rng([seed, rep]))
    output = estimator(data)
    value = output.value if hasattr(output, "value") else output
    return {"rep": rep, "estimator": workload, "estimate": value, "truth": data["truth"]}


def reference(workload, reps, n_jobs, out):
    rows = Parallel(n_jobs=n_jobs)(delayed(one)(workload, 0, r) for r in range(reps))
    pd.DataFrame(rows).to_csv(out, index=False)


def engine(workload, reps, n_jobs, out):
    make, estimator, _ = WORKLOADS[workload]
    run_study(make, {workload: estimator}, reps, 0, n_jobs=n_jobs, out=out, progress=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{args.reps} replications, {args.repeat} interleaved runs each")
    for workload, (_, _, what) in WORKLOADS.items():
        print(f"\n{workload}: {what}")
        print(f"{'n_jobs':>6} {'reference s':>12} {'engine s':>10} {'median ratio':>13} "
              f"{'engine extra us/rep':>20} {'switch s':>9}")
        with tempfile.TemporaryDirectory() as tmp:
            for n_jobs in (1, 2):
                times = {"reference": [], "engine": [], "warm-up": []}
                for i in range(args.repeat):
                    for name, fn in (("reference", reference), ("engine", engine)):
                        start = time.perf_counter()
                        fn(workload, 50, n_jobs, Path(tmp) / f"warm-{name}-{n_jobs}-{i}.out")
                        if name == "engine":
                            times["warm-up"].append(time.perf_counter() - start)
                        start = time.perf_counter()
                        fn(workload, args.reps, n_jobs, Path(tmp) / f"{name}-{n_jobs}-{i}.out")
                        times[name].append(time.perf_counter() - start)
                ratio = np.median(np.divide(times["engine"], times["reference"]))
                ref, eng = min(times["reference"]), min(times["engine"])
                extra = 1e6 * (eng - ref) / args.reps
                switch = np.median(times["warm-up"])
                print(f"{n_jobs:>6} {ref:>12.3f} {eng:>10.3f} {ratio:>13.2f} {extra:>20.1f} "
                      f"{switch:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
