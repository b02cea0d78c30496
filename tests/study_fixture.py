"""A small study used by the runner tests (importable from a subprocess)."""

import sys
import time

import numpy as np

from causalkit.inference import difference_in_means


def design(rng):
    a = rng.permutation(np.repeat([0, 1], 30))
    return {"truth": 0.5, "y": 0.5 * a + rng.normal(size=60), "a": a}


def slow_dim(data):
    time.sleep(0.02)
    return difference_in_means(data["y"], data["a"])


def mean_only(data):
    return {"estimate": float(np.mean(data["y"])), "n_units": 60}


ESTIMATORS = {"dim": slow_dim, "mean": mean_only}

if __name__ == "__main__":
    # study_fixture.py OUT REPS [N_JOBS]
    from causalkit.simulation import run_study
    n_jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    run_study(design, ESTIMATORS, int(sys.argv[2]), seed=7, out=sys.argv[1], n_jobs=n_jobs,
              progress=False)
