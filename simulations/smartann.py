"""SmartANN study: default vs auto-designed IVF-PQ and HNSW indexes on offline vector sets.

For each data set and family: the baseline a user would pick (IVF{sqrt n},PQ{d/4} with an nprobe
sweep; HNSW M=16, efConstruction=200 with an ef sweep), its diagnosis table, the auto-designed
index, Recall@10 vs single-thread QPS curves of both (same faiss engine), the recall gain at
equal QPS, the QPS gain at equal recall, and diagnosis + design time as a multiple of the
baseline build time. For IVF-PQ the index configured directly with faiss is swept as well.

Writes into simulations/results/smartann/: curves.csv (one row per design, budget and
repetition), summary.csv, diagnosis_<set>_<family>.csv, actions_<set>_<family>.csv and
curves.png. Each (data set, family) pair is appended as it finishes; a rerun skips pairs already
in summary.csv.

    python simulations/smartann.py            # full size (tens of minutes on 2 cores)
    python simulations/smartann.py --quick    # seconds-scale smoke run (synthetic data)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parent / "results" / "smartann"


def _append(df: pd.DataFrame, path: Path) -> None:
    df.to_csv(path, mode="a", header=not path.exists(), index=False)


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
    parser.add_argument("--quick", action="store_true", help="seconds-scale smoke run")
    parser.add_argument("--datasets", nargs="+", default=["sift", "patches", "text"])
    parser.add_argument("--families", nargs="+", default=["ivfpq", "hnsw"])
    parser.add_argument("--n-base", type=int, default=30000)
    parser.add_argument("--n-queries", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", default=None, help="output folder (default results/smartann)")
    args = parser.parse_args(argv)

    import faiss

    from causalkit.systems.ann.experiment import ANNExperiment
    faiss.omp_set_num_threads(1)          # single-thread builds and searches (shared 2 cores)
    out = Path(args.out) if args.out else OUT
    if args.quick:
        args.datasets, args.n_base, args.n_queries = ["synthetic"], 10000, 200
        out = out / "quick"
    out.mkdir(parents=True, exist_ok=True)
    summary_path, curves_path = out / "summary.csv", out / "curves.csv"
    done = set()
    if summary_path.exists():
        prev = pd.read_csv(summary_path)
        done = set(zip(prev["dataset"], prev["family"], strict=True))
    for name in args.datasets:
        for fam in args.families:
            if (name, fam) in done:
                print(f"[{name}/{fam}] already in {summary_path}; skipped")
                continue
            n_base = None if name == "text" else args.n_base
            exp = ANNExperiment(datasets=(name,), families=(fam,), n_base=n_base,
                                n_queries=args.n_queries, repeats=args.repeats,
                                qps_repeats=2 if args.quick else 3, progress=True)
            curves = exp.run()
            exp.diagnoses_[(name, fam)].to_csv(out / f"diagnosis_{name}_{fam}.csv", index=False)
            exp.actions_[(name, fam)].to_csv(out / f"actions_{name}_{fam}.csv", index=False)
            _append(curves, curves_path)
            _append(exp.summary_, summary_path)
            print(exp.summary_.T.to_string(), flush=True)
    curves = pd.read_csv(curves_path)
    plot_all(curves, out / "curves.png")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.exit(main())
