"""Registry of the packaged simulation studies, run by ``causalkit simulate NAME`` and by the
scripts in ``simulations/``.

Each study is a function ``study(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None,
out=None, quick=False) -> pandas.DataFrame`` that runs :func:`causalkit.simulation.run_study`
(writing replication rows to ``out`` as they finish, resumable) and returns the summary table.
``reps=None`` means the study's full-size default; ``quick=True`` a seconds-scale version.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["STUDIES", "run_named_study", "study_main", "difference_in_means_study"]

#: study name -> (module, function)
STUDIES = {
    "difference-in-means": ("causalkit.studies", "difference_in_means_study"),
    "borrowing-paper-a": ("causalkit.borrowing.studies", "paper_a"),
    "borrowing-gao": ("causalkit.borrowing.studies", "gao"),
    "longterm-linear": ("causalkit.longterm.studies", "linear_gaussian"),
    "longterm-ihdp": ("causalkit.longterm.studies", "ihdp"),
    "longterm-jobs": ("causalkit.longterm.studies", "jobs"),
    "policy-reference": ("causalkit.policy.studies", "reference"),
    "policy-econml": ("causalkit.policy.studies", "versus_econml"),
    "vclos-collision": ("causalkit.systems.netsched.studies", "collision"),
    "vclos-testbed": ("causalkit.systems.netsched.studies", "testbed"),
    "vclos-large": ("causalkit.systems.netsched.studies", "large"),
}


def run_named_study(name: str, *, reps=None, seed: int = 2024, n_jobs: int = 1,
                    backend: str = "loky", scheduler=None, out=None,
                    quick: bool = False) -> pd.DataFrame:
    """Run the registered study ``name`` and print its summary table."""
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; choose from {sorted(STUDIES)}")
    module, function = STUDIES[name]
    study = getattr(importlib.import_module(module), function)
    out = Path(out) if out is not None else Path("results") / f"{name}.csv"
    summary = study(reps=reps, seed=seed, n_jobs=n_jobs, backend=backend, scheduler=scheduler,
                    out=out, quick=quick)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summary.round(4).to_string())
    return summary


def study_main(name: str, argv=None) -> pd.DataFrame:
    """Command line shared by the ``simulations/*.py`` scripts."""
    parser = argparse.ArgumentParser(description=f"simulation study {name}")
    parser.add_argument("--reps", type=int, default=None, help="replications (default: full size)")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--jobs", type=int, default=1, help="local worker processes")
    parser.add_argument("--backend", choices=("loky", "dask"), default="loky")
    parser.add_argument("--scheduler", default=None, help="dask scheduler address")
    parser.add_argument("--out", default=None, help="replication CSV (resumable)")
    parser.add_argument("--quick", action="store_true", help="seconds-scale smoke run")
    args = parser.parse_args(argv)
    return run_named_study(name, reps=args.reps, seed=args.seed, n_jobs=args.jobs,
                           backend=args.backend, scheduler=args.scheduler, out=args.out,
                           quick=args.quick)


def _dim_design(rng: np.random.Generator, n: int = 200, effect: float = 1.0) -> dict:
    a = rng.permutation(np.repeat([0, 1], n // 2))
    y = effect * a + rng.normal(size=n) * (1.0 + a)
    return {"truth": effect, "y": y, "a": a}


def _dim_estimator(data: dict):
    from causalkit.inference import difference_in_means
    return difference_in_means(data["y"], data["a"])


def difference_in_means_study(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky",
                              scheduler=None, out=None, quick: bool = False) -> pd.DataFrame:
    """Coverage of the Neyman interval of a difference in means (n = 200, unequal variances)."""
    from causalkit.simulation import run_study, summarize
    reps = reps or (200 if quick else 2000)
    results = run_study(_dim_design, {"difference_in_means": _dim_estimator}, reps, seed,
                        n_jobs=n_jobs, backend=backend, scheduler=scheduler, out=out)
    return summarize(results)
