"""``causalkit systems ann``: diagnose and auto-design an IVF-PQ or HNSW index on a data set,
and sweep the default and the design on test queries, through the experiment engine.

Top-level imports stay light; faiss and the driver load inside :func:`run`.
"""

from __future__ import annotations

import argparse
import sys

from causalkit.systems._cli import add_shared_arguments, finish, results_store, sized


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``causalkit systems ann``."""
    parser.add_argument("--dataset", default="sift",
                        help="offline vector set: sift, patches, text, synthetic, or the path "
                             "of an ann-benchmarks .hdf5 file (causalkit.datasets.load_ann)")
    parser.add_argument("--family", default="ivfpq", choices=("ivfpq", "hnsw"))
    parser.add_argument("--n-base", type=int, default=None,
                        help="base vectors (default 20000; --quick: 3000)")
    parser.add_argument("--n-queries", type=int, default=None,
                        help="validation and test queries, each (default 500; --quick: 100)")
    parser.add_argument("--k", type=int, default=10, help="Recall@k (default 10)")
    parser.add_argument("--target-recall", type=float, default=0.9)
    add_shared_arguments(parser, reps_help="repetitions of diagnosis, auto-design and sweeps "
                                           "(the design seeded from SeedSequence([seed, r]))",
                         jobs=False)


def run(args) -> int:
    """Diagnose, auto-design and sweep (printing the diagnosis and the design as they are
    found), print the test-query table; with ``--out`` also write ``diagnosis.csv``,
    ``actions.csv`` and ``smartann.png`` (Recall/QPS curves). Returns the exit code."""
    from causalkit.simulation import StoreLocked
    from causalkit.systems.ann.experiment import ANNExperiment
    from causalkit.systems.ann.metrics import single_thread

    exp = ANNExperiment(datasets=(args.dataset,), families=(args.family,), k=args.k,
                        target_recall=args.target_recall,
                        n_base=sized(args.n_base, 20000, args.quick, 3000),
                        n_queries=sized(args.n_queries, 500, args.quick, 100),
                        repeats=args.reps, random_state=args.seed, progress=True)
    store = results_store(args)
    try:
        with single_thread():
            table = exp.run(out=store, overwrite=args.overwrite)
    except (ValueError, TypeError, StoreLocked) as exc:   # bad sizes, a changed design, a lock
        print(f"causalkit systems ann: {exc}", file=sys.stderr)
        return 2
    cols = ["design", "repetition", "budget", "recall", "qps", "build_s"]
    print(table[cols].round(4).to_string(index=False))
    summary = exp.summary_.iloc[0]
    print(f"test queries, Recall@{args.k} vs QPS on 1 thread (real faiss engine, not "
          f"simulated): recall gain at equal QPS {summary.recall_gain_at_equal_qps_median:.3f}"
          f", QPS ratio at equal recall {summary.qps_ratio_at_equal_recall_median:.2f}; "
          f"diagnosis + design = {summary.overhead_x_build:.1f} x the baseline build "
          f"({summary.baseline_build_s:.1f} s)")
    if store is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from causalkit.systems.ann.plotting import plot_curves

        key = (args.dataset, args.family)
        exp.diagnoses_[key].to_csv(store.parent / "diagnosis.csv", index=False)
        exp.actions_[key].to_csv(store.parent / "actions.csv", index=False)
        fig = plot_curves(table[table["repetition"] == 0],
                          title=f"{args.dataset} / {args.family}")
        fig.savefig(store.parent / "smartann.png", dpi=120)
        plt.close(fig)
    finish(args, table, "ann")
    return 0
