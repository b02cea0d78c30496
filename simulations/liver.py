"""LiveR study: downtime of live reconfiguration vs checkpoint/restart, goodput under a volatile
schedule, and a SimPy extrapolation to GPU scale.

Parts 1 and 2 run real worker processes (gloo over loopback on this CPU machine); part 3 is
SIMULATED (SimPy), first checked against part 2's measurements at CPU scale, then extrapolated
with GPU-scale parameters calibrated to the numbers reported for LiveR (arXiv 2605.22014).

    python simulations/liver.py            # full size (about 15 minutes on 2 loaded cores)
    python simulations/liver.py --quick    # seconds-scale smoke run

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
from causalkit.studies import write_manifest
from causalkit.systems.elastic import ElasticExperiment, ModelSpec
from causalkit.systems.elastic.experiment import parse_schedule
from causalkit.systems.elastic.plan import reshard_plan
from causalkit.systems.elastic.schedule import train_single_process
from causalkit.systems.elastic.simmodel import (
    gpu_params,
    params_from_phases,
    simulate_resizes,
    spot_trace,
)

LIVE = ["cut", "transfer", "verify", "commit", "switch", "warmup_excess_s"]
RESTART = ["save", "teardown", "start_import", "rendezvous", "load", "resume", "warmup_excess_s"]


def run_real(part, schedule, steps, modes, reps, spec, out: Path, staging):
    """Parts 1-2: real runs through the experiment engine, stored per (part, mode) in
    ``raw/<part>_<mode>.jsonl`` as they finish (a rerun resumes). Modes alternate within each
    repetition, so that machine load hits both alike. Returns (events, loss curves)."""
    def experiment(mode, repeats):
        return ElasticExperiment(schedule, steps=steps, mode=mode, spec=spec,
                                 staging_bytes=staging, repeats=repeats)

    for rep in range(reps):        # each call resumes its store and runs repetition ``rep``
        for mode in modes:
            table = experiment(mode, rep + 1).run(out=out / "raw" / f"{part}_{mode}.jsonl")
            last = table[table["rep"] == rep]
            print(f"[{part}] {mode} rep {rep}: downtime/event "
                  f"{last.downtime_s.mean():.3f} s, goodput {last.goodput.iloc[0]:.4f}",
                  flush=True)
    events, curves = [], []
    for mode in modes:
        exp = experiment(mode, reps)
        events.append(exp.run(out=out / "raw" / f"{part}_{mode}.jsonl").assign(part=part))
        curves.append(exp.loss_curves_.assign(mode=mode, part=part))
    return pd.concat(events, ignore_index=True), pd.concat(curves, ignore_index=True)


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
    ax.set_title("SIMULATED (SimPy): 47 resizes / 24 h")
    fig.tight_layout()
    fig.savefig(out / "liver.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="seconds-scale smoke run")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "liver"))
    ap.add_argument("--overwrite", action="store_true",
                    help="discard stored runs instead of resuming")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    out = Path(args.out)
    if args.quick and args.out == str(Path(__file__).parent / "results" / "liver"):
        out = out / "quick"
    out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        spec, staging = ModelSpec(), 64 << 10
    else:  # about 0.45 M parameters, 5.5 MB of state with Adam; staging bound 256 KiB
        spec, staging = ModelSpec(dim=96, ffn=384, vocab=64), 256 << 10
    if args.quick:
        sched1, steps1, sched2, steps2, reps = [2, 3], 8, [2, 3, 2], 12, 1
    else:
        sched1, steps1 = [2, 3, 4, 2], 40
        sched2, steps2 = ["2x1x1", "1x3x1", "2x1x2", "1x2x1", "3x1x1", "2x2x1", "1x1x2"], 56
        reps = 3
    reps = args.reps or reps

    with engine_options(overwrite=args.overwrite, params={"quick": args.quick}):
        # 1. downtime live vs restart on the 2 -> 3 -> 4 -> 2 schedule
        ev1, lc1 = run_real("downtime", sched1, steps1, ["live", "restart"], reps, spec, out,
                            staging)
        # 2. goodput under a volatile schedule (TP, PP and DP all change)
        ev2, lc2 = run_real("volatile", sched2, steps2, ["live", "restart"], 1, spec, out,
                            staging)
    events = pd.concat([ev1, ev2], ignore_index=True)
    curves = pd.concat([lc1, lc2], ignore_index=True)
    events.to_csv(out / "events.csv", index=False)
    curves.to_csv(out / "loss_curves.csv", index=False)
    ev1 = events[events.part == "downtime"]
    live, restart = ev1[ev1["mode"] == "live"], ev1[ev1["mode"] == "restart"]
    ratio = restart.downtime_s.mean() / live.downtime_s.mean()

    # 3a. SIMULATED, CPU scale: fit the SimPy model on part 1, predict part 2, compare.
    layouts2 = parse_schedule(sched2, spec)
    sizes = [x.world_size for x in layouts2]
    state_bytes = 3 * spec.n_params * spec.itemsize
    layouts1 = parse_schedule(sched1, spec)
    moved = np.mean([reshard_plan(a, b, spec).network_bytes
                     for a, b in zip(layouts1, layouts1[1:], strict=False)])
    lv = live.assign(old_n=[parse_schedule([x], spec)[0].world_size for x in live.old_layout],
                     new_n=[parse_schedule([x], spec)[0].world_size for x in live.new_layout])
    rs = restart.assign(new_n=[parse_schedule([x], spec)[0].world_size
                               for x in restart.new_layout])
    params = params_from_phases(lv, rs, step_s=float(ev1.median_step_s.median()),
                                state_bytes=state_bytes, moved_bytes=moved)
    sims = []
    ev2 = events[events.part == "volatile"]
    for mode in ("live", "restart"):
        meas = ev2[ev2["mode"] == mode]
        if not len(meas):
            continue
        phases = params.live_phases if mode == "live" else params.restart_phases
        pred = [sum(phases(a, b).values()) for a, b in zip(sizes, sizes[1:], strict=False)]
        measured = float(meas.downtime_s.sum())
        sims.append({"scenario": "cpu_check", "mode": mode, "events": len(pred),
                     "predicted_downtime_s": float(np.sum(pred)),
                     "measured_downtime_s": measured,
                     "relative_error": float(np.sum(pred)) / measured - 1,
                     "goodput": float(meas.goodput.iloc[0]), "simulated": True})

    # 3b. SIMULATED, GPU scale: 47 resizes in 24 h (spot trace), GPT-30B on 16-32 GPUs and
    # 70B on 512-1,024 GPUs, with parameters calibrated to the paper's GPT-30B numbers.
    day = 86_400.0
    for scenario, n_params, sizes_gpu in (("30B_32gpu", 30e9, [16, 24, 32]),
                                          ("70B_1024gpu", 70e9, [512, 768, 1024])):
        p = gpu_params(n_params)
        trace = spot_trace(47, day, sizes_gpu, seed=0)
        for mode in ("live", "restart"):
            table, summary = simulate_resizes(p, trace, day, mode, n0=sizes_gpu[-1])
            phases = p.live_phases if mode == "live" else p.restart_phases
            sims.append({"scenario": scenario, "mode": mode, "events": summary["events"],
                         "predicted_downtime_s": summary["downtime_s"],
                         "measured_downtime_s": np.nan,
                         "downtime_per_event_full_size_s": sum(phases(sizes_gpu[-1],
                                                                      sizes_gpu[-1]).values()),
                         "goodput": summary["goodput"], "simulated": True})
    sim = pd.DataFrame(sims)
    sim.to_csv(out / "simulated.csv", index=False)

    ref = np.array(train_single_process(spec, steps1))
    summary = pd.DataFrame([{
        "live_downtime_mean_s": live.downtime_s.mean(), "live_downtime_sd_s": live.downtime_s.std(),
        "restart_downtime_mean_s": restart.downtime_s.mean(),
        "restart_downtime_sd_s": restart.downtime_s.std(), "ratio_restart_over_live": ratio,
        "ratio_of_medians": restart.downtime_s.median() / live.downtime_s.median(),
        "live_downtime_median_s": live.downtime_s.median(),
        "restart_downtime_median_s": restart.downtime_s.median(),
        "live_pause_mean_s": live.pause_s.mean(), "restart_pause_mean_s": restart.pause_s.mean(),
        "live_goodput": live.goodput.mean(), "restart_goodput": restart.goodput.mean(),
        "volatile_live_goodput": ev2[ev2["mode"] == "live"].goodput.mean(),
        "volatile_restart_goodput": ev2[ev2["mode"] == "restart"].goodput.mean(),
        "live_prepare_mean_s": live.prepare_s.mean(),
        "steady_step_s": float(ev1.median_step_s.median()),
        "step_while_preparing_s": float(ev1[ev1["mode"] == "live"].median_step_preparing_s
                                        .median()),
        "live_events": len(live), "restart_events": len(restart),
        "peak_staging_bytes": live.peak_staging_bytes.max(), "staging_bound_bytes": staging,
        "max_rss_mb": ev1.max_rss_mb.max(), "load_average_1min_at_summary": os.getloadavg()[0],
        "load_average_1min_during_runs": (events.load_average_1min.mean()
                                          if "load_average_1min" in events else np.nan)}])
    summary.to_csv(out / "summary.csv", index=False)
    figures(out, events, curves, ref, sim)
    write_manifest(out, study="liver", reps=reps, quick=args.quick,
                   wall_seconds=round(time.perf_counter() - start, 3))
    pd.set_option("display.width", 200)
    print(summary.T.to_string(header=False))
    print(sim.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
