"""ARGUS study: case-study detection, tracing overhead, compression, diagnosis scale.

1. Case studies (real gloo runs on this host; link degradation emulated): for each fault,
   ``--reps`` seeded runs through :func:`causalkit.simulation.run_study` (incremental CSV,
   resumable): detection (right rank and kind), precision / recall of the named ranks, steps
   and seconds to detect, iteration times, compression ratio of the real profiler windows.
   A fault-free run measures false alarms.
2. Overhead on step time: off / always-on channels / duty-cycled profiler / always-on profiler.
3. Compression ratio: real windows (from 1.) and SIMULATED CUPTI-scale rank-steps.
4. Diagnosis time vs number of ranks: SIMULATED traces, 64 to 10,000 ranks.

Usage: python simulations/argus.py [--quick] [--reps N] [--out DIR]
Outputs (CSV + PNG) go to simulations/results/argus/ (``quick_`` prefix with --quick).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from causalkit.simulation import run_study  # noqa: E402
from causalkit.systems.tracing import (  # noqa: E402
    SyntheticCluster,
    TrainingExperiment,
    cupti_scale_window,  # noqa: E402
)
from causalkit.systems.tracing.overhead import measure_overhead, summarize_overhead  # noqa: E402

CASES = [("compute_straggler", 2), ("masked_straggler", 2), ("jit_stall", 2),
         ("pipeline_bubble", 2), ("link_degradation", 4), (None, 2)]
_NUMERIC = ["precision", "recall", "steps_to_detect", "time_to_detect_s", "diagnose_s", "wall_s",
            "step_ms_before", "step_ms_after", "compression_ratio", "n_windows", "dropped",
            "tracer_errors", "culprit_rank"]


def _case_study(fault, world_size, reps, out: Path, steps: int) -> pd.DataFrame:
    def design(rng):
        seed = int(rng.integers(2 ** 31 - 1))
        row, _ = TrainingExperiment(fault=fault, world_size=world_size, steps=steps,
                                    seed=seed).run_once()
        return {"truth": 0.0 if fault is None else 1.0, "row": row}

    def argus(data):
        row = data["row"]
        value = float(row["false_alarm"]) if fault is None else float(row["detected"])
        out = {"estimate": value, "emulated": float(row["emulated"]), "simulated": 0.0}
        out.update({k: float(row[k]) for k in _NUMERIC})
        return out

    name = fault or "none"
    seed = 2026 + [f for f, _ in CASES].index(fault)
    res = run_study(design, {"argus": argus}, reps=reps, seed=seed,
                    out=out / f"case_{name}.csv", progress=False)
    res.insert(0, "fault", name)
    res.insert(1, "world_size", world_size)
    return res


def _summarize_cases(frame: pd.DataFrame) -> pd.DataFrame:
    g = frame.groupby("fault", sort=False)
    return pd.DataFrame({
        "world_size": g["world_size"].first(), "runs": g.size(),
        "errors": g["error"].apply(lambda e: int((e != "").sum())),
        "detection_rate": g["estimate"].mean(),
        "precision": g["precision"].mean(), "recall": g["recall"].mean(),
        "median_steps_to_detect": g["steps_to_detect"].median(),
        "median_time_to_detect_s": g["time_to_detect_s"].median(),
        "median_step_ms_before": g["step_ms_before"].median(),
        "median_step_ms_after": g["step_ms_after"].median(),
        "compression_ratio_real": g["compression_ratio"].median(),
        "dropped": g["dropped"].sum(), "emulated": g["emulated"].max() > 0,
        "simulated": False}).reset_index()


def _plot_cases(summary: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    faults = summary[summary["fault"] != "none"]
    axes[0].bar(faults["fault"], faults["detection_rate"], color="tab:blue")
    none = summary[summary["fault"] == "none"]
    if len(none):
        axes[0].axhline(none["detection_rate"].iloc[0], color="tab:red", ls="--",
                        label="false-alarm rate (no fault)")
        axes[0].legend(fontsize=8)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_ylabel("detected (right rank and kind)")
    axes[0].set_title("Case studies (real gloo runs; link emulated)")
    axes[1].bar(faults["fault"], faults["median_time_to_detect_s"], color="tab:green")
    axes[1].set_ylabel("median time to detect (s)")
    axes[1].set_title("Time from fault onset to a correct diagnosis")
    for ax in axes:
        ax.tick_params(axis="x", rotation=25, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _example_figure(path: Path) -> None:
    _, report = TrainingExperiment(fault="compute_straggler", steps=48, seed=0).run_once()
    fig = report.plot()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _scaling(sizes, reps: int) -> pd.DataFrame:
    rows = []
    for n in sizes:
        for fault in ("compute_straggler", "link_degradation"):
            for rep in range(reps):
                row = SyntheticCluster(n, fault=fault, steps=24, seed=rep).run()
                rows.append(row.assign(rep=rep))
    return pd.concat(rows, ignore_index=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-scale smoke run")
    parser.add_argument("--reps", type=int, default=None, help="runs per case study (10)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "argus"))
    parser.add_argument("--parts", default="cases,overhead,scaling",
                        help="comma-separated subset of cases (with compression), overhead, "
                             "scaling")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prefix = "quick_" if args.quick else ""
    reps = args.reps or (1 if args.quick else 10)
    cases = CASES[:1] if args.quick else CASES
    raw = out / f"{prefix}runs"
    raw.mkdir(exist_ok=True)
    parts = set(args.parts.split(","))
    if "cases" in parts:
        _cases_and_compression(cases, reps, raw, out, prefix, args.quick)
    if "overhead" in parts:
        _overhead(out, prefix, args.quick)
    if "scaling" in parts:
        _scaling_part(out, prefix, args.quick)
    if "cases" in parts and not args.quick:
        _example_figure(out / "diagnosis_example.png")


def _cases_and_compression(cases, reps, raw, out, prefix, quick) -> None:
    frames = [_case_study(f, ws, reps, raw, 40 if quick else 48) for f, ws in cases]
    cases_frame = pd.concat(frames, ignore_index=True)
    summary = _summarize_cases(cases_frame)
    summary.to_csv(out / f"{prefix}cases.csv", index=False)
    _plot_cases(summary, out / f"{prefix}cases.png")
    print(summary.round(3).to_string(index=False))
    comp = [{"source": "real profiler windows (case studies)", "n_events": np.nan,
             "ratio": float(cases_frame["compression_ratio"].median()), "simulated": False}]
    for n in ((10_000,) if quick else (10_000, 100_000, 1_000_000)):
        r = cupti_scale_window(n, seed=0)
        comp.append({"source": "CUPTI-scale rank-step (simulated)", "n_events": n,
                     "raw_bytes": r["raw_bytes"], "summary_bytes": r["summary_bytes"],
                     "ratio": r["ratio"], "simulated": True})
    comp = pd.DataFrame(comp)
    comp.to_csv(out / f"{prefix}compression.csv", index=False)
    print(comp.round(1).to_string(index=False))


def _overhead(out, prefix, quick) -> None:
    times = measure_overhead(rounds=1 if quick else 8, block_steps=10 if quick else 50)
    overhead = summarize_overhead(times).reset_index()
    overhead.to_csv(out / f"{prefix}overhead.csv", index=False)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(overhead["config"], overhead["cpu_overhead_pct"], label="CPU time", alpha=0.8,
           yerr=[overhead["cpu_overhead_pct"] - overhead["cpu_overhead_pct_min"],
                 overhead["cpu_overhead_pct_max"] - overhead["cpu_overhead_pct"]], capsize=3)
    ax.bar(overhead["config"], overhead["wall_overhead_pct"], label="wall time", alpha=0.5)
    ax.axhline(2, color="k", ls=":", label="2%")
    ax.set_ylabel("overhead vs untraced (%)")
    ax.set_yscale("symlog", linthresh=5)
    ax.set_title("Tracing overhead on step time (loaded 2-core host)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{prefix}overhead.png", dpi=120)
    plt.close(fig)
    print(overhead.round(2).to_string(index=False))


def _scaling_part(out, prefix, quick) -> None:
    sizes = (64, 256) if quick else (64, 256, 1024, 4096, 10_000)
    scaling = _scaling(sizes, 1 if quick else 2)
    scaling.to_csv(out / f"{prefix}scaling.csv", index=False)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for fault, sub in scaling.groupby("fault"):
        med = sub.groupby("n_ranks")["diagnose_s"].median()
        ax.plot(med.index, med.values, "o-", label=fault)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ranks (simulated)")
    ax.set_ylabel("diagnosis time (s)")
    ax.set_title("L1-L3 diagnosis time vs ranks (SIMULATED traces)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{prefix}scaling.png", dpi=120)
    plt.close(fig)
    print(scaling.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
