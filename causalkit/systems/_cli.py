"""The command-line flags every systems driver shares: ``--reps --seed --jobs --out DIR --quick
--overwrite``, and the results folder they lead to (a resumable store, the result table and a
``MANIFEST.json``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

__all__ = ["add_shared_arguments", "sized", "results_store", "finish"]


def add_shared_arguments(parser: argparse.ArgumentParser, *, reps_help: str,
                         jobs: bool = True) -> None:
    """Add the shared flags (``--jobs`` only where repetitions may run in parallel)."""
    parser.add_argument("--reps", type=int, default=1, help=reps_help)
    parser.add_argument("--seed", type=int, default=0,
                        help="base seed: repetition r uses SeedSequence([seed, r])")
    if jobs:
        parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="results folder: the runs (*.jsonl, resumable), results.csv, "
                             "MANIFEST.json (with --quick: DIR/quick)")
    parser.add_argument("--quick", action="store_true",
                        help="seconds-scale sizes for the size options left unset")
    parser.add_argument("--overwrite", action="store_true",
                        help="discard the runs stored in --out instead of resuming")
    parser.set_defaults(_started=time.perf_counter())


def sized(value, full, quick: bool, quick_value):
    """A size option: the value given, else the quick or the full default."""
    if value is not None:
        return value
    return quick_value if quick else full


def results_store(args, name: str = "runs") -> Path | None:
    """The engine's results file ``name.jsonl`` under ``--out`` (None without ``--out``)."""
    if args.out is None:
        return None
    folder = Path(args.out) / "quick" if args.quick else Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.jsonl"


def finish(args, table, driver: str) -> None:
    """Write ``results.csv`` and ``MANIFEST.json`` next to the store, and say where."""
    store = results_store(args)
    if store is None:
        return
    from causalkit.studies import write_manifest

    table.to_csv(store.parent / "results.csv", index=False)
    write_manifest(store.parent, study=f"systems {driver}", reps=args.reps, seed=args.seed,
                   quick=args.quick, wall_seconds=round(time.perf_counter() - args._started, 3))
    print(f"causalkit systems {driver}: results in {store.parent}/ (results.csv, "
          "MANIFEST.json)")
