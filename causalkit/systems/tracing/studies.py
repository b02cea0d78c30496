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

The study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``) and returns its summary table.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from causalkit.systems.tracing.experiment import TrainingExperiment

__all__ = ["CASES", "case_name", "case_runs", "summarize_cases", "cases"]

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
