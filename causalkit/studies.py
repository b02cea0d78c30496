"""Registry of the packaged studies -- statistical and systems -- run by
``causalkit simulate NAME`` and by the scripts in ``simulations/``.

Each study is a function ``study(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None,
out=None, quick=False) -> pandas.DataFrame`` that runs the experiment engine
(:func:`causalkit.simulation.run_study` or :func:`~causalkit.simulation.run_experiment`),
storing results in ``out`` and in files named after it as they finish (resumable), and returns its
summary table. ``reps=None`` means the study's full-size default; ``quick=True`` a seconds-scale
version. :func:`run_named_study` gives every study its own results folder with a generated
``MANIFEST.json``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["STUDIES", "committed_results", "run_named_study", "study_main",
           "add_study_arguments", "list_studies", "default_out", "compact_table",
           "write_manifest", "difference_in_means_study"]

#: study name -> (module, function)
STUDIES = {
    "difference-in-means": ("causalkit.studies", "difference_in_means_study"),
    "borrowing-paper-a": ("causalkit.borrowing.studies", "paper_a"),
    "borrowing-gao": ("causalkit.borrowing.studies", "gao"),
    "borrowing-grid": ("causalkit.borrowing.studies", "design_grid"),
    "borrowing-grid-core": ("causalkit.borrowing.studies", "design_grid_core"),
    "borrowing-nsw-psid": ("causalkit.borrowing.studies", "nsw_psid"),
    "borrowing-bootstrap-paper-a": ("causalkit.borrowing.studies", "bootstrap_coverage"),
    "borrowing-bootstrap-adaptive": ("causalkit.borrowing.studies",
                                     "adaptive_bootstrap_coverage"),
    "borrowing-bootstrap-selective": ("causalkit.borrowing.studies",
                                      "selective_bootstrap_coverage"),
    "borrowing-interval-adaptive": ("causalkit.borrowing.studies",
                                    "adaptive_interval_coverage"),
    "longterm-linear": ("causalkit.longterm.studies", "linear_gaussian"),
    "longterm-ihdp": ("causalkit.longterm.studies", "ihdp"),
    "longterm-jobs": ("causalkit.longterm.studies", "jobs"),
    "longterm-balancenet": ("causalkit.longterm.network_studies", "balancenet_comparison"),
    "longterm-weights": ("causalkit.longterm.studies", "weights"),
    "policy-reference": ("causalkit.policy.studies", "reference"),
    "policy-econml": ("causalkit.policy.studies", "versus_econml"),
    "policy-overlap": ("causalkit.policy.studies", "overlap_grid"),
    "policy-objective": ("causalkit.policy.studies", "objective_choice"),
    "policy-bootstrap": ("causalkit.policy.studies", "learner_bootstrap"),
    "vclos-collision": ("causalkit.systems.netsched.studies", "collision"),
    "vclos-testbed": ("causalkit.systems.netsched.studies", "testbed"),
    "vclos-large": ("causalkit.systems.netsched.studies", "large"),
    "vclos-fragmentation": ("causalkit.systems.netsched.studies", "fragmentation"),
    "smartann-designs": ("causalkit.systems.ann.studies", "designs"),
    "smartann-comparison": ("causalkit.systems.ann.comparison", "comparison"),
    "argus-cases": ("causalkit.systems.tracing.studies", "cases"),
    "argus-calibration": ("causalkit.systems.tracing.studies", "calibration"),
    "argus-overhead": ("causalkit.systems.tracing.studies", "overhead"),
    "argus-scaling": ("causalkit.systems.tracing.studies", "scaling"),
    "argus-formats": ("causalkit.systems.tracing.studies", "compression_formats"),
    "shift-downtime": ("causalkit.systems.rdma.studies", "downtime"),
    "shift-transports": ("causalkit.systems.rdma.studies", "transports"),
    "shift-training": ("causalkit.systems.rdma.studies", "training"),
    "shift-overhead": ("causalkit.systems.rdma.studies", "overhead"),
    "liver-downtime": ("causalkit.systems.elastic.studies", "downtime"),
    "liver-scaling": ("causalkit.systems.elastic.studies", "scaling"),
    "liver-transfer": ("causalkit.systems.elastic.transfer_study", "transfer"),
}


def _study(name: str):
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; choose from {sorted(STUDIES)} "
                         "(causalkit simulate --list)")
    module, function = STUDIES[name]
    return getattr(importlib.import_module(module), function)


def list_studies() -> pd.DataFrame:
    """Every registered study: name, module and the first line of its description."""
    rows = []
    for name, (module, _) in STUDIES.items():
        try:
            doc = (_study(name).__doc__ or "").strip().splitlines()[0]
        except ImportError as exc:
            doc = f"(not available: {exc})"
        rows.append({"study": name, "module": module, "description": doc})
    return pd.DataFrame(rows)


def default_out(name: str, quick: bool = False) -> Path:
    """Default results folder of a study: ``results/NAME`` (``results/NAME/quick`` if quick)."""
    base = Path("results") / name
    return base / "quick" if quick else base


#: ``simulations/results`` of the source tree: where the committed study results live.
RESULTS_ROOT = Path(__file__).resolve().parents[1] / "simulations" / "results"


def committed_results(name: str, results=None) -> Path | None:
    """The committed results folder of study (or driver) ``name``: ``NAME`` under
    ``RESULTS_ROOT``, or under ``results`` when given; ``None`` when it is not there (an
    installed package carries no results)."""
    folder = (RESULTS_ROOT if results is None else Path(results)) / name
    return folder if folder.is_dir() else None


def compact_table(table: pd.DataFrame, width: int = 100) -> str:
    """A summary table as text no wider than ``width`` characters (long tables wrap)."""
    return table.round(4).to_string(line_width=width, max_colwidth=24)


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def write_manifest(folder, **info) -> Path:
    """Write ``folder/MANIFEST.json``: package version, git commit, command line, Python, host
    CPU count, provenance ``info`` (study, reps, seed, wall time ...) and every file the folder
    holds (subfolders with a manifest of their own excluded).

    Results stores (files with a ``.meta.json`` sidecar) are listed with their design fingerprint
    and number of stored records; other files with their size.
    """
    import json

    from causalkit import __version__
    from causalkit._store import atomic_write_json, meta_path, read_records

    folder = Path(folder)
    own = [p for p in folder.rglob("*") if p.is_file() and not any(
        (parent / "MANIFEST.json").exists() for parent in p.parents
        if parent != folder and folder in parent.parents)]
    files = {}
    for path in sorted(own):
        rel = path.relative_to(folder).as_posix()
        if path.name == "MANIFEST.json" or path.name.endswith(".meta.json"):
            continue
        entry = {"bytes": path.stat().st_size}
        sidecar = meta_path(path)
        if sidecar.exists():
            meta = json.loads(sidecar.read_text())
            if "fingerprint" in meta:
                entry.update(fingerprint=meta["fingerprint"], records=len(read_records(path)))
            else:
                entry["fingerprint"] = None  # an older CSV store: no fingerprint was recorded
        files[rel] = entry
    program = Path(sys.argv[0])   # ``python -m causalkit`` runs causalkit/__main__.py
    program = program.parent.name if program.name == "__main__.py" else program.name
    manifest = {"package_version": __version__, "git_commit": _git_commit(),
                "command": shlex.join([program, *sys.argv[1:]]),
                "python": platform.python_version(), "host_cpu_count": os.cpu_count(),
                **info, "files": files}
    path = folder / "MANIFEST.json"
    atomic_write_json(path, manifest)
    return path


def run_named_study(name: str, *, reps=None, seed: int = 2024, n_jobs: int = 1,
                    backend: str = "loky", scheduler=None, out=None, quick: bool = False,
                    overwrite: bool = False, verbose: bool = True) -> pd.DataFrame:
    """Run the registered study ``name`` into the folder ``out`` and return its summary.

    Parameters
    ----------
    name : str
        A key of ``causalkit.studies.STUDIES``.
    reps, seed, n_jobs, backend, scheduler, quick
        Passed to the study function.
    out : str or Path, optional
        Results folder (default :func:`default_out`). The study stores its replications in
        ``out/NAME.jsonl`` (and files named after it); ``out/MANIFEST.json`` records the study,
        design fingerprints, package version, git commit, command line, reps, wall time and the
        host's CPU count.
    overwrite : bool
        Discard the folder's stored results instead of resuming (needed when the design changed).
    verbose : bool
        Print where the results went and a compact summary table.
    """
    from causalkit.simulation import engine_options

    study = _study(name)
    folder = Path(out) if out is not None else default_out(name, quick)
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with engine_options(overwrite=overwrite, params={"quick": bool(quick)}):
        summary = study(reps=reps, seed=seed, n_jobs=n_jobs, backend=backend,
                        scheduler=scheduler, out=folder / f"{name}.jsonl", quick=quick)
    manifest = write_manifest(
        folder, study=name, reps=reps, seed=seed, quick=bool(quick), n_jobs=n_jobs, backend=backend,
        wall_seconds=round(time.perf_counter() - start, 3))
    if verbose:
        print(f"{name}: results in {folder}/ (provenance: {manifest.name})")
        print(compact_table(summary))
    return summary


def study_main(name: str, argv=None) -> pd.DataFrame:
    """Command line shared by the ``simulations/*.py`` scripts."""
    parser = argparse.ArgumentParser(description=f"simulation study {name}")
    add_study_arguments(parser)
    args = parser.parse_args(argv)
    return run_named_study(name, reps=args.reps, seed=args.seed, n_jobs=args.jobs,
                           backend=args.backend, scheduler=args.scheduler, out=args.out,
                           quick=args.quick, overwrite=args.overwrite)


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    """The shared study flags: ``--reps --seed --jobs --out DIR --quick --overwrite`` (and the
    Dask ``--backend --scheduler``)."""
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions (default: the study's full size)")
    parser.add_argument("--seed", type=int, default=2024, help="base seed")
    parser.add_argument("--jobs", type=int, default=1, help="local worker processes")
    parser.add_argument("--backend", choices=("loky", "dask"), default="loky")
    parser.add_argument("--scheduler", default=None, help="dask scheduler address (backend=dask)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="results folder (default: results/STUDY, or results/STUDY/quick)")
    parser.add_argument("--quick", action="store_true", help="seconds-scale smoke run")
    parser.add_argument("--overwrite", action="store_true",
                        help="discard stored results instead of resuming")


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
