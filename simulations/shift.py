"""SHIFT study on emulated NICs: downtime per fault type, datapath overhead with vs without SHIFT,
training progress vs checkpoint-restart, and the trilemma model check.

Every NIC here is a software emulation (``causalkit.systems.rdma.verbs``); all tables carry
``emulated=True`` and the figures say so. Timings are wall-clock on this (shared) machine.

Usage::

    python simulations/shift.py            # full size, writes simulations/results/shift/
    python simulations/shift.py --quick    # seconds-scale smoke run, writes .../shift/quick/

The downtime and transport studies run through the experiment engine
(``causalkit simulate shift-downtime`` / ``shift-transports`` run them alone): their runs are
stored in ``raw/`` as they finish and a rerun resumes. The other sections write their CSV when
they finish and a rerun skips sections whose CSV exists, unless ``--overwrite``.
``MANIFEST.json`` records the provenance.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from causalkit.simulation import engine_options  # noqa: E402
from causalkit.studies import add_study_arguments, write_manifest  # noqa: E402
from causalkit.systems.rdma import (  # noqa: E402
    FailoverTrainingExperiment,
    check_trilemma,
    measure_datapath_overhead,
)
from causalkit.systems.rdma.studies import downtime_runs, summarize_downtime, transports  # noqa: E402

HERE = Path(__file__).resolve().parent
FULL = {"overhead_ops": 5000, "overhead_reps": 5, "train_iters": 120, "ckpt_every": 40,
        "fault_at_iter": 90, "n_params": 8192, "restart_s": 2.0, "train_reps": 3}
QUICK = {"overhead_ops": 256, "overhead_reps": 1, "train_iters": 16, "ckpt_every": 5,
         "fault_at_iter": 8, "n_params": 512, "restart_s": 0.2, "train_reps": 1}


def _cached(path: Path, overwrite: bool, fn):
    if path.exists() and not overwrite:
        print(f"  {path.name}: exists, skipped (use --overwrite to recompute)")
        return pd.read_csv(path)
    t0 = time.perf_counter()
    df = fn()
    df.to_csv(path, index=False)
    print(f"  {path.name}: {len(df)} rows in {time.perf_counter() - t0:.1f} s")
    return df


def training_study(cfg, prog_path: Path) -> pd.DataFrame:
    """The three training modes, repeated (interleaved) so that machine load hits all alike."""
    rows, progress = [], []
    for rep in range(cfg["train_reps"]):
        train = FailoverTrainingExperiment(iterations=cfg["train_iters"],
                                           ckpt_every=cfg["ckpt_every"],
                                           fault_at=cfg["fault_at_iter"],
                                           n_params=cfg["n_params"], restart_s=cfg["restart_s"],
                                           seed=rep)
        rows.append(train.run().assign(rep=rep))
        progress.append(train.progress_.assign(rep=rep))
    pd.concat(progress, ignore_index=True).to_csv(prog_path, index=False)
    return pd.concat(rows, ignore_index=True)


def trilemma_tables():
    rep = check_trilemma()
    pol = rep.policies.copy()
    pol["violations"] = pol["violations"].map(";".join)
    pol["counterexample"] = pol["counterexample"].map(" | ".join)
    return rep, pol, rep.combinations.assign(total_states=rep.states,
                                            seconds=round(rep.seconds, 3))


def figures(out: Path, series, summary, overhead, progress, note: str):
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    cases = [("allreduce", "nic_down"), ("allreduce", "link_flap"), ("p2p", "nic_down"),
             ("p2p", "link_flap")]
    for ax, (wl, fault) in zip(axes.ravel(), cases, strict=True):
        sub = series[(series["workload"] == wl) & (series["fault"] == fault) &
                     (series["rep"] == 0)]
        for shift, g in sub.groupby("shift"):
            ax.plot(g["t"], g["throughput_MBps"], drawstyle="steps-post",
                    label="SHIFT" if shift else "plain RC (aborts)")
        ax.set_title(f"{wl}, {fault} (fault at {0.3:.0%} of the ops)")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("throughput (MB/s)")
        ax.legend()
    fig.suptitle(f"Throughput under a NIC-0 fault {note}")
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    s = summary[summary["shift"] & (summary["fault"] != "none")].copy()
    s["case"] = s["workload"] + " " + s["fault"] + "@h" + s["fault_host"].astype(str)
    x = range(len(s))
    axes[0].bar([i - 0.2 for i in x], s["downtime_ms"], 0.4, label="downtime (error WC -> "
                                                                     "first success)")
    axes[0].bar([i + 0.2 for i in x], s["max_gap_ms"], 0.4, label="longest app-visible gap")
    axes[0].set_xticks(list(x), s["case"], fontsize=7, rotation=60, ha="right")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("ms (median over reps)")
    axes[0].legend(fontsize=7)
    axes[0].set_title("SHIFT downtime per fault")
    ov = overhead.pivot(index="op", columns="shift", values="us")
    ov.plot.bar(ax=axes[1], rot=0)
    axes[1].set_ylabel("us per call (median)")
    axes[1].set_title("datapath cost: plain vs SHIFT")
    axes[1].legend(["plain RC", "SHIFT"])
    for mode, g in progress[progress["rep"] == 0].groupby("mode", sort=False):
        axes[2].plot(g["executed"], g["iteration"], label=mode, drawstyle="steps-post")
    axes[2].set_xlabel("iterations executed (work, recomputation included)")
    axes[2].set_ylabel("model progress (iteration reached)")
    axes[2].set_title("training progress, NIC fault mid-run")
    axes[2].legend()
    fig.suptitle(f"SHIFT study {note}")
    fig.tight_layout()
    fig.savefig(out / "summary.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for (mode, rep), g in progress.groupby(["mode", "rep"], sort=False):
        ax.plot(g["t"], g["iteration"], label=f"{mode} (rep {rep})", alpha=0.8)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("model progress (iteration reached)")
    ax.set_title(f"training progress in wall time {note}", fontsize=8)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "training_walltime.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_arguments(parser)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cfg = QUICK if args.quick else FULL
    out = (Path(args.out) if args.out else HERE / "results" / "shift") / (
        "quick" if args.quick else "")
    (out / "raw").mkdir(parents=True, exist_ok=True)
    engine = {"seed": args.seed, "n_jobs": args.jobs, "quick": args.quick}
    note = "(emulated NICs; wall-clock on a shared 2-core machine)"
    print(f"SHIFT study -> {out} ({'quick' if args.quick else 'full'})")

    rep, pol, combos = trilemma_tables()
    pol.to_csv(out / "trilemma_policies.csv", index=False)
    combos.to_csv(out / "trilemma_combinations.csv", index=False)
    (out / "trilemma_summary.txt").write_text(rep.summary() + "\n")
    print(rep.summary().splitlines()[0])

    with engine_options(overwrite=args.overwrite, params={"quick": args.quick}):
        runs, series = downtime_runs(args.reps, out=out / "raw" / "downtime.jsonl", **engine)
        transports(args.reps, out=out / "raw" / "transports.jsonl", **engine).to_csv(
            out / "transports.csv", index=False)
    runs.to_csv(out / "downtime_runs.csv", index=False)
    series.to_csv(out / "throughput_series.csv", index=False)
    summary = summarize_downtime(runs)
    summary.to_csv(out / "downtime_summary.csv", index=False)
    overhead = _cached(out / "overhead.csv", args.overwrite,
                       lambda: measure_datapath_overhead(cfg["overhead_ops"], cfg["overhead_reps"]))
    prog_path = out / "training_progress.csv"
    training = _cached(out / "training.csv", args.overwrite,
                       lambda: training_study(cfg, prog_path))
    progress = pd.read_csv(prog_path)
    training_summary = training.groupby("mode", sort=False).agg(
        reps=("rep", "size"), normalized_s=("normalized_s", "median"),
        executed=("executed", "median"), wall_s_median=("wall_s", "median"),
        wall_s_min=("wall_s", "min"), wall_s_max=("wall_s", "max"),
        recomputed=("recomputed", "mean"), restarts=("restarts", "mean"),
        failovers=("failovers", "mean"),
        equal_to_no_fault=("equal_to_no_fault", "all")).reset_index()
    # machine load changes the iteration time several-fold between runs, so also price every
    # mode's work at one pooled iteration time (median over all runs) plus its fixed costs
    t_iter = float(training["median_iter_s"].median())
    pooled = (training["executed"] * t_iter + training["restarts"] * cfg["restart_s"]
              + training["executed"] // cfg["ckpt_every"] * 0.05)
    training_summary["pooled_iter_s"] = t_iter
    training_summary["pooled_time_s"] = pooled.groupby(training["mode"]).median().reindex(
        training_summary["mode"]).to_numpy()
    training_summary.to_csv(out / "training_summary.csv", index=False)
    figures(out, series, summary, overhead, progress, note)
    write_manifest(out, study="shift", reps=args.reps, seed=args.seed, quick=args.quick,
                   n_jobs=args.jobs, wall_seconds=round(time.perf_counter() - start, 3))
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(summary.to_string(index=False))
        print(overhead.to_string(index=False))
        print(training_summary.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
