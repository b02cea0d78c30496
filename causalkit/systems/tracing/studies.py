"""ARGUS case studies, run through the experiment engine (:func:`causalkit.simulation.run_study`:
seeds from ``SeedSequence([seed, rep])``, resumable stores, manifests through
:func:`causalkit.studies.run_named_study`).

``cases``
    For each fault of :data:`CASES`, ``reps`` seeded real training runs (gloo rank processes on
    this host; link degradation emulated, or a real tbf-shaped veth link where root, ip and tc
    work), traced and diagnosed: detection (right rank and kind) as the estimate against a
    truth of 1 (0 for the fault-free case, whose estimate is the false-alarm indicator),
    precision / recall of the named ranks, steps and seconds to detect, step times, compression
    ratio of the real profiler windows.

``calibration``
    The L2 threshold ``phase_rel`` set on healthy 2-rank runs (false alarms at most 10 %,
    :func:`~causalkit.systems.tracing.calibration.calibrate_phase_rel`; seeds apart from the
    case studies'), then the 2-rank cases and the fault-free case rerun on their own seeds with
    it.
``overhead``
    Tracing overhead on step time (:func:`~causalkit.systems.tracing.overhead.measure_overhead`):
    each repetition is a block of paired traced / untraced single steps per configuration
    (pairs numbered across blocks), summarised by
    :func:`~causalkit.systems.tracing.overhead.summarize_overhead`.
``scaling``
    Diagnosis time and accuracy vs number of ranks on SIMULATED traces
    (:class:`~causalkit.systems.tracing.synthetic.SyntheticCluster`), 64 to 10,000 ranks.
``compression_formats``
    The paper's 24-byte (count, p50, p99) cluster records (:mod:`~causalkit.systems.tracing.
    triples`) against our quantile sketch on the same real windows: the tracer's profiler windows
    of a fault-free 2-rank run (raw windows kept) and the steps of a ``torch.profiler``
    Chrome/Kineto export of a training loop, read back by the importer; bytes, ratios and the
    p50 / p99 / W1 errors of each format.

Each study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``) and returns its summary table.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

import pandas as pd

from causalkit.systems.tracing.experiment import TrainingExperiment

__all__ = ["CASES", "case_name", "case_runs", "summarize_cases", "cases", "calibration_runs",
           "calibration", "overhead_arms", "overhead", "scaling_runs", "scaling",
           "format_rows", "format_runs", "summarize_formats", "compression_formats"]

#: (fault, world size, link mode); the real (tbf) link case runs only where root, ip and tc work.
CASES = (("compute_straggler", 2, "emulated"), ("masked_straggler", 2, "emulated"),
         ("jit_stall", 2, "emulated"), ("pipeline_bubble", 2, "emulated"),
         ("link_degradation", 4, "emulated"), ("link_degradation", 4, "tbf"),
         (None, 2, "emulated"))
_NUMERIC = ["precision", "recall", "steps_to_detect", "time_to_detect_s", "diagnose_s", "wall_s",
            "step_ms_before", "step_ms_after", "compression_ratio", "n_windows", "dropped",
            "tracer_errors", "culprit_rank"]


def case_name(fault, link_mode) -> str:
    """File and table name of a case: the fault (``none``), ``_tbf`` for a real link."""
    return (fault or "none") + ("_tbf" if link_mode == "tbf" else "")


def case_runs(fault, world_size, link_mode, reps, seed, folder, steps: int,
              diagnose_options=None, n_jobs: int = 1) -> pd.DataFrame:
    """``reps`` seeded runs of one case, stored in ``folder/case_<name>.jsonl``; with
    ``diagnose_options`` the same seeds are diagnosed with those thresholds
    (``case_<name>_<option>=<value>.jsonl``). Case ``i`` of :data:`CASES` uses seed
    ``seed + i``."""
    from causalkit.simulation import run_study

    def design(rng):
        row, _ = TrainingExperiment(fault=fault, world_size=world_size, steps=steps,
                                    link_mode=link_mode, seed=int(rng.integers(2 ** 31 - 1)),
                                    diagnose_options=diagnose_options).trace()
        return {"truth": 0.0 if fault is None else 1.0, "row": row}

    def argus(data):
        row = data["row"]
        value = float(row["false_alarm"]) if fault is None else float(row["detected"])
        out = {"estimate": value, "emulated": float(row["emulated"]), "simulated": 0.0}
        out.update({k: float(row[k]) for k in _NUMERIC})
        return out

    name = case_name(fault, link_mode)
    index = [case_name(f, m) for f, _, m in CASES].index(name)
    suffix = "".join(f"_{k}={v:g}" for k, v in sorted((diagnose_options or {}).items()))
    out = None if folder is None else Path(folder) / f"case_{name}{suffix}.jsonl"
    res = run_study(design, {"argus": argus}, reps=reps, seed=seed + index, n_jobs=n_jobs,
                    out=out, progress=False)
    res.insert(0, "fault", name)
    res.insert(1, "world_size", world_size)
    return res


def summarize_cases(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per case: detection rate, precision, recall, delays, step times, compression."""
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


def cases(reps=None, seed: int = 2026, n_jobs: int = 1, backend="loky", scheduler=None,
          out=None, quick: bool = False) -> pd.DataFrame:
    """ARGUS case studies: real traced runs with injected faults, detection and delays."""
    from causalkit.systems.tracing.netns import link_support

    real_link, _ = link_support()
    chosen = CASES[:1] if quick else [c for c in CASES if c[2] != "tbf" or real_link]
    folder = None if out is None else Path(out).parent
    frames = [case_runs(f, ws, mode, reps or (1 if quick else 10), seed, folder,
                        40 if quick else 48, n_jobs=n_jobs) for f, ws, mode in chosen]
    return summarize_cases(pd.concat(frames, ignore_index=True))


def _part(out, tag: str):
    if out is None:
        return None
    out = Path(out)
    return out.with_name(f"{out.stem}_{tag}{out.suffix or '.jsonl'}")


# calibration -------------------------------------------------------------------------------------
def _healthy_run(rng, rep, *, steps):
    """One fault-free 2-rank run: whether its diagnosis raises an alarm at each ``phase_rel``
    of :data:`~causalkit.systems.tracing.calibration.PHASE_REL_GRID`."""
    from causalkit.systems.tracing.calibration import false_alarms
    from causalkit.systems.tracing.store import TraceStore

    with tempfile.TemporaryDirectory(prefix="argus-calibration-") as tmp:
        row, _ = TrainingExperiment(world_size=2, steps=steps,
                                    seed=int(rng.integers(2 ** 31 - 1)), out_dir=tmp).trace()
        store = TraceStore(next(Path(tmp).iterdir()) / "traces")
        return {"seed": int(row["seed"]), "alarms": false_alarms(store).tolist()}


def calibration_runs(reps=None, seed: int = 2026, out=None, quick: bool = False,
                     folder=None) -> tuple[float, pd.DataFrame, pd.DataFrame]:
    """Calibrate ``phase_rel`` on ``reps`` healthy runs (seeded from ``SeedSequence([seed +
    len(CASES), r])``, apart from every case's seeds) with at most 10 % false alarms, and rerun
    the 2-rank cases with it (stores ``folder/case_*``).

    Returns the chosen ``phase_rel``, the calibration table (false alarms per candidate,
    ``chosen`` marked) and the per-run rows of the rerun cases.
    """
    from causalkit.simulation import run_experiment
    from causalkit.systems.tracing.calibration import choose_phase_rel

    steps = 40 if quick else 48
    runs = run_experiment(partial(_healthy_run, steps=steps), [{}], reps or (4 if quick else 20),
                          seed + len(CASES), out=out, progress=False)
    phase_rel, table = choose_phase_rel(runs["alarms"].tolist(), max_false_alarm=0.1)
    table["chosen"] = table["phase_rel"] == phase_rel
    healthy = (None, 2, "emulated")
    chosen = CASES[:1] if quick else CASES
    rerun = [c for c in chosen if c[1] == 2 and c != healthy] + [healthy]
    frames = [case_runs(f, ws, mode, 1 if quick else 10, seed, folder, steps,
                        {"phase_rel": phase_rel}) for f, ws, mode in rerun]
    return phase_rel, table, pd.concat(frames, ignore_index=True)


def calibration(reps=None, seed: int = 2026, n_jobs: int = 1, backend="loky", scheduler=None,
                out=None, quick: bool = False) -> pd.DataFrame:
    """ARGUS phase_rel calibrated on healthy runs; the 2-rank cases rerun with it."""
    folder = None if out is None else Path(out).parent
    phase_rel, _, frame = calibration_runs(reps, seed, out, quick, folder)
    summary = summarize_cases(frame)
    summary.insert(1, "phase_rel", phase_rel)
    return summary


# overhead ----------------------------------------------------------------------------------------
def _overhead_block(rng, rep, *, pairs):
    """One block of ``pairs`` pairs per configuration (pairs numbered ``rep * pairs + k``)."""
    from causalkit.systems.tracing.overhead import measure_overhead

    arms = measure_overhead(pairs=pairs, seed=rng)
    arms["pair"] += rep * pairs
    return {"arms": arms.to_dict("records")}


def overhead_arms(reps=None, seed: int = 2026, out=None, quick: bool = False) -> pd.DataFrame:
    """Per-arm rows of the overhead study: ``reps`` blocks (full: 8 of 100 pairs per
    configuration; quick: 1 of 30), stored as they finish."""
    from causalkit.simulation import run_experiment

    pairs = 30 if quick else 100
    runs = run_experiment(partial(_overhead_block, pairs=pairs), [{}], reps or (1 if quick else 8),
                          seed, out=out, progress=False)
    return pd.DataFrame([arm for arms in runs["arms"] for arm in arms])


def overhead(reps=None, seed: int = 2026, n_jobs: int = 1, backend="loky", scheduler=None,
             out=None, quick: bool = False) -> pd.DataFrame:
    """ARGUS tracing overhead on step time: paired single steps, bootstrap CIs."""
    from causalkit.systems.tracing.overhead import summarize_overhead

    return summarize_overhead(overhead_arms(reps, seed, out, quick)).reset_index()


# scaling -----------------------------------------------------------------------------------------
def _synthetic_run(rng, rep, *, n_ranks, fault):
    from causalkit.systems.tracing.synthetic import SyntheticCluster

    return SyntheticCluster(n_ranks, fault=fault, steps=24, seed=rng).run().iloc[0].to_dict()


def scaling_runs(reps=None, seed: int = 2026, n_jobs: int = 1, out=None,
                 quick: bool = False) -> pd.DataFrame:
    """One row per rank count, fault and repetition of the SIMULATED scaling study."""
    from causalkit.simulation import run_experiment

    sizes = (64, 256) if quick else (64, 256, 1024, 4096, 10_000)
    configs = [{"n_ranks": n, "fault": f} for n in sizes
               for f in ("compute_straggler", "link_degradation")]
    return run_experiment(_synthetic_run, configs, reps or (1 if quick else 2), seed,
                          n_jobs=n_jobs, out=out, progress=False)


def scaling(reps=None, seed: int = 2026, n_jobs: int = 1, backend="loky", scheduler=None,
            out=None, quick: bool = False) -> pd.DataFrame:
    """ARGUS diagnosis time and accuracy vs ranks on SIMULATED traces (64 to 10,000 ranks)."""
    runs = scaling_runs(reps, seed, n_jobs, out, quick)
    return runs.groupby(["n_ranks", "fault"], sort=False).agg(
        runs=("rep", "size"), median_diagnose_s=("diagnose_s", "median"),
        median_generate_s=("generate_s", "median"), precision=("precision", "mean"),
        recall=("recall", "mean"), simulated=("simulated", "all")).reset_index()


# compression formats -----------------------------------------------------------------------------
_FORMATS = ("sketch", "triple")


def format_rows(source: str, events, summary) -> tuple[dict, list[dict]]:
    """One window scored in both formats: the window row (events, bytes, ratios, error medians
    and maxima over its kernel groups) and the per-kernel-group rows of
    :func:`~causalkit.systems.tracing.triples.format_errors`."""
    from causalkit.systems.tracing.triples import format_errors, triple_bytes

    errors = format_errors(events, summary)
    row = {"source": source, "rank": summary.groups[0].rank, "window": summary.window_id,
           "n_events": len(events), "n_groups": len(summary.groups),
           "n_clusters": summary.n_clusters, "scored_groups": len(errors),
           "raw_bytes": summary.raw_bytes, "sketch_bytes": summary.summary_bytes,
           "triple_bytes": len(triple_bytes(summary))}
    for f in _FORMATS:
        row[f"ratio_{f}"] = row["raw_bytes"] / row[f"{f}_bytes"]
    kernels = errors.assign(source=source, window=summary.window_id).to_dict("records")
    return row, kernels


def _format_run(rng, rep, *, steps, export_steps):
    """Both formats on the real windows of one fault-free 2-rank traced run and of one
    torch.profiler export (one window per profiled step)."""
    from causalkit.systems.tracing.capture import profile_training
    from causalkit.systems.tracing.compression import compress
    from causalkit.systems.tracing.store import TraceStore
    from causalkit.systems.tracing.tracefile import read_kineto, read_trace

    seed = int(rng.integers(2 ** 31 - 1))
    windows, kernels = [], []
    with tempfile.TemporaryDirectory(prefix="argus-formats-") as tmp:
        TrainingExperiment(world_size=2, steps=steps, out_dir=tmp, keep_raw_windows=True,
                           seed=seed).trace()
        run = next(p for p in Path(tmp).iterdir() if p.is_dir())
        for summary in TraceStore(run / "traces").kernel_summaries():
            rank = summary.groups[0].rank
            events, _ = read_trace(run / "raw" / f"rank{rank}_window{summary.window_id}.json.gz")
            row, rows = format_rows("tracer windows (2-rank gloo run)", events, summary)
            windows.append(row)
            kernels += rows
        trace = read_kineto(profile_training(Path(tmp) / "export.json", steps=export_steps,
                                             seed=seed))
        for step, events in trace.events.groupby("step", sort=True):
            row, rows = format_rows("torch.profiler export (CPU)", events,
                                    compress(events, window_id=int(step)))
            windows.append(row)
            kernels += rows
    return {"windows": windows, "kernels": kernels}


def format_runs(reps=None, seed: int = 2026, out=None,
                quick: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Window rows and kernel-group rows of ``reps`` runs (full: 3 runs of 48 steps and
    8-step exports; quick: 1 run of 40 steps and a 4-step export), stored as they finish."""
    from causalkit.simulation import run_experiment

    runs = run_experiment(partial(_format_run, steps=40 if quick else 48,
                                  export_steps=4 if quick else 8), [{}],
                          reps or (1 if quick else 3), seed, out=out, progress=False)
    windows = [dict(w, rep=r) for r, ws in zip(runs["rep"], runs["windows"], strict=True)
               for w in ws]
    kernels = [dict(k, rep=r) for r, ks in zip(runs["rep"], runs["kernels"], strict=True)
               for k in ks]
    return pd.DataFrame(windows), pd.DataFrame(kernels)


def summarize_formats(windows: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per (source, format): windows, events, bytes, pooled ratio (total raw / total
    summary bytes), median per-window ratio, and the median / 90th percentile / max over kernel
    groups (>= 20 executions in a window) of the p50, p99 and W1 errors."""
    rows = []
    for source, w in windows.groupby("source", sort=False):
        k = kernels[kernels["source"] == source]
        for f in _FORMATS:
            row = {"source": source, "format": f, "windows": len(w),
                   "events": int(w["n_events"].sum()), "clusters": int(w["n_clusters"].sum()),
                   "raw_bytes": int(w["raw_bytes"].sum()),
                   "summary_bytes": int(w[f"{f}_bytes"].sum()),
                   "ratio": w["raw_bytes"].sum() / w[f"{f}_bytes"].sum(),
                   "median_window_ratio": float(w[f"ratio_{f}"].median()),
                   "kernel_groups": len(k), "simulated": False}
            for m in ("p50_err", "p99_err", "w1"):
                v = k[f"{m}_{f}"]
                row.update({f"{m}_median": float(v.median()), f"{m}_p90": float(v.quantile(0.9)),
                            f"{m}_max": float(v.max())})
            rows.append(row)
    return pd.DataFrame(rows)


def compression_formats(reps=None, seed: int = 2026, n_jobs: int = 1, backend="loky",
                        scheduler=None, out=None, quick: bool = False) -> pd.DataFrame:
    """ARGUS summary formats (paper's 24-byte triples vs our sketch) on the same real windows."""
    return summarize_formats(*format_runs(reps, seed, out, quick))
