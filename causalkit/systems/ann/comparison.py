"""SmartANN against the baselines a practitioner would run, at fixed operating points.

For each data set and memory budget (``"unconstrained"``, and ``"1/8"``: at most one eighth of
the raw float32 vectors, ``4d / 8`` bytes per vector, where compression is required):

1. SmartANN (diagnosis of the default ``IVF{sqrt n},PQ{d/4}`` at Recall@10 0.9, then one
   auto-design per recall target) is timed on the wall clock: its *tuning time*.
2. faiss autotune and the index-type x parameter grid
   (:mod:`causalkit.systems.ann.baselines`) each get that tuning time as their budget.
3. At each target (Recall@10 0.8 / 0.9 / 0.95 on the validation queries) the best baseline
   design is the faster (validation QPS) of the two tuners' choices. SmartANN's design and it
   are rebuilt from scratch (timed build), and measured on the disjoint test queries: recall,
   bytes per vector (serialized index / n), and single-thread QPS interleaved over
   ``rounds`` rounds with the paired CI of the QPS ratio
   (:func:`~causalkit.systems.ann.throughput.ratio_ci`), once on the thread CPU clock and once
   on the wall clock. The 1-minute load average of the machine is recorded with every row.

Every engine is real (faiss on this CPU); nothing is simulated. Run through the experiment
engine: one configuration per (data set, memory budget).

    python -m causalkit.systems.ann.comparison                 # sift + patches, 10k vectors
    python -m causalkit.systems.ann.comparison --quick         # synthetic, seconds to minutes
    python -m causalkit.systems.ann.comparison --collect       # table + manifest from stores
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

TARGETS = (0.8, 0.9, 0.95)
MEMORY = {"unconstrained": None, "1/8": 1 / 8}
FULL = {"datasets": ("sift", "patches"), "n_base": 10000, "n_queries": 500, "rounds": 5}
QUICK = {"datasets": ("synthetic",), "n_base": 10000, "n_queries": 200, "rounds": 3}


def memory_budget(memory: str, d: int) -> float | None:
    """Bytes per vector allowed by the budget ``memory`` (a key of :data:`MEMORY`)."""
    if memory not in MEMORY:
        raise ValueError(f"memory must be one of {tuple(MEMORY)}; got {memory!r}")
    frac = MEMORY[memory]
    return None if frac is None else frac * 4 * d


def _best_baseline(results, target, budget):
    picks = [(r.method, r.choose(target, budget)) for r in results]
    picks = [(m, p) for m, p in picks if p is not None]
    return max(picks, key=lambda mp: mp[1]["qps"], default=(None, None))


def compare_once(rng: np.random.Generator, rep: int, *, dataset: str, memory: str,
                 n_base: int, n_queries: int, rounds: int, data_seed: int) -> list[dict]:
    """One (data set, memory budget): the engine's ``run_once`` (see the module docstring)."""
    import faiss

    from causalkit.datasets.ann import load_ann
    from causalkit.systems.ann.baselines import autotune, build_factory, grid
    from causalkit.systems.ann.ivfpq import IVFPQWorkflow
    from causalkit.systems.ann.metrics import recall_at_k, single_thread
    from causalkit.systems.ann.smartann import SmartANN, _unbuilt
    from causalkit.systems.ann.throughput import compare_qps, index_bytes_per_vector

    ds = load_ann(dataset, n_base=n_base, n_queries=n_queries, n_validation=n_queries,
                  random_state=data_seed)
    d, k = ds.d, 10
    budget = memory_budget(memory, d)
    with single_thread():
        t0 = time.perf_counter()
        smart = SmartANN(IVFPQWorkflow(nprobe=16, pq_m=max(1, d // 4)), k=k, target_recall=0.9,
                         memory_budget=budget, random_state=int(rng.integers(2**31 - 1)))
        diag = smart.diagnose(ds.xb, ds.xv, ds.gt_val)
        designs = {}
        for target in TARGETS:
            smart.target_recall = target
            des = smart.auto_design(ds.xb, ds.xv, ds.gt_val, diagnosis=diag)
            designs[target] = (_unbuilt(des.workflow), des.design, ";".join(des.applied))
        tuning_s = time.perf_counter() - t0
        tuned = [autotune(ds.xb, ds.xv, ds.gt_val, k, tuning_s, budget),
                 grid(ds.xb, ds.xv, ds.gt_val, k, tuning_s, budget)]
    rows = []
    ps = faiss.ParameterSpace()
    for target in TARGETS:
        wf, point, applied = designs[target]
        method, pick = _best_baseline(tuned, target, budget)
        row = {"target_recall": target, "memory_budget_bytes": budget, "n_base": len(ds.xb),
               "d": d, "smartann_tuning_s": tuning_s, "smartann_actions": applied,
               "smartann_val_recall": point.recall, "smartann_val_reached": point.reached,
               "bottlenecks": ";".join(diag.bottlenecks),
               **{f"{r.method}_tuning_s": r.seconds for r in tuned},
               **{f"{r.method}_points": len(r.table) for r in tuned},
               "simulated": False}
        built = wf.build(ds.xb)
        built.set_budget(point.budget)
        row.update(smartann_design=built.describe(), smartann_build_s=built.build_seconds_,
                   smartann_bytes_per_vector=index_bytes_per_vector(built.index_, len(ds.xb)),
                   smartann_test_recall=recall_at_k(built.search(ds.xq, k)[1], ds.gt, k))
        if pick is None:
            row.update(baseline_method="none reaches the target within the budget")
            rows.append(row)
            continue
        index, build_s = build_factory(pick["factory"], ds.xb)
        ps.set_index_parameters(index, pick["params"])
        row.update(baseline_method=method, baseline_design=f"{pick['factory']} [{pick['params']}]",
                   baseline_build_s=build_s, baseline_val_recall=pick["recall"],
                   baseline_bytes_per_vector=index_bytes_per_vector(index, len(ds.xb)),
                   baseline_test_recall=recall_at_k(index.search(ds.xq, k)[1], ds.gt, k))
        for clock in ("thread", "wall"):
            row[f"load_1min_{clock}"] = os.getloadavg()[0]
            ci, q = compare_qps(built.search, index.search, ds.xq, k, rounds, clock=clock)
            row.update({f"smartann_qps_{clock}": float(np.median(q[0])),
                        f"baseline_qps_{clock}": float(np.median(q[1])),
                        f"qps_ratio_{clock}": ci.ratio, f"qps_ratio_lower_{clock}": ci.lower,
                        f"qps_ratio_upper_{clock}": ci.upper, "rounds": ci.rounds})
        rows.append(row)
    return rows


def run(datasets=None, quick: bool = False, seed: int = 2024, out=None,
        overwrite: bool | None = None) -> pd.DataFrame:
    """Run the comparison through the experiment engine; one row per (data set, memory
    budget, target). ``out`` (a ``.jsonl`` path) makes it resumable."""
    from causalkit.simulation import run_experiment

    cfg = QUICK if quick else FULL
    configs = [{"dataset": name, "memory": memory, "n_base": cfg["n_base"],
                "n_queries": cfg["n_queries"], "rounds": cfg["rounds"], "data_seed": seed}
               for name in (datasets or cfg["datasets"]) for memory in MEMORY]
    return run_experiment(compare_once, configs, 1, seed, out=out, overwrite=overwrite,
                          progress=True)


def comparison(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
               out=None, quick: bool = False) -> pd.DataFrame:
    """SmartANN against faiss autotune and a grid at fixed recall targets and memory budgets
    (the registered study ``smartann-comparison``). One repetition per configuration, run
    serially (interleaved QPS timing needs an otherwise idle core): ``reps``, ``n_jobs``,
    ``backend`` and ``scheduler`` are accepted for the shared study signature and must keep
    their defaults."""
    if reps not in (None, 1) or n_jobs != 1 or backend != "loky" or scheduler is not None:
        raise ValueError("smartann-comparison runs one serial repetition per configuration; "
                         "leave reps, n_jobs, backend and scheduler at their defaults")
    return run(quick=quick, seed=seed, out=out)


def main(argv=None) -> int:
    """Command line: write ``comparison[_<set>].csv`` and ``MANIFEST.json`` into ``--out``."""
    from causalkit.studies import write_manifest

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", default="simulations/results/smartann/comparison")
    parser.add_argument("--collect", action="store_true",
                        help="run nothing: write comparison.csv and the manifest from the "
                             "configurations already in the stores under OUT/raw")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = Path(args.out) / ("quick" if args.quick else "")
    (out / "raw").mkdir(parents=True, exist_ok=True)
    if args.collect:
        from causalkit.simulation import load_results
        table = pd.concat([load_results(p) for p in sorted((out / "raw").glob("*.jsonl"))],
                          ignore_index=True)
        table.to_csv(out / "comparison.csv", index=False)
        write_manifest(out, study="smartann-comparison", seed=args.seed, quick=args.quick,
                       collected=True)
    else:
        tag = "_".join(args.datasets) if args.datasets else "all"
        table = run(args.datasets, args.quick, args.seed,
                    out / "raw" / f"comparison_{tag}.jsonl")
        table.to_csv(out / f"comparison_{tag}.csv", index=False)
        write_manifest(out, study="smartann-comparison", seed=args.seed, quick=args.quick,
                       wall_seconds=round(time.perf_counter() - start, 3))
    cols = ["dataset", "memory", "target_recall", "smartann_design", "baseline_design",
            "qps_ratio_thread", "qps_ratio_lower_thread", "qps_ratio_upper_thread"]
    print(table[[c for c in cols if c in table]].to_string(index=False))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    raise SystemExit(main())
