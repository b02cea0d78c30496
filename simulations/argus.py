"""ARGUS study: case-study detection, tracing overhead, compression, diagnosis scale.

1. Case studies (real gloo runs on this host; link degradation emulated, and as a real
   tbf-shaped veth link where root, ip and tc work: case ``link_degradation_tbf``): for each fault,
   ``--reps`` seeded runs through :func:`causalkit.simulation.run_study` (JSON Lines store,
   resumable): detection (right rank and kind), precision / recall of the named ranks, steps
   and seconds to detect, iteration times, compression ratio of the real profiler windows.
   A fault-free run measures false alarms.
2. Overhead on step time: always-on channels / duty-cycled profiler / always-on profiler, and
   an A/A control; single traced steps paired with untraced steps under one live tracer; median
   paired ratio with a bootstrap 95% CI (wall, training-thread CPU) and the CPU of the tracer's
   own threads (all CPU = thread CPU + background).
3. Compression ratio: real windows (from 1.) and SIMULATED CUPTI-scale rank-steps; p50 / p99
   round-trip errors per kernel on real windows (a fault-free run with raw windows kept) and on
   the simulated rank-steps.
4. Diagnosis time vs number of ranks: SIMULATED traces, 64 to 10,000 ranks.
5. Calibration: the L2 threshold ``phase_rel`` set on 20 healthy 2-rank runs (false alarms at
   most 10 %, :func:`calibrate_phase_rel`), and the 2-rank cases rerun on their seeds with it.
6. Summary formats (``--parts formats``, into ``formats/`` with its own MANIFEST.json): the
   paper's 24-byte (count, p50, p99) cluster records against our quantile sketch on the same
   real windows (tracer windows of a 2-rank run; the steps of a torch.profiler export read back
   by the Kineto importer): bytes, ratios, p50 / p99 / W1 errors.

The SIMULATED CUPTI-scale ratios of 3. grow with the number of events chosen per rank-step (a
fixed set of kernel modes, so the summary size is nearly constant): they are proportional to
that choice and are labelled so, not a measured compression ratio.

Every part runs through the experiment engine (studies ``argus-cases``, ``argus-calibration``,
``argus-overhead``, ``argus-scaling`` of :mod:`causalkit.systems.tracing.studies`): runs are
stored in ``runs/*.jsonl`` as they finish, a rerun resumes, ``--overwrite`` starts afresh.

Usage: python simulations/argus.py [--quick] [--reps N] [--seed S] [--out DIR] [--overwrite]
Outputs (CSV + PNG) go to simulations/results/argus/ (``quick/`` with --quick), with a generated
MANIFEST.json.
"""

from __future__ import annotations

import argparse
import inspect
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from causalkit.simulation import engine_options  # noqa: E402
from causalkit.studies import write_manifest  # noqa: E402
from causalkit.systems.tracing import (  # noqa: E402
    TraceStore,
    TrainingExperiment,
    cupti_scale_window,
    diagnose,
    read_trace,
    round_trip_errors,
)
from causalkit.systems.tracing.netns import link_support  # noqa: E402
from causalkit.systems.tracing.overhead import paired_ratios, summarize_overhead  # noqa: E402
from causalkit.systems.tracing.studies import (  # noqa: E402
    CASES,
    calibration_runs,
    case_runs,
    format_runs,
    overhead_arms,
    scaling_runs,
    summarize_cases,
    summarize_formats,
)

HERE = Path(__file__).resolve().parent
SEED = 2026  # case i of CASES uses seed SEED + i

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
    axes[0].set_title("Case studies (real gloo runs; link: emulated, or _tbf real)", fontsize=10)
    axes[1].bar(faults["fault"], faults["median_time_to_detect_s"], color="tab:green")
    axes[1].set_ylabel("median time to detect (s)")
    axes[1].set_title("Time from fault onset to a correct diagnosis")
    for ax in axes:
        ax.tick_params(axis="x", rotation=25, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _example_figure(path: Path) -> None:
    _, report = TrainingExperiment(fault="compute_straggler", steps=48, seed=0).trace()
    fig = report.plot()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-scale smoke run")
    parser.add_argument("--reps", type=int, default=None, help="runs per case study (10)")
    parser.add_argument("--seed", type=int, default=SEED,
                        help=f"base seed (default {SEED}; case i of CASES uses seed + i)")
    parser.add_argument("--out", default=None,
                        help="results folder (default simulations/results/argus; --quick: "
                             "DIR/quick)")
    parser.add_argument("--parts", default="cases,calibration,overhead,scaling,formats",
                        help="comma-separated subset of cases (with compression), calibration, "
                             "overhead, scaling, formats")
    parser.add_argument("--overwrite", action="store_true",
                        help="discard stored runs instead of resuming")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = Path(args.out) if args.out else HERE / "results" / "argus"
    out = out / "quick" if args.quick else out
    parts = set(args.parts.split(","))
    with engine_options(overwrite=args.overwrite, params={"quick": args.quick}):
        if parts - {"formats"}:
            _run_parts(args, out)
            write_manifest(out, study="argus", parts=args.parts, reps=args.reps, seed=args.seed,
                           quick=args.quick, wall_seconds=round(time.perf_counter() - start, 3))
            print(f"argus: results in {out}/ (provenance: MANIFEST.json)")
        if "formats" in parts:
            _formats(args.seed, out / "formats", args.quick, args.reps)
            print(f"argus formats: results in {out / 'formats'}/ (provenance: MANIFEST.json)")


def _run_parts(args, out: Path) -> None:
    raw = out / "runs"
    raw.mkdir(parents=True, exist_ok=True)
    reps = args.reps or (1 if args.quick else 10)
    cases = CASES[:1] if args.quick else CASES
    parts = set(args.parts.split(","))
    if "cases" in parts:
        _cases_and_compression(cases, reps, args.seed, raw, out, args.quick)
    if "calibration" in parts:
        _calibration(args.seed, raw, out, args.quick)
    if "overhead" in parts:
        _overhead(args.seed, raw, out, args.quick)
    if "scaling" in parts:
        _scaling_part(args.seed, raw, out, args.quick)
    if "cases" in parts and not args.quick:
        _example_figure(out / "diagnosis_example.png")


def _cases_and_compression(cases, reps, seed, raw, out, quick) -> None:
    real_link, why = link_support()
    if not real_link:
        print(f"real-link case skipped: {why}")
    frames = [case_runs(f, ws, mode, reps, seed, raw, 40 if quick else 48)
              for f, ws, mode in cases if mode != "tbf" or real_link]
    cases_frame = pd.concat(frames, ignore_index=True)
    summary = summarize_cases(cases_frame)
    summary.to_csv(out / "cases.csv", index=False)
    _plot_cases(summary, out / "cases.png")
    print(summary.round(3).to_string(index=False))
    errors = _real_round_trip(40 if quick else 48)
    errors.to_csv(out / "compression_real_kernels.csv", index=False)
    comp = [{"source": "real profiler windows (case studies)", "n_events": np.nan,
             "ratio": float(cases_frame["compression_ratio"].median()), "simulated": False},
            {"source": "real profiler windows (fault-free run, raw kept)",
             "n_events": float(errors["n"].sum()), "ratio": np.nan,
             "p50_err_median": float(errors["p50_err"].median()),
             "p50_err_max": float(errors["p50_err"].max()),
             "p99_err_median": float(errors["p99_err"].median()),
             "p99_err_max": float(errors["p99_err"].max()), "simulated": False}]
    for n in ((10_000,) if quick else (10_000, 100_000, 1_000_000)):
        r = cupti_scale_window(n, seed=0)
        comp.append({"source": "CUPTI-scale rank-step (SIMULATED; ratio proportional to the "
                               "event count chosen)", "n_events": n,
                     "raw_bytes": r["raw_bytes"], "summary_bytes": r["summary_bytes"],
                     "ratio": r["ratio"], "p50_err_max": r["p50_err_max"],
                     "p99_err_max": r["p99_err_max"], "simulated": True})
    comp = pd.DataFrame(comp)
    comp.to_csv(out / "compression.csv", index=False)
    print(comp.round(1).to_string(index=False))


def _formats(seed, folder: Path, quick: bool, reps) -> None:
    """Both summary formats on the same real windows, in ``folder`` with its own manifest."""
    start = time.perf_counter()
    raw = folder / "runs"
    raw.mkdir(parents=True, exist_ok=True)
    windows, kernels = format_runs(reps, seed, out=raw / "formats.jsonl", quick=quick)
    windows.to_csv(folder / "compression_formats_windows.csv", index=False)
    summary = summarize_formats(windows, kernels)
    summary.to_csv(folder / "compression_formats.csv", index=False)
    print(summary.round(4).to_string(index=False))
    write_manifest(folder, study="argus-formats", reps=reps, seed=seed, quick=quick,
                   wall_seconds=round(time.perf_counter() - start, 3))


def _calibration(seed, raw, out, quick) -> None:
    """phase_rel calibrated on healthy 2-rank runs (seeds apart from the case studies'), then
    the 2-rank cases and the fault-free case rerun on their own seeds with it."""
    phase_rel, table, frame = calibration_runs(seed=seed, out=raw / "calibration.jsonl",
                                               quick=quick, folder=raw)
    table.to_csv(out / "calibration.csv", index=False)
    print(table.to_string(index=False))
    summary = summarize_cases(frame)
    summary.insert(1, "phase_rel", phase_rel)
    summary.to_csv(out / "cases_calibrated.csv", index=False)
    print(summary.round(3).to_string(index=False))
    if (out / "cases.csv").exists():
        _plot_calibrated(pd.read_csv(out / "cases.csv"), summary, out / "cases_calibrated.png")


def _plot_calibrated(default: pd.DataFrame, calibrated: pd.DataFrame, path: Path) -> None:
    """Detection (false alarms for ``none``) and steps to detect, default vs calibrated
    ``phase_rel``, on the same seeds."""
    both = default.merge(calibrated, on="fault", suffixes=("_default", "_calibrated"))
    rel = calibrated["phase_rel"].iloc[0]
    default_rel = inspect.signature(diagnose).parameters["phase_rel"].default
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    x = np.arange(len(both))
    for ax, col, label in ((axes[0], "detection_rate", "detected (none: false alarms)"),
                           (axes[1], "median_steps_to_detect", "median steps to detect")):
        ax.bar(x - 0.2, both[f"{col}_default"], 0.4, label=f"phase_rel = {default_rel:g} (default)")
        ax.bar(x + 0.2, both[f"{col}_calibrated"], 0.4, label=f"phase_rel = {rel:g} (calibrated)")
        ax.set_xticks(x, both["fault"], rotation=20, fontsize=8)
        ax.set_ylabel(label)
    axes[0].set_ylim(0, 1.05)
    axes[0].legend(fontsize=7, loc="lower left")
    axes[0].set_title("2-rank cases, same seeds", fontsize=10)
    axes[1].set_title("Detection delay after the fault's onset", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _real_round_trip(steps: int) -> pd.DataFrame:
    """p50 / p99 round-trip errors per kernel group and profiler window of a fault-free real
    run whose raw windows are kept (groups with at least 20 executions)."""
    with tempfile.TemporaryDirectory(prefix="argus-raw-") as tmp:
        exp = TrainingExperiment(world_size=2, steps=steps, out_dir=tmp, keep_raw_windows=True,
                                 seed=0)
        exp.trace()
        run = next(Path(tmp).iterdir())
        summaries = {(s.groups[0].rank, s.window_id): s
                     for s in TraceStore(run / "traces").kernel_summaries() if s.groups}
        frames = []
        for (rank, window), summary in sorted(summaries.items()):
            events, _ = read_trace(run / "raw" / f"rank{rank}_window{window}.json.gz")
            frames.append(round_trip_errors(events, summary).assign(window=window))
    return pd.concat(frames, ignore_index=True)


def _overhead(seed, raw, out, quick) -> None:
    arms = overhead_arms(seed=seed, out=raw / "overhead.jsonl", quick=quick)
    arms.to_csv(out / "overhead_arms.csv", index=False)
    overhead = summarize_overhead(arms).reset_index()
    overhead.to_csv(out / "overhead.csv", index=False)
    _plot_overhead(arms, overhead, out / "overhead.png")
    print(overhead.round(2).to_string(index=False))


def _plot_overhead(arms, overhead, path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 1.3]})
    labels = {"wall": "wall time", "thread_cpu": "training-thread CPU",
              "total_cpu": "all CPU (tracer threads included)"}
    x = np.arange(len(overhead))
    for i, (label, name) in enumerate(labels.items()):
        est = overhead[f"{label}_pct"].to_numpy()
        err = [est - overhead[f"{label}_ci_lo"].to_numpy(),
               overhead[f"{label}_ci_hi"].to_numpy() - est]
        axes[0].errorbar(x + (i - 1) * 0.2, est, yerr=err, fmt="o", capsize=3, label=name)
    axes[0].axhline(2, color="k", ls=":", label="2% target")
    axes[0].axhline(0, color="0.6", lw=0.8)
    axes[0].set_xticks(x, [c if c != "off" else "off (A/A)" for c in overhead["config"]],
                       fontsize=8)
    axes[0].set_yscale("symlog", linthresh=5)
    ticks = [-2, 0, 2, 5, 10, 30, 100, 300]
    axes[0].set_yticks(ticks, [str(t) for t in ticks])
    axes[0].set_ylim(-3, None)
    axes[0].set_ylabel("overhead vs untraced (%)")
    axes[0].set_title("Median paired overhead, bootstrap 95% CI")
    axes[0].legend(fontsize=7, loc="upper left")
    ratios = 100 * (paired_ratios(arms, "ms") - 1)
    bins = np.linspace(-30, 30, 61)
    for config, name in (("off", "A/A control (untraced vs untraced)"),
                         ("always_on", "always-on channels")):
        if config in ratios:
            r = ratios[config].dropna()
            axes[1].hist(r.clip(bins[0], bins[-1]), bins=bins, histtype="step", lw=1.2,
                         label=f"{name}: median {r.median():+.2f}%")
    axes[1].axvline(0, color="0.6", lw=0.8)
    axes[1].set_xlabel("wall-time ratio traced / untraced step in a pair, minus 1 (%)")
    axes[1].set_ylabel("pairs")
    axes[1].set_title("Paired single steps: the spread the median is taken over")
    axes[1].legend(fontsize=7)
    fig.suptitle("Tracing overhead on step time (shared 2-core host)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _scaling_part(seed, raw, out, quick) -> None:
    scaling = scaling_runs(seed=seed, out=raw / "scaling.jsonl", quick=quick)
    scaling.to_csv(out / "scaling.csv", index=False)
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
    fig.savefig(out / "scaling.png", dpi=120)
    plt.close(fig)
    print(scaling.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
