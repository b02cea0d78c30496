"""Failover experiments: NCCL-style workloads under injected NIC / link faults, with and without
SHIFT, on emulated NICs (every output row carries ``emulated=True``).

Downtime follows the paper's definition: from the first error completion SHIFT sees to the first
successful completion after fallback (largest over the run's QPs). ``max_gap_s`` is the longest
pause between two completed operations as the application sees it, which also contains the RC
detection time (``(retry_cnt + 1)`` local ACK timeouts).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from causalkit._validation import check_fraction, check_positive_int
from causalkit.systems.rdma.workloads import TRANSPORTS, build_ring, run_allreduce, run_p2p

__all__ = ["FAULTS", "FailoverExperiment", "inject_fault"]

#: Fault types: what :func:`inject_fault` does to NIC 0 (rail 0) of the faulty host.
FAULTS = {
    "none": "no fault",
    "nic_down": "NIC 0 dies for good (every path of the NIC is cut)",
    "link_flap": "NIC 0's links go down for flap_s seconds, then come back",
    "drop": "NIC 0's links lose each packet with probability drop_p (RC retransmits)",
    "drop_acks": "one link of NIC 0 loses every ACK: data is placed, the sender times out",
    "delay": "NIC 0's links add delay_s seconds of one-way latency",
}


def inject_fault(cluster, fault: str, host: int, *, flap_s: float = 0.2, drop_p: float = 0.05,
                 delay_s: float = 0.002) -> None:
    """Apply ``fault`` (a key of ``causalkit.systems.rdma.FAULTS``) to NIC 0 of ``host`` in
    ``cluster``."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {sorted(FAULTS)}; got {fault!r}")
    paths = cluster.nic_paths(host, 0)
    if fault == "nic_down":
        cluster.hosts[host].nics[0].kill()
    elif fault == "link_flap":
        for p in paths:
            p.link_down(0.0, flap_s)
    elif fault == "drop":
        for p in paths:
            p.drop(drop_p)
    elif fault == "drop_acks":
        paths[0].drop_acks_only(1.0)
    elif fault == "delay":
        for p in paths:
            p.delay(delay_s)


class FailoverExperiment:
    """Run a workload, inject a fault part-way, and measure what the application sees.

    Parameters
    ----------
    workload : {"allreduce", "p2p"}
        Ring all-reduce over ``n_hosts`` ranks, or a Simple-protocol stream host 0 -> host 1.
    fault : str
        A key of ``causalkit.systems.rdma.FAULTS``.
    transport : {"inprocess", "udp", "shm"}
        Path type between the emulated NICs.
    shift : bool or tuple of bool
        Configurations to run: plain RC QPs (False), SHIFT QPs (True), or both.
    n_hosts, n_elems, iterations : int
        All-reduce size: ranks, float64 elements per rank, number of all-reduces.
    msg_bytes, n_msgs : int
        P2P size.
    fault_at : float
        Fraction of the operations after which the fault is injected.
    fault_host : int
        Host whose NIC 0 fails (for p2p: 0 = sender side, 1 = receiver side).
    flap_s, drop_p, delay_s : float
        Fault parameters (see ``causalkit.systems.rdma.FAULTS``).
    reps : int
        Repetitions per configuration.
    sample_interval : float
        Bin width (seconds) of the throughput time series.
    mtu, timeout, retry_cnt : int
        Emulated NIC MTU and RC attributes (detection after ~``(retry_cnt+1)*4.096us*2**timeout``).
    op_timeout : float
        Seconds an operation may wait before the workload gives up (plain QPs under a fault).
    seed : int
    """

    def __init__(self, workload: str = "allreduce", fault: str = "nic_down",
                 transport: str = "inprocess", shift=(False, True), *, n_hosts: int = 4,
                 n_elems: int = 32768, iterations: int = 20, msg_bytes: int = 65536,
                 n_msgs: int = 100, fault_at: float = 0.3, fault_host: int = 1,
                 flap_s: float = 0.2, drop_p: float = 0.05, delay_s: float = 0.002,
                 reps: int = 1, sample_interval: float = 0.05, mtu: int = 4096,
                 timeout: int = 13, retry_cnt: int = 4, op_timeout: float = 5.0, seed: int = 0):
        self.workload, self.fault, self.transport, self.shift = workload, fault, transport, shift
        self.n_hosts, self.n_elems, self.iterations = n_hosts, n_elems, iterations
        self.msg_bytes, self.n_msgs, self.fault_at, self.fault_host = (msg_bytes, n_msgs,
                                                                      fault_at, fault_host)
        self.flap_s, self.drop_p, self.delay_s = flap_s, drop_p, delay_s
        self.reps, self.sample_interval, self.mtu = reps, sample_interval, mtu
        self.timeout, self.retry_cnt, self.op_timeout, self.seed = (timeout, retry_cnt,
                                                                    op_timeout, seed)

    def _validate(self):
        if self.workload not in ("allreduce", "p2p"):
            raise ValueError(f"workload must be 'allreduce' or 'p2p'; got {self.workload!r}")
        if self.fault not in FAULTS:
            raise ValueError(f"fault must be one of {sorted(FAULTS)}; got {self.fault!r}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {sorted(TRANSPORTS)}; "
                             f"got {self.transport!r}")
        check_fraction(self.fault_at, "fault_at")
        check_positive_int(self.reps, "reps")
        n_hosts = 2 if self.workload == "p2p" else check_positive_int(self.n_hosts, "n_hosts",
                                                                      minimum=2)
        if not 0 <= self.fault_host < n_hosts:
            raise ValueError(f"fault_host must be in [0, {n_hosts}); got {self.fault_host}")
        configs = self.shift if isinstance(self.shift, (tuple, list)) else (self.shift,)
        return n_hosts, [bool(c) for c in configs]

    def run(self, *, n_jobs: int = 1, out=None, overwrite: bool | None = None,
            progress: bool = False) -> pd.DataFrame:
        """Run every configuration and repetition through the experiment engine
        (:func:`causalkit.simulation.run_experiment`: seeds from ``SeedSequence([seed, rep])``,
        resumable store in ``out``).

        Parameters
        ----------
        n_jobs : int
            Worker processes (timings are wall-clock: keep 1 for downtime measurements).
        out : str or Path, optional
            Results file of the engine (JSON Lines; a rerun resumes).
        overwrite : bool, optional
            Discard what ``out`` holds instead of resuming.
        progress : bool
            Show a progress bar.

        Returns
        -------
        pandas.DataFrame
            One row per (shift, rep): ``completed``, ``correct`` (results bit-equal to the
            fault-free reference), ``ops_done``, ``elapsed_s``, ``throughput_MBps``,
            ``op_time_s`` (median time per operation before the fault), ``downtime_s``,
            ``max_gap_s``, ``failovers``, ``switch_backs``, ``errors_surfaced``, ``trimmed``,
            ``replayed``, ``emulated``. The throughput time series is in ``timeseries_``,
            the SHIFT events in ``events_``.
        """
        from causalkit.simulation import run_experiment

        _, configs = self._validate()
        frame = run_experiment(self.run_once, [{"shift": c} for c in configs], self.reps,
                               self.seed, n_jobs=n_jobs, out=out, overwrite=overwrite,
                               progress=progress)
        keys = list(zip(frame["shift"], frame["rep"], strict=True))
        self.timeseries_ = pd.DataFrame(
            [{**point, "shift": shift, "rep": rep}
             for (shift, rep), series in zip(keys, frame["timeseries"], strict=True)
             for point in series], columns=["t", "throughput_MBps", "shift", "rep"])
        self.events_ = pd.DataFrame([{**event, "shift": shift, "rep": rep}
                                     for (shift, rep), events in zip(keys, frame["events"],
                                                                     strict=True)
                                     for event in events])
        return frame.drop(columns=["timeseries", "events"])

    def run_once(self, rng: np.random.Generator, rep: int, *, shift: bool) -> dict:
        """One repetition of one configuration (the engine's ``run_once`` protocol).

        Returns the result row, with the throughput time series (``timeseries``: a list of
        ``{t, throughput_MBps}``) and the SHIFT events (``events``) as list-valued entries.
        """
        n_hosts, _ = self._validate()
        seed = int(rng.integers(2**31))
        cluster = build_ring(n_hosts, shift=shift, transport=self.transport, mtu=self.mtu,
                             timeout=self.timeout, retry_cnt=self.retry_cnt, seed=seed)
        n_ops = self.iterations if self.workload == "allreduce" else self.n_msgs
        k_fault = int(round(self.fault_at * n_ops))
        fault_time = []

        def hook(i):
            if i == k_fault and self.fault != "none":
                fault_time.append(time.monotonic())
                inject_fault(cluster, self.fault, self.fault_host, flap_s=self.flap_s,
                             drop_p=self.drop_p, delay_s=self.delay_s)

        try:
            if self.workload == "allreduce":
                out = run_allreduce(cluster, self.n_elems, self.iterations, seed=seed,
                                    on_iteration=hook, timeout=self.op_timeout)
                res, ref = out["results"], out["reference"]
                done = min(len(v) for v in res.values())
                correct = done == n_ops and all(
                    np.array_equal(a, b)
                    for v in res.values() for a, b in zip(v, ref, strict=False))
            else:
                out = run_p2p(cluster, self.msg_bytes, self.n_msgs, seed=seed, on_message=hook,
                              timeout=self.op_timeout)
                done = len(out["ok"])
                correct = done == n_ops and all(out["ok"])
            ev = [dict(e) for qp in out["qps"] for e in getattr(qp, "events", [])]
        finally:
            cluster.close()
        times = np.asarray(out["times"])
        t_end = times[-1] if times.size else out["t0"]
        elapsed = t_end - out["t0"]
        gaps = np.diff(np.concatenate([[out["t0"]], times]))
        pre = gaps[:max(k_fault, 1)]
        fo = [e for e in ev if e["event"] == "failover"]
        downs = [e["t_first_success"] - e["t_error"] for e in fo if "t_first_success" in e]
        row = {
            "workload": self.workload, "fault": self.fault, "transport": self.transport,
            "shift": shift, "rep": rep, "emulated": True,
            "completed": done == n_ops and not out["errors"], "correct": bool(correct),
            "ops_done": done, "ops_total": n_ops, "elapsed_s": elapsed,
            "throughput_MBps": out["bytes_per_op"] * done / elapsed / 1e6 if elapsed > 0 else 0.0,
            "op_time_s": float(np.median(pre)) if pre.size else np.nan,
            "downtime_s": max(downs) if downs else np.nan,
            "detect_s": min(e["t_error"] for e in fo) - fault_time[0] if fo and fault_time
            else np.nan,
            "max_gap_s": float(gaps.max()) if gaps.size else np.nan,
            "failovers": len(fo),
            "switch_backs": sum(e["event"] == "switch_back" and "t_done" in e for e in ev),
            "errors_surfaced": sum(e["event"] == "error" for e in ev),
            "trimmed": sum(e.get("trimmed", 0) for e in fo),
            "replayed": sum(e.get("replayed", 0) for e in fo),
            "error": "; ".join(sorted({type(x).__name__ + ": " + str(x)[:80]
                                       for x in out["errors"].values()})),
        }
        series = self._series(out, times)
        row["timeseries"] = series.to_dict("records")
        row["events"] = [{k: v for k, v in e.items() if isinstance(v, (int, float, str, bool))}
                         for e in ev]
        return row

    def _series(self, out, times) -> pd.DataFrame:
        if not times.size:
            return pd.DataFrame({"t": [], "throughput_MBps": []})
        rel = times - out["t0"]
        edges = np.arange(0.0, rel[-1] + self.sample_interval, self.sample_interval)
        counts, _ = np.histogram(rel, bins=np.append(edges, edges[-1] + self.sample_interval))
        return pd.DataFrame({"t": edges + self.sample_interval,
                             "throughput_MBps": counts * out["bytes_per_op"]
                             / self.sample_interval / 1e6})
