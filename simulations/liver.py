"""LiveR study: downtime of live reconfiguration vs checkpoint/restart, goodput under a volatile
schedule, and a SimPy extrapolation to GPU scale (studies ``liver-downtime`` and
``liver-scaling``, :mod:`causalkit.systems.elastic.studies`).

Parts 1 and 2 run real worker processes (gloo over loopback on this CPU machine); part 3 is
SIMULATED (SimPy), first checked against part 2's measurements at CPU scale, then run with
GPU-scale parameters CALIBRATED to the numbers reported for LiveR (arXiv 2605.22014): the paper's
downtimes are its inputs, so its GPU goodput is not a prediction. The prediction from costs
measured here, and the downtime at 64 MiB-2 GiB of state split into its parts, is the study
``liver-transfer`` (:mod:`causalkit.systems.elastic.transfer_study`, results in
``results/liver/transfer/``).

    python simulations/liver.py            # full size (about 15 minutes on 2 loaded cores)
    python simulations/liver.py --quick    # seconds-scale smoke run
    python simulations/liver.py --figures-only   # redraw liver.png from the committed tables

Real runs are stored as they finish (the experiment engine, ``raw/*.jsonl``); a rerun resumes,
``--overwrite`` starts afresh, and ``MANIFEST.json`` records the provenance.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.simulation import engine_options
from causalkit.studies import add_study_arguments, write_manifest
from causalkit.systems.elastic import ModelSpec
from causalkit.systems.elastic.schedule import train_single_process
from causalkit.systems.elastic.studies import (
    FULL,
    QUICK,
    part_runs,
    simulate_scaling,
    summary_row,
)

HERE = Path(__file__).resolve().parent
LIVE = ["cut", "transfer", "verify", "commit", "switch", "warmup_excess_s"]
RESTART = ["save", "teardown", "start_import", "rendezvous", "load", "resume", "warmup_excess_s"]


def figures(out: Path, events: pd.DataFrame, curves: pd.DataFrame, ref: np.ndarray,
            sim: pd.DataFrame) -> None:
    import matplotlib
    if os.environ.get("MPLBACKEND") is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ev = events[events.part == "downtime"]
    ax = axes[0]
    for mode, cols in (("live", LIVE), ("restart", RESTART)):
        sub = ev[ev["mode"] == mode]
        vals = [max(float(sub[c].mean()), 1e-4) if c in sub and len(sub) else 1e-4
                for c in cols]
        x = np.arange(len(cols)) + (0 if mode == "live" else len(LIVE) + 1)
        ax.bar(x, vals, color="C0" if mode == "live" else "C3", label=mode)
        ax.axhline(float(sub.downtime_s.mean()), color="C0" if mode == "live" else "C3",
                   ls="--", lw=1, label=f"{mode}: total {sub.downtime_s.mean():.3g} s")
    names = [c.replace("warmup_excess_s", "warm-up") for c in LIVE] + [""] + \
        [c.replace("warmup_excess_s", "warm-up") for c in RESTART]
    ax.set_xticks(range(len(names)), names, rotation=60, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("seconds per event (mean)")
    ax.set_title("Measured downtime phases (real CPU workers)")
    ax.legend(fontsize=7)

    ax = axes[1]
    for mode, sub in curves[(curves.part == "downtime") & (curves.rep == 0)].groupby("mode"):
        ax.plot(sub.step, sub.loss, marker=".", label=f"{mode} (measured)")
    ax.plot(np.arange(len(ref)), ref, "k--", lw=1, label="uninterrupted single rank")
    for _, r in ev[(ev.rep == 0) & (ev["mode"] == "live")].iterrows():
        ax.axvline(r.cut_step, color="grey", lw=0.5)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("Loss across resizes (vertical lines: live cuts)")
    ax.legend(fontsize=7)

    ax = axes[2]
    gpu = sim[sim.scenario != "cpu_check"]
    labels = [f"{s}\n{m}" for s, m in zip(gpu.scenario, gpu["mode"], strict=True)]
    ax.bar(range(len(gpu)), gpu.goodput, color=["C0" if m == "live" else "C3"
                                                   for m in gpu["mode"]])
    ax.set_xticks(range(len(gpu)), labels, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("goodput over 24 h")
    ax.set_title("CALIBRATED (SimPy; the paper's downtimes are inputs): 47 resizes / 24 h",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "liver.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_arguments(ap)
    ap.add_argument("--figures-only", action="store_true",
                    help="redraw liver.png from the tables in the results folder; run nothing")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    out = Path(args.out) if args.out else HERE / "results" / "liver"
    out = out / "quick" if args.quick else out
    cfg = QUICK if args.quick else FULL
    if args.figures_only:
        ref = np.array(train_single_process(ModelSpec(**cfg["spec"]), cfg["downtime"]["steps"]))
        figures(out, pd.read_csv(out / "events.csv"), pd.read_csv(out / "loss_curves.csv"), ref,
                pd.read_csv(out / "simulated.csv"))
        print(f"liver: figure redrawn in {out}/liver.png")
        return 0
    (out / "raw").mkdir(parents=True, exist_ok=True)
    with engine_options(overwrite=args.overwrite, params={"quick": args.quick}):
        parts = [part_runs(part, args.reps if part == "downtime" else None, args.seed,
                           out / "raw" / f"{part}.jsonl", args.quick)
                 for part in ("downtime", "volatile")]
    events = pd.concat([e for e, _ in parts], ignore_index=True)
    curves = pd.concat([c for _, c in parts], ignore_index=True)
    events.to_csv(out / "events.csv", index=False)
    curves.to_csv(out / "loss_curves.csv", index=False)
    sim = simulate_scaling(events, args.quick)
    sim.to_csv(out / "simulated.csv", index=False)
    summary = summary_row(events, args.quick)
    summary.to_csv(out / "summary.csv", index=False)
    ref = np.array(train_single_process(ModelSpec(**cfg["spec"]), cfg["downtime"]["steps"]))
    figures(out, events, curves, ref, sim)
    write_manifest(out, study="liver", reps=args.reps, seed=args.seed, quick=args.quick,
                   wall_seconds=round(time.perf_counter() - start, 3))
    pd.set_option("display.width", 200)
    print(summary.T.to_string(header=False))
    print(sim.to_string(index=False))
    print(f"liver: results in {out}/ (provenance: MANIFEST.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
