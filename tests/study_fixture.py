"""A small study used by the runner tests (importable from a subprocess)."""

import os
import sys
import time

import numpy as np

from causalkit.inference import difference_in_means


def design(rng):
    a = rng.permutation(np.repeat([0, 1], 30))
    return {"truth": 0.5, "y": 0.5 * a + rng.normal(size=60), "a": a}


_calls = 0


def slow_dim(data):
    """Sleep 20 ms; after five calls, also wait while the file named by ``STUDY_FIXTURE_HOLD``
    exists (at most 60 s), so a test can keep this writer running as long as it needs."""
    global _calls
    _calls += 1
    hold = os.environ.get("STUDY_FIXTURE_HOLD")
    deadline = time.monotonic() + 60
    while hold and _calls > 5 and os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.02)
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
