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

Each study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``) and returns its summary table.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from causalkit.systems.rdma.experiment import FailoverExperiment

__all__ = ["FULL", "QUICK", "FAULT_CASES", "downtime", "downtime_runs", "summarize_downtime",
           "transports"]

#: Sizes of the full study and of the seconds-scale quick run.
FULL = {"reps": 5, "iterations": 30, "n_elems": 32768, "n_msgs": 200, "msg_bytes": 65536,
        "transport_reps": 3}
QUICK = {"reps": 1, "iterations": 6, "n_elems": 3000, "n_msgs": 30, "msg_bytes": 8192,
         "transport_reps": 1}
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
