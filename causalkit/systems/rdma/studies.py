"""SHIFT studies on emulated NICs, run through the experiment engine
(:func:`causalkit.simulation.run_experiment`: seeds from ``SeedSequence([seed, rep])``, resumable
stores, manifests through :func:`causalkit.studies.run_named_study`).

``downtime``
    Every workload (ring all-reduce, p2p stream) under every fault of :data:`FAULT_CASES`, with
    plain RC QPs and with SHIFT: completion, correctness, downtime, detection time, longest
    application-visible gap. Every NIC is a software emulation (``emulated=True`` in every row);
    timings are wall-clock on this machine.
``transports``
    SHIFT under a NIC-0 failure over each emulated path type (in-process, UDP on loopback,
    shared memory).
``training``
    Training progress under a mid-run NIC-0 failure
    (:class:`~causalkit.systems.rdma.training.FailoverTrainingExperiment`): no fault, SHIFT
    failover, and checkpoint/restart; per mode the iterations executed (recomputation
    included), wall time, a load-independent time (executed iterations at one pooled median
    iteration time plus restart and checkpoint costs), restarts and bit-equality of the final
    weights with the fault-free run.
``overhead``
    Datapath cost per ``post_send``, empty ``poll`` and signaled WRITE round trip, plain RC vs
    SHIFT (:func:`~causalkit.systems.rdma.overhead.datapath_costs`), median over repetitions.

Each study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``) and returns its summary table.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd

from causalkit.systems.rdma.experiment import FailoverExperiment

__all__ = ["FULL", "QUICK", "FAULT_CASES", "downtime", "downtime_runs", "summarize_downtime",
           "transports", "training_runs", "summarize_training", "training", "overhead"]

#: Sizes of the full study and of the seconds-scale quick run.
FULL = {"reps": 5, "iterations": 30, "n_elems": 32768, "n_msgs": 200, "msg_bytes": 65536,
        "transport_reps": 3, "overhead_ops": 5000, "overhead_reps": 5, "train_iters": 120,
        "ckpt_every": 40, "fault_at_iter": 90, "n_params": 8192, "restart_s": 2.0,
        "train_reps": 3}
QUICK = {"reps": 1, "iterations": 6, "n_elems": 3000, "n_msgs": 30, "msg_bytes": 8192,
         "transport_reps": 1, "overhead_ops": 256, "overhead_reps": 1, "train_iters": 16,
         "ckpt_every": 5, "fault_at_iter": 8, "n_params": 512, "restart_s": 0.2,
         "train_reps": 1}
#: Emulated checkpoint cost of the training study (seconds), FailoverTrainingExperiment's
#: default.
CKPT_S = 0.05
#: (fault, host whose NIC 0 fails; for p2p host 0 sends, host 1 receives)
FAULT_CASES = (("none", 1), ("nic_down", 1), ("nic_down", 0), ("link_flap", 1),
               ("drop_acks", 1), ("drop", 1), ("delay", 1))


def _part(out, tag: str):
    if out is None:
        return None
    out = Path(out)
    return out.with_name(f"{out.stem}_{tag}{out.suffix or '.jsonl'}")


def downtime_runs(reps=None, seed: int = 2024, n_jobs: int = 1, out=None,
                  quick: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-run rows and throughput series of the downtime study (see the module docstring)."""
    cfg = QUICK if quick else FULL
    rows, series = [], []
    for workload in ("p2p", "allreduce"):
        for fault, host in FAULT_CASES:
            exp = FailoverExperiment(workload=workload, fault=fault, fault_host=host,
                                     reps=reps or cfg["reps"], iterations=cfg["iterations"],
                                     n_elems=cfg["n_elems"], n_msgs=cfg["n_msgs"],
                                     msg_bytes=cfg["msg_bytes"], op_timeout=5.0,
                                     sample_interval=0.02, seed=seed)
            rows.append(exp.run(n_jobs=n_jobs,
                                out=_part(out, f"{workload}_{fault}_h{host}")).assign(
                fault_host=host))
            if fault in ("nic_down", "link_flap") and host == 1:
                series.append(exp.timeseries_.assign(workload=workload, fault=fault))
    return pd.concat(rows, ignore_index=True), pd.concat(series, ignore_index=True)


def summarize_downtime(runs: pd.DataFrame) -> pd.DataFrame:
    """Median downtime, detection time and longest gap (ms) per workload, fault and mode."""
    def ms(column):
        return column, lambda x: 1e3 * x.median()

    g = runs.groupby(["workload", "fault", "fault_host", "shift"], sort=False)
    return g.agg(runs=("rep", "size"), completed=("completed", "mean"),
                 correct=("correct", "mean"), downtime_ms=ms("downtime_s"),
                 detect_ms=ms("detect_s"), max_gap_ms=ms("max_gap_s"),
                 failovers=("failovers", "mean"), switch_backs=("switch_backs", "mean"),
                 trimmed=("trimmed", "mean"), op_time_ms=ms("op_time_s"),
                 throughput_MBps=("throughput_MBps", "median")).reset_index()


def downtime(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
             out=None, quick: bool = False) -> pd.DataFrame:
    """SHIFT vs plain RC under NIC and link faults (emulated NICs): downtime per fault."""
    runs, _ = downtime_runs(reps, seed, n_jobs, out, quick)
    return summarize_downtime(runs)


def transports(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
               out=None, quick: bool = False) -> pd.DataFrame:
    """SHIFT failover under a NIC-0 failure over each emulated path type (emulated NICs)."""
    cfg = QUICK if quick else FULL
    rows = [FailoverExperiment(workload="allreduce", fault="nic_down", transport=transport,
                               shift=(True,), reps=reps or cfg["transport_reps"],
                               iterations=cfg["iterations"], n_elems=cfg["n_elems"],
                               seed=seed).run(n_jobs=n_jobs, out=_part(out, transport))
            for transport in ("inprocess", "udp", "shm")]
    runs = pd.concat(rows, ignore_index=True)
    return runs.groupby("transport", sort=False).agg(
        runs=("rep", "size"), completed=("completed", "mean"), correct=("correct", "mean"),
        downtime_ms=("downtime_s", lambda x: 1e3 * x.median()),
        max_gap_ms=("max_gap_s", lambda x: 1e3 * x.median()),
        throughput_MBps=("throughput_MBps", "median")).reset_index()


def _training_run(rng, rep, *, iterations, ckpt_every, fault_at, n_params, restart_s):
    """The three modes of one repetition (one row each, with its progress curve)."""
    from causalkit.systems.rdma.training import FailoverTrainingExperiment

    exp = FailoverTrainingExperiment(iterations=iterations, ckpt_every=ckpt_every,
                                     fault_at=fault_at, n_params=n_params, restart_s=restart_s,
                                     ckpt_s=CKPT_S, seed=int(rng.integers(2 ** 31 - 1)))
    rows = exp.run()
    return [{**row, "progress": exp.progress_[exp.progress_["mode"] == row["mode"]]
             .drop(columns="mode").to_dict("records")} for row in rows.to_dict("records")]


def training_runs(reps=None, seed: int = 2024, out=None,
                  quick: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-mode rows and progress curves of the training study (see the module docstring)."""
    from causalkit.simulation import run_experiment

    cfg = QUICK if quick else FULL
    run_once = partial(_training_run, iterations=cfg["train_iters"],
                       ckpt_every=cfg["ckpt_every"], fault_at=cfg["fault_at_iter"],
                       n_params=cfg["n_params"], restart_s=cfg["restart_s"])
    runs = run_experiment(run_once, [{}], reps or cfg["train_reps"], seed, out=out,
                          progress=False)
    progress = pd.DataFrame([{"mode": mode, "rep": rep, **point} for mode, rep, curve in
                             zip(runs["mode"], runs["rep"], runs["progress"], strict=True)
                             for point in curve])
    return runs.drop(columns="progress"), progress


def summarize_training(runs: pd.DataFrame, quick: bool = False) -> pd.DataFrame:
    """Per mode: medians of the measured times and counts, and a pooled time.

    Machine load changes the iteration time several-fold between runs, so every mode's work
    is also priced at one pooled iteration time ``t`` (the median of all runs' median iteration
    times): ``pooled_time_s = median(executed * t + restarts * restart_s + (executed //
    ckpt_every) * ckpt_s)``.
    """
    cfg = QUICK if quick else FULL
    table = runs.groupby("mode", sort=False).agg(
        reps=("rep", "size"), normalized_s=("normalized_s", "median"),
        executed=("executed", "median"), wall_s_median=("wall_s", "median"),
        wall_s_min=("wall_s", "min"), wall_s_max=("wall_s", "max"),
        recomputed=("recomputed", "mean"), restarts=("restarts", "mean"),
        failovers=("failovers", "mean"),
        equal_to_no_fault=("equal_to_no_fault", "all")).reset_index()
    t_iter = float(runs["median_iter_s"].median())
    pooled = (runs["executed"] * t_iter + runs["restarts"] * cfg["restart_s"]
              + runs["executed"] // cfg["ckpt_every"] * CKPT_S)
    table["pooled_iter_s"] = t_iter
    table["pooled_time_s"] = pooled.groupby(runs["mode"]).median().reindex(
        table["mode"]).to_numpy()
    return table


def training(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
             out=None, quick: bool = False) -> pd.DataFrame:
    """SHIFT vs checkpoint/restart: training progress under a NIC failure (emulated NICs)."""
    runs, _ = training_runs(reps, seed, out, quick)
    return summarize_training(runs, quick)


def _overhead_rep(rng, rep, *, n_ops):
    from causalkit.systems.rdma.overhead import datapath_costs

    return datapath_costs(n_ops, seed=int(rng.integers(2 ** 31 - 1)), rep=rep)


def overhead(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
             out=None, quick: bool = False) -> pd.DataFrame:
    """SHIFT datapath cost per verbs call vs plain RC QPs (emulated NICs)."""
    from causalkit.simulation import run_experiment
    from causalkit.systems.rdma.overhead import summarize_datapath

    cfg = QUICK if quick else FULL
    rows = run_experiment(partial(_overhead_rep, n_ops=cfg["overhead_ops"]), [{}],
                          reps or cfg["overhead_reps"], seed, out=out, progress=False)
    return summarize_datapath(rows, "inprocess")
