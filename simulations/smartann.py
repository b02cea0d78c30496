"""SmartANN study: default vs auto-designed IVF-PQ and HNSW indexes on offline vector sets
(study ``smartann-designs``, :mod:`causalkit.systems.ann.studies`).

Writes into simulations/results/smartann/ (``quick/`` with --quick): the engine's stores
(``raw/designs_<set>.jsonl``, resumable: a rerun runs only what is missing, ``--overwrite``
starts afresh), curves.csv (one row per design, budget and repetition), summary.csv,
diagnosis_<set>_<family>.csv, actions_<set>_<family>.csv, curves.png and MANIFEST.json.

    python simulations/smartann.py            # full size (tens of minutes on 2 cores)
    python simulations/smartann.py --quick    # seconds-scale smoke run (synthetic data)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

from causalkit.simulation import engine_options
from causalkit.studies import add_study_arguments, write_manifest
from causalkit.systems.ann.studies import FULL, design_runs

HERE = Path(__file__).resolve().parent


def plot_all(curves: pd.DataFrame, path: Path) -> None:
    import matplotlib
    if "ipykernel" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from causalkit.systems.ann.plotting import plot_curves
    pairs = list(curves.groupby(["dataset", "family"], sort=False).groups)
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.6 * len(pairs), 4), squeeze=False)
    for ax, (name, fam) in zip(axes[0], pairs, strict=False):
        sub = curves[(curves["dataset"] == name) & (curves["family"] == fam)
                     & (curves["repetition"] == 0)]
        plot_curves(sub, ax=ax, title=f"{name} / {fam}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_arguments(parser)
    parser.add_argument("--datasets", nargs="+", default=None,
                        help=f"data sets (default {' '.join(FULL['datasets'])}; --quick: "
                             "synthetic)")
    parser.add_argument("--families", nargs="+", default=None, choices=("ivfpq", "hnsw"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = Path(args.out) if args.out else HERE / "results" / "smartann"
    out = out / "quick" if args.quick else out
    (out / "raw").mkdir(parents=True, exist_ok=True)
    with engine_options(overwrite=args.overwrite, params={"quick": args.quick}):
        runs = design_runs(args.reps, args.seed, out / "raw" / "designs.jsonl", args.quick,
                           args.datasets, args.families, progress=True)
    for exp in runs:
        for (name, fam), table in exp.diagnoses_.items():
            table.to_csv(out / f"diagnosis_{name}_{fam}.csv", index=False)
            exp.actions_[(name, fam)].to_csv(out / f"actions_{name}_{fam}.csv", index=False)
    curves = pd.concat([exp.results_ for exp in runs], ignore_index=True)
    summary = pd.concat([exp.summary_ for exp in runs], ignore_index=True)
    curves.to_csv(out / "curves.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    plot_all(curves, out / "curves.png")
    write_manifest(out, study="smartann-designs", reps=args.reps, seed=args.seed,
                   quick=args.quick, wall_seconds=round(time.perf_counter() - start, 3))
    print(summary.T.to_string(header=False))
    print(f"smartann: results in {out}/ (provenance: MANIFEST.json)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.exit(main())
