"""``causalkit systems ann``: diagnose and auto-design an IVF-PQ or HNSW index on a data set.

Top-level imports stay light; faiss and the driver load inside :func:`run`.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``causalkit systems ann``."""
    parser.add_argument("--dataset", default="sift",
                        choices=("sift", "patches", "text", "synthetic"),
                        help="offline vector set (causalkit.datasets.load_ann)")
    parser.add_argument("--family", default="ivfpq", choices=("ivfpq", "hnsw"))
    parser.add_argument("--n-base", type=int, default=20000, help="base vectors (default 20000)")
    parser.add_argument("--n-queries", type=int, default=500,
                        help="validation and test queries, each (default 500)")
    parser.add_argument("--k", type=int, default=10, help="Recall@k (default 10)")
    parser.add_argument("--target-recall", type=float, default=0.9)
    parser.add_argument("--out", default=None,
                        help="folder for diagnosis.csv, actions.csv and smartann.png")
    parser.add_argument("--seed", type=int, default=0)


def run(args) -> int:
    """Run the diagnosis and the auto-design; print both tables. Returns the exit code."""
    from pathlib import Path

    from causalkit.datasets.ann import load_ann
    from causalkit.systems.ann.experiment import ANNExperiment
    from causalkit.systems.ann.metrics import measure_qps, recall_at_k
    from causalkit.systems.ann.smartann import SmartANN

    ds = load_ann(args.dataset, n_base=args.n_base, n_queries=args.n_queries,
                  n_validation=args.n_queries, random_state=args.seed)
    print(ds)
    smart = SmartANN(ANNExperiment.baseline(args.family, ds.d), k=args.k,
                     target_recall=args.target_recall, random_state=args.seed)
    diag = smart.diagnose(ds.xb, ds.xv, ds.gt_val)
    print(diag.summary())
    design = smart.auto_design(ds.xb, ds.xv, ds.gt_val, diagnosis=diag)
    print(design.summary())
    wf = design.workflow
    qps, (_, ids) = measure_qps(lambda q: wf.search(q, args.k), ds.xq, 3)
    print(f"test queries: Recall@{args.k}={recall_at_k(ids, ds.gt, args.k):.3f} "
          f"QPS={qps:.0f} (1 thread; real faiss engine, not simulated)")
    print(f"diagnosis {diag.seconds:.1f} s + design {design.seconds:.1f} s = "
          f"{(diag.seconds + design.seconds) / diag.build_seconds:.1f} x the baseline build "
          f"({diag.build_seconds:.1f} s)")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        diag.table.to_csv(out / "diagnosis.csv", index=False)
        design.actions.to_csv(out / "actions.csv", index=False)
        smart.plot().savefig(out / "smartann.png", dpi=120)
        print(f"wrote {out}/diagnosis.csv, actions.csv, smartann.png")
    return 0
