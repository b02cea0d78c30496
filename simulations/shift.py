"""SHIFT study on emulated NICs: downtime per fault type, datapath overhead with vs without SHIFT,
training progress vs checkpoint-restart, and the trilemma model check.

Every NIC here is a software emulation (``causalkit.systems.rdma.verbs``); all tables carry
``emulated=True`` and the figures say so. Timings are wall-clock on this (shared) machine.

Usage::

    python simulations/shift.py            # full size, writes simulations/results/shift/
    python simulations/shift.py --quick    # seconds-scale smoke run, writes .../shift/quick/

The downtime, transport, training and datapath-overhead studies run through the experiment engine
(``causalkit simulate shift-downtime`` / ``shift-transports`` / ``shift-training`` /
``shift-overhead`` run them alone): their runs are stored in ``raw/`` as they finish, a rerun
resumes and ``--overwrite`` starts afresh. ``MANIFEST.json`` records the provenance.
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
from causalkit.systems.rdma import check_trilemma  # noqa: E402
from causalkit.systems.rdma.studies import (  # noqa: E402
    downtime_runs,
    overhead,
    summarize_downtime,
    summarize_training,
    training_runs,
    transports,
)

HERE = Path(__file__).resolve().parent


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
        datapath = overhead(args.reps, args.seed, out=out / "raw" / "overhead.jsonl",
                            quick=args.quick)
        training, progress = training_runs(args.reps, args.seed,
                                           out / "raw" / "training.jsonl", args.quick)
    runs.to_csv(out / "downtime_runs.csv", index=False)
    series.to_csv(out / "throughput_series.csv", index=False)
    summary = summarize_downtime(runs)
    summary.to_csv(out / "downtime_summary.csv", index=False)
    datapath.to_csv(out / "overhead.csv", index=False)
    training.to_csv(out / "training.csv", index=False)
    progress.to_csv(out / "training_progress.csv", index=False)
    training_summary = summarize_training(training, args.quick)
    training_summary.to_csv(out / "training_summary.csv", index=False)
    figures(out, series, summary, datapath, progress, note)
    write_manifest(out, study="shift", reps=args.reps, seed=args.seed, quick=args.quick,
                   n_jobs=args.jobs, wall_seconds=round(time.perf_counter() - start, 3))
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(summary.to_string(index=False))
        print(datapath.to_string(index=False))
        print(training_summary.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
