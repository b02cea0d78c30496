"""LiveR studies, run through the experiment engine
(:func:`causalkit.simulation.run_experiment`: repetition ``r`` seeds the model from
``SeedSequence([seed, r])``, both modes of a repetition run before the next repetition, resumable
stores, manifests through :func:`causalkit.studies.run_named_study`).

``downtime``
    Real worker processes (gloo over loopback, CPU): the ``2 -> 3 -> 4 -> 2`` resize schedule,
    live reconfiguration vs checkpoint/restart; per mode the downtime per resize event (mean,
    SD, median), the training pause, the background preparation time and the goodput.
``scaling``
    The ``downtime`` runs plus one volatile schedule (TP, PP and DP all change) in both modes;
    then SIMULATED (SimPy, :mod:`~causalkit.systems.elastic.simmodel`): the model's phase
    durations fitted to the ``downtime`` runs predict the volatile schedule's downtime
    (``cpu_check``: predicted vs measured), and GPU-scale parameters CALIBRATED to the numbers
    reported for LiveR replay 47 resizes in 24 h for GPT-30B on 16-32 GPUs and 70B on
    512-1,024 GPUs. Rows carry ``simulated=True`` and a ``basis``: the GPU rows are
    ``calibrated`` -- the paper's own downtimes are their inputs, so they restate the paper
    rather than predict it (a prediction from costs measured on this machine is made by
    :mod:`~causalkit.systems.elastic.transfer_study`).

Each study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``) and returns its summary table.
Repetitions run one after another whatever ``n_jobs`` says (each run already starts one process
per worker). Timings depend on the machine's load; every event row records the 1-minute load
average.

Reference: Liu et al., "Fine-Grained Elasticity via Live Reconfiguration for Model Training",
arXiv 2605.22014 (2026).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.systems.elastic.experiment import ElasticExperiment, parse_schedule, tidy_runs
from causalkit.systems.elastic.layout import ModelSpec

__all__ = ["FULL", "QUICK", "MODES", "part_runs", "summarize_modes", "simulate_scaling",
           "summary_row", "downtime", "scaling", "resimulate"]

MODES = ("live", "restart")
#: Sizes of the full study (a model of about 0.45 M parameters, 5.5 MB of state with Adam,
#: staging bound 256 KiB) and of the seconds-scale quick run: per part the schedule, the
#: optimizer steps per run and the repetitions.
FULL = {"spec": {"dim": 96, "ffn": 384, "vocab": 64}, "staging_bytes": 256 << 10,
        "downtime": {"schedule": (2, 3, 4, 2), "steps": 40, "reps": 3},
        "volatile": {"schedule": ("2x1x1", "1x3x1", "2x1x2", "1x2x1", "3x1x1", "2x2x1",
                                  "1x1x2"), "steps": 56, "reps": 1}}
QUICK = {"spec": {}, "staging_bytes": 64 << 10,
         "downtime": {"schedule": (2, 3), "steps": 8, "reps": 1},
         "volatile": {"schedule": (2, 3, 2), "steps": 12, "reps": 1}}
#: GPU-scale scenarios of the simulation: (name, parameters, GPU counts of the spot trace). Their
#: parameters are calibrated to the paper's reported downtimes (:func:`.simmodel.gpu_params`).
GPU_SCENARIOS = (("30B_32gpu", 30e9, (16, 24, 32)), ("70B_1024gpu", 70e9, (512, 768, 1024)))


def _sizes(quick: bool) -> dict:
    return QUICK if quick else FULL


def _run_mode(rng, rep, *, mode, schedule, steps, spec, staging_bytes):
    """One run of ``mode`` (the engine's ``run_once``)."""
    return ElasticExperiment(list(schedule), steps=steps, mode=mode, spec=ModelSpec(**spec),
                             staging_bytes=staging_bytes).run_once(rng, rep)


def _part(out, tag: str):
    if out is None:
        return None
    out = Path(out)
    return out.with_name(f"{out.stem}_{tag}{out.suffix or '.jsonl'}")


def part_runs(part: str, reps=None, seed: int = 2024, out=None,
              quick: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Real runs of one part (``"downtime"`` or ``"volatile"``), both modes, stored in ``out``
    as they finish (a rerun resumes). Returns the per-event table and the loss curves, both
    with a ``part`` column."""
    from causalkit.simulation import run_experiment

    cfg = _sizes(quick)
    size = cfg[part]
    run_once = partial(_run_mode, schedule=size["schedule"], steps=size["steps"],
                       spec=cfg["spec"], staging_bytes=cfg["staging_bytes"])
    runs = run_experiment(run_once, [{"mode": m} for m in MODES], reps or size["reps"], seed,
                          out=out, progress=False)
    events, curves = tidy_runs(runs)
    return events.assign(part=part), curves.assign(part=part)


def summarize_modes(events: pd.DataFrame) -> pd.DataFrame:
    """Per part and mode: runs, resize events, downtime per event (mean, SD, median; seconds),
    pause, background preparation (live), goodput and the mean 1-minute load average."""
    g = events.groupby(["part", "mode"], sort=False)
    table = g.agg(runs=("rep", "nunique"), events=("downtime_s", "size"),
                  downtime_mean_s=("downtime_s", "mean"), downtime_sd_s=("downtime_s", "std"),
                  downtime_median_s=("downtime_s", "median"), pause_mean_s=("pause_s", "mean"),
                  goodput=("goodput", "mean"), load_average_1min=("load_average_1min", "mean"))
    if "prepare_s" in events:
        table["prepare_mean_s"] = g["prepare_s"].mean()
    return table.reset_index().assign(simulated=False)


def simulate_scaling(events: pd.DataFrame, quick: bool = False) -> pd.DataFrame:
    """SIMULATED downtime and goodput (see the module docstring): ``cpu_check`` rows compare
    the model fitted on the ``downtime`` part with the measured ``volatile`` part (``basis``
    ``fitted to measured phases``); the GPU-scale rows replay a 24 h spot trace of 47 resizes
    with parameters calibrated to the paper's own downtimes (``basis`` ``calibrated``: an
    input, not a prediction)."""
    from causalkit.systems.elastic.plan import reshard_plan
    from causalkit.systems.elastic.simmodel import (
        gpu_params,
        params_from_phases,
        simulate_resizes,
        spot_trace,
    )

    cfg = _sizes(quick)
    spec = ModelSpec(**cfg["spec"])
    layouts1 = parse_schedule(cfg["downtime"]["schedule"], spec)
    sizes2 = [x.world_size for x in parse_schedule(cfg["volatile"]["schedule"], spec)]
    ev1, ev2 = events[events.part == "downtime"], events[events.part == "volatile"]
    live, restart = ev1[ev1["mode"] == "live"], ev1[ev1["mode"] == "restart"]

    def world(layouts):
        return [parse_schedule([x], spec)[0].world_size for x in layouts]

    moved = np.mean([reshard_plan(a, b, spec).network_bytes
                     for a, b in zip(layouts1, layouts1[1:], strict=False)])
    params = params_from_phases(live.assign(old_n=world(live.old_layout),
                                            new_n=world(live.new_layout)),
                                restart.assign(new_n=world(restart.new_layout)),
                                step_s=float(ev1.median_step_s.median()),
                                state_bytes=3 * spec.n_params * spec.itemsize,
                                moved_bytes=moved)
    rows = []
    for mode in MODES:
        measured = ev2[ev2["mode"] == mode]
        if not len(measured):
            continue
        phases = params.live_phases if mode == "live" else params.restart_phases
        predicted = float(sum(sum(phases(a, b).values())
                              for a, b in zip(sizes2, sizes2[1:], strict=False)))
        total = float(measured.downtime_s.sum())
        rows.append({"scenario": "cpu_check", "mode": mode, "events": len(sizes2) - 1,
                     "predicted_downtime_s": predicted, "measured_downtime_s": total,
                     "relative_error": predicted / total - 1,
                     "goodput": float(measured.goodput.iloc[0]),
                     "basis": "fitted to measured phases", "simulated": True})
    day = 86_400.0
    for scenario, n_params, gpus in GPU_SCENARIOS:
        p = gpu_params(n_params)
        trace = spot_trace(47, day, list(gpus), seed=0)
        for mode in MODES:
            _, result = simulate_resizes(p, trace, day, mode, n0=gpus[-1])
            phases = p.live_phases if mode == "live" else p.restart_phases
            rows.append({"scenario": scenario, "mode": mode, "events": result["events"],
                         "predicted_downtime_s": result["downtime_s"],
                         "measured_downtime_s": np.nan,
                         "downtime_per_event_full_size_s": sum(phases(gpus[-1],
                                                                      gpus[-1]).values()),
                         "goodput": result["goodput"],
                         "basis": "calibrated (paper's downtimes are inputs)",
                         "simulated": True})
    return pd.DataFrame(rows)


def summary_row(events: pd.DataFrame, quick: bool = False) -> pd.DataFrame:
    """The headline numbers in one row: downtime of both modes and their ratio (of means and
    of medians), goodput of both parts, preparation and step times, staging peak vs bound,
    memory, and the load average during the runs and now."""
    ev1, ev2 = events[events.part == "downtime"], events[events.part == "volatile"]
    live, restart = ev1[ev1["mode"] == "live"], ev1[ev1["mode"] == "restart"]
    return pd.DataFrame([{
        "live_downtime_mean_s": live.downtime_s.mean(), "live_downtime_sd_s": live.downtime_s.std(),
        "restart_downtime_mean_s": restart.downtime_s.mean(),
        "restart_downtime_sd_s": restart.downtime_s.std(),
        "ratio_restart_over_live": restart.downtime_s.mean() / live.downtime_s.mean(),
        "ratio_of_medians": restart.downtime_s.median() / live.downtime_s.median(),
        "live_downtime_median_s": live.downtime_s.median(),
        "restart_downtime_median_s": restart.downtime_s.median(),
        "live_pause_mean_s": live.pause_s.mean(), "restart_pause_mean_s": restart.pause_s.mean(),
        "live_goodput": live.goodput.mean(), "restart_goodput": restart.goodput.mean(),
        "volatile_live_goodput": ev2[ev2["mode"] == "live"].goodput.mean(),
        "volatile_restart_goodput": ev2[ev2["mode"] == "restart"].goodput.mean(),
        "live_prepare_mean_s": live.prepare_s.mean(),
        "steady_step_s": float(ev1.median_step_s.median()),
        "step_while_preparing_s": float(live.median_step_preparing_s.median()),
        "live_events": len(live), "restart_events": len(restart),
        "peak_staging_bytes": live.peak_staging_bytes.max(),
        "staging_bound_bytes": _sizes(quick)["staging_bytes"],
        "max_rss_mb": ev1.max_rss_mb.max(), "load_average_1min_at_summary": os.getloadavg()[0],
        "load_average_1min_during_runs": events.load_average_1min.mean()}])


def downtime(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
             out=None, quick: bool = False) -> pd.DataFrame:
    """LiveR downtime per resize: live reconfiguration vs checkpoint/restart (real workers)."""
    events, _ = part_runs("downtime", reps, seed, out, quick)
    return summarize_modes(events)


def scaling(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
            out=None, quick: bool = False) -> pd.DataFrame:
    """LiveR goodput: SimPy model checked on real runs, extrapolated to GPU scale (SIMULATED)."""
    events = pd.concat([part_runs(part, reps if part == "downtime" else None, seed,
                                  _part(out, part), quick)[0]
                        for part in ("downtime", "volatile")], ignore_index=True)
    return simulate_scaling(events, quick)


def resimulate(folder) -> pd.DataFrame:
    """Rewrite ``folder/simulated.csv`` from the real runs stored in ``folder/events.csv`` (the
    SimPy part only: no process is started) and refresh ``folder/MANIFEST.json``, keeping the
    provenance of the real runs in its ``note``. Returns the simulated table."""
    from causalkit.studies import write_manifest

    folder = Path(folder)
    if not (folder / "events.csv").exists():
        raise ValueError(f"folder has no events.csv: {folder}")
    previous = json.loads((folder / "MANIFEST.json").read_text()) \
        if (folder / "MANIFEST.json").exists() else {}
    sim = simulate_scaling(pd.read_csv(folder / "events.csv"),
                           quick=bool(previous.get("quick", False)))
    sim.to_csv(folder / "simulated.csv", index=False)
    note = (f"simulated.csv rewritten from events.csv by the command above (SimPy only); the real "
            f"runs and the other files come from {previous.get('command')!r} at git commit "
            f"{previous.get('git_commit')}")
    write_manifest(folder, study=previous.get("study", "liver"), reps=previous.get("reps"),
                   seed=previous.get("seed"), quick=previous.get("quick", False), rerun=False,
                   note=note, wall_seconds=previous.get("wall_seconds"))
    return sim


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="LiveR studies: rewrite the SIMULATED table from "
                                             "stored real runs")
    ap.add_argument("command", choices=["resimulate"])
    ap.add_argument("folder", help="results folder holding events.csv (e.g. "
                                   "simulations/results/liver)")
    args = ap.parse_args(argv)
    try:
        print(resimulate(args.folder).to_string(index=False))
    except ValueError as exc:
        print(f"causalkit.systems.elastic.studies: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
