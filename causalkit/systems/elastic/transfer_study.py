"""LiveR where the state is large: downtime parts against state size, and a cost-model
prediction of the paper's setting.

Real runs (gloo over loopback, CPU workers) of the resize schedule ``2 -> 3 -> 2`` in both modes
(live reconfiguration, checkpoint/restart) for models whose carried state (parameters and Adam's
two moments, float32) is ``state_mb`` MiB, through the experiment engine
(:func:`causalkit.simulation.run_experiment`: repetition ``r`` of every (size, mode) runs before
repetition ``r + 1`` of any, so load drifts hit both modes alike). Per event the downtime is
split into five parts (:func:`~causalkit.systems.elastic.timeline.downtime_parts`).

Then ``downtime = a + b * state_GB`` (and, reported only, ``+ c * processes``) is fitted per
mode (:func:`~causalkit.systems.elastic.costfit.fit_costs`) and used to predict the paper's
settings (:data:`PAPER_SETTINGS`). Those rows are set against the GPU scenario of
:mod:`~causalkit.systems.elastic.simmodel`, which is CALIBRATED: its inputs are the paper's own
downtimes, so its output reproduces them and predicts nothing.

    python -m causalkit.systems.elastic.transfer_study [--state-mb 64,256,1024] [--reps 3]
    python -m causalkit.systems.elastic.transfer_study --quick

Reference: Liu et al., "Fine-Grained Elasticity via Live Reconfiguration for Model Training",
arXiv 2605.22014 (2026).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from .costfit import fit_costs
from .experiment import ElasticExperiment, parse_schedule, tidy_runs
from .layout import spec_for_state
from .timeline import PARTS, downtime_parts

__all__ = ["FULL", "QUICK", "PAPER_SETTINGS", "MODELS", "transfer_runs", "part_summary",
           "ratio_summary", "cost_fits", "predict_paper", "transfer", "main"]

MiB = 1 << 20
#: Model fields other than the MLP width (which sets the state size): few tokens per step
#: (12 sequences of 4), so a step of a 1 GB-state model stays near a second on one core.
SPEC = {"dim": 96, "heads": 12, "vocab": 64, "seq": 4, "global_batch": 12, "micro_batches": 1}
#: Full and quick sizes: state sizes (MiB), schedule, steps per run, repetitions, staging bound.
FULL = {"state_mb": (64, 256, 1024), "schedule": (2, 3, 2), "steps": 9, "reps": 3,
        "staging_bytes": 64 * MiB}
QUICK = {"state_mb": (2, 4, 8), "schedule": (2, 3, 2), "steps": 9, "reps": 1,
         "staging_bytes": 1 * MiB}
#: Settings of the paper to predict: (name, parameters, GPUs). State = 16 bytes per parameter
#: (mixed-precision Adam: bf16 weights and gradients, fp32 master weights and two moments).
PAPER_SETTINGS = (("GPT-1.7B_32gpu", 1.7e9, 32), ("GPT-30B_32gpu", 30e9, 32),
                  ("70B_1024gpu", 70e9, 1024))
BYTES_PER_PARAM = 16.0
PART_NAMES = tuple(PARTS["live"])


def _run(rng, rep, *, mode, state_mb, schedule, steps, staging_bytes):
    """One run of ``mode`` at ``state_mb`` MiB of state (the engine's ``run_once``)."""
    spec = spec_for_state(state_mb * MiB, **SPEC)
    row = ElasticExperiment(list(schedule), steps=steps, mode=mode, spec=spec,
                            staging_bytes=staging_bytes, timeout_s=300.0).run_once(rng, rep)
    return {**row, "state_bytes": spec.state_bytes, "ffn": spec.ffn}


def transfer_runs(reps=None, seed: int = 2024, out=None, quick: bool = False,
                  state_mb=None) -> pd.DataFrame:
    """Real runs of both modes at every state size; one row per committed resize event with its
    phases, the five downtime parts, ``state_gb`` (GB = 1e9 bytes) and ``processes`` (world
    size after the event). Stored in ``out`` as they finish (a rerun resumes)."""
    from causalkit.simulation import run_experiment

    cfg = QUICK if quick else FULL
    sizes = tuple(state_mb) if state_mb is not None else cfg["state_mb"]
    if not sizes or any(isinstance(s, bool) or not isinstance(s, (int, float)) or s <= 0
                        for s in sizes):
        raise ValueError(f"state_mb must list positive sizes in MiB; got {state_mb!r}")
    run_once = partial(_run, schedule=cfg["schedule"], steps=cfg["steps"],
                       staging_bytes=cfg["staging_bytes"])
    configs = [{"state_mb": s, "mode": m} for s in sizes for m in ("live", "restart")]
    runs = run_experiment(run_once, configs, reps or cfg["reps"], seed, out=out, progress=False)
    events, _ = tidy_runs(runs)
    events = downtime_parts(events)
    spec = spec_for_state(1, **SPEC)
    sizes_of = {str(x): x.world_size for x in parse_schedule(cfg["schedule"], spec)}
    return events.assign(state_gb=events.state_bytes / 1e9,
                         processes=events.new_layout.map(sizes_of))


def _mean_ci(values) -> dict:
    from scipy import stats

    v = np.asarray(values, float)
    n, mean = len(v), float(v.mean())
    sd = float(v.std(ddof=1)) if n > 1 else float("nan")
    half = float(stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
    return {"mean_s": mean, "sd_s": sd, "ci_low_s": mean - half, "ci_high_s": mean + half,
            "runs": n}


def _run_means(events: pd.DataFrame) -> pd.DataFrame:
    """Per run (size, mode, rep): mean over its events of the downtime and of each part."""
    cols = ["downtime_s", *PART_NAMES, "parts_sum_s"]
    return events.groupby(["state_mb", "state_bytes", "mode", "rep"])[cols].mean().reset_index()


def part_summary(events: pd.DataFrame) -> pd.DataFrame:
    """Per state size, mode and quantity (the downtime per event, each part, the parts' sum):
    mean over runs of the run's mean per event, SD, 95 % t interval and the number of runs
    (the run is the unit: its events share a process and a load)."""
    rows = []
    for (mb, nbytes, mode), runs in _run_means(events).groupby(["state_mb", "state_bytes",
                                                                 "mode"]):
        for quantity in ("downtime_s", *PART_NAMES, "parts_sum_s"):
            rows.append({"state_mb": mb, "state_bytes": nbytes, "mode": mode,
                         "quantity": quantity, **_mean_ci(runs[quantity])})
    return pd.DataFrame(rows)


def ratio_summary(events: pd.DataFrame) -> pd.DataFrame:
    """Per state size: restart over live downtime (ratio of the mean run means), with a 95 %
    interval from the delta method on the log ratio, ``se^2 = sd_r^2 / (n_r m_r^2) +
    sd_l^2 / (n_l m_l^2)`` (t with ``min(n) - 1`` df)."""
    from scipy import stats

    rows = []
    for (mb, nbytes), runs in _run_means(events).groupby(["state_mb", "state_bytes"]):
        live = runs.loc[runs["mode"] == "live", "downtime_s"].to_numpy()
        restart = runs.loc[runs["mode"] == "restart", "downtime_s"].to_numpy()
        if not len(live) or not len(restart):
            continue
        ratio = restart.mean() / live.mean()
        n = min(len(live), len(restart))
        if n > 1:
            se = np.sqrt(restart.var(ddof=1) / (len(restart) * restart.mean() ** 2)
                         + live.var(ddof=1) / (len(live) * live.mean() ** 2))
            q = stats.t.ppf(0.975, n - 1)
            low, high = ratio * np.exp(-q * se), ratio * np.exp(q * se)
        else:
            low = high = float("nan")
        rows.append({"state_mb": mb, "state_bytes": nbytes,
                     "live_downtime_mean_s": live.mean(), "restart_downtime_mean_s":
                     restart.mean(), "ratio_restart_over_live": ratio, "ratio_ci_low": low,
                     "ratio_ci_high": high, "runs_per_mode": n})
    return pd.DataFrame(rows)


#: Cost models fitted per mode: name -> regressors. Predictions use ``bytes``: the measured
#: per-process term (2-3 processes on two shared cores) is reported, not extrapolated to
#: 32-1,024 GPUs whose processes start on their own cores.
MODELS = {"bytes": ("state_gb",), "bytes_processes": ("state_gb", "processes")}


def cost_fits(events: pd.DataFrame, terms=MODELS["bytes"]) -> dict:
    """Per mode, the least-squares fit of ``downtime_s`` on ``terms`` over the events."""
    return {mode: fit_costs(events[events["mode"] == mode], "downtime_s", terms)
            for mode in ("live", "restart")}


def predict_paper(events: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The fitted coefficients (one row per model of :data:`MODELS`, mode and term) and the
    predictions of ``downtime = a + b * state_gb`` per mode.

    Predictions, per setting of :data:`PAPER_SETTINGS`, under two stated assumptions on how the
    per-byte cost measured here carries over (the fixed cost ``a`` is taken as measured):

    * ``one_host``: the whole state crosses one path at this machine's per-byte cost (as it does
      here: two shared cores, loopback, one page-cached disk);
    * ``per_gpu``: every GPU moves its own share in parallel at this machine's per-byte cost
      (``state_gb / GPUs`` per process; the paper's GPUs each have their own link).

    Beside them, the SimPy GPU scenario's per-event downtime, labelled ``calibrated``: it takes
    the paper's reported downtimes as inputs (:func:`~.simmodel.gpu_params`), so it is not a
    prediction.
    """
    from .simmodel import gpu_params

    coef = pd.concat([f.to_frame().assign(model=name, mode=m)
                      for name, terms in MODELS.items()
                      for m, f in cost_fits(events, terms).items()], ignore_index=True)
    fits = cost_fits(events)
    rows = []
    for name, n_params, gpus in PAPER_SETTINGS:
        state_gb = n_params * BYTES_PER_PARAM / 1e9
        for basis, gb in (("one_host", state_gb), ("per_gpu", state_gb / gpus)):
            pred = {m: fits[m].predict({"state_gb": gb}) for m in fits}
            rows.append({"setting": name, "basis": f"predicted ({basis})", "state_gb": state_gb,
                         "gpus": gpus, "live_downtime_s": pred["live"][0],
                         "live_se_s": pred["live"][1], "restart_downtime_s": pred["restart"][0],
                         "restart_se_s": pred["restart"][1],
                         "ratio_restart_over_live": pred["restart"][0] / pred["live"][0],
                         "simulated": False})
        calibrated = gpu_params(n_params)
        live = sum(calibrated.live_phases(gpus, gpus).values())
        restart = sum(calibrated.restart_phases(gpus, gpus).values())
        rows.append({"setting": name, "basis": "calibrated (paper's downtimes are inputs)",
                     "state_gb": state_gb, "gpus": gpus, "live_downtime_s": live,
                     "live_se_s": np.nan, "restart_downtime_s": restart, "restart_se_s": np.nan,
                     "ratio_restart_over_live": restart / live, "simulated": True})
    return coef, pd.DataFrame(rows)


def transfer(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
             out=None, quick: bool = False) -> pd.DataFrame:
    """LiveR downtime against state size (real workers): restart / live ratio per size."""
    return ratio_summary(transfer_runs(reps, seed, out, quick))


def _default_out(quick: bool) -> Path:
    from causalkit.studies import RESULTS_ROOT

    out = RESULTS_ROOT / "liver" / "transfer"
    return out / "quick" if quick else out


def main(argv=None) -> int:
    from causalkit.simulation import engine_options
    from causalkit.studies import add_study_arguments, write_manifest

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_arguments(ap)
    ap.add_argument("--state-mb", default=None,
                    help="comma-separated state sizes in MiB (default: 64,256,1024; --quick: "
                         "2,4,8)")
    args = ap.parse_args(argv)
    try:
        sizes = None if args.state_mb is None else tuple(
            float(s) if "." in s else int(s) for s in args.state_mb.split(","))
    except ValueError:
        print(f"transfer_study: --state-mb must be comma-separated numbers; got "
              f"{args.state_mb!r}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    out = Path(args.out) if args.out else _default_out(args.quick)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    try:
        with engine_options(overwrite=args.overwrite, params={"quick": args.quick}):
            events = transfer_runs(args.reps, args.seed, out / "raw" / "transfer.jsonl",
                                   args.quick, sizes)
    except (ValueError, TypeError) as exc:
        print(f"transfer_study: {exc}", file=sys.stderr)
        return 2
    events.to_csv(out / "events.csv", index=False)
    parts = part_summary(events)
    parts.to_csv(out / "parts.csv", index=False)
    ratios = ratio_summary(events)
    ratios.to_csv(out / "ratio.csv", index=False)
    coef, prediction = predict_paper(events)
    coef.to_csv(out / "cost_fit.csv", index=False)
    prediction.to_csv(out / "prediction.csv", index=False)
    write_manifest(out, study="liver-transfer", reps=args.reps, seed=args.seed, quick=args.quick,
                   state_mb=list(sizes) if sizes else None,
                   load_average_1min_at_end=os.getloadavg()[0],
                   wall_seconds=round(time.perf_counter() - start, 3))
    pd.set_option("display.width", 200)
    table = parts.pivot_table(index=["state_mb", "mode"], columns="quantity", values="mean_s")
    print(table.round(3).to_string())
    print(ratios.round(3).to_string(index=False))
    print(coef.to_string(index=False))
    print(prediction.round(2).to_string(index=False))
    print(f"liver-transfer: results in {out}/ (provenance: MANIFEST.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
