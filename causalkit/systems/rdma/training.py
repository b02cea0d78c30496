"""Training progress under a NIC fault: SHIFT vs checkpoint-restart, on emulated NICs.

A data-parallel least-squares model is trained by full-batch gradient descent: every rank holds a
shard ``(X_r, y_r)``, computes ``g_r = X_r' (X_r w - y_r) / n``, the ring all-reduce sums the
``g_r`` (:func:`~.workloads.run_allreduce`), and every rank applies ``w <- w - lr * g``. The ring's
reduction order is fixed, so a run that survives a fault must end with weights bit-equal to the
fault-free run.

Modes:

- ``"no_fault"``: reference;
- ``"shift"``: SHIFT QPs, NIC 0 of one host fails at iteration ``fault_at``; training continues;
- ``"checkpoint_restart"``: plain RC QPs; the job aborts at the fault, pays ``restart_s`` (an
  *emulated* relaunch cost: a sleep standing in for rescheduling, NIC repair and process start),
  restores the last checkpoint and recomputes the iterations since.

Checkpoints are taken every ``ckpt_every`` iterations in every mode (copy of the weights plus an
emulated ``ckpt_s`` stall).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int
from causalkit.systems.rdma.experiment import FAULTS, inject_fault
from causalkit.systems.rdma.workloads import build_ring, run_allreduce

__all__ = ["FailoverTrainingExperiment", "MODES"]

MODES = ("no_fault", "shift", "checkpoint_restart")


class FailoverTrainingExperiment:
    """Compare training progress of the three modes (see the module docstring).

    Parameters
    ----------
    iterations : int
        Gradient steps to complete.
    ckpt_every : int
        Checkpoint period (iterations).
    fault_at : int
        Iteration at which NIC 0 of host 1 fails (``fault`` type, see
        ``causalkit.systems.rdma.FAULTS``).
    n_hosts, n_params, rows_per_rank : int
        Ranks, model size (float64 parameters all-reduced each step), samples per rank.
    lr : float
        Step size.
    restart_s, ckpt_s : float
        Emulated restart and checkpoint costs in seconds.
    modes : tuple of str
    transport : str
    seed : int
    """

    def __init__(self, iterations: int = 60, ckpt_every: int = 20, fault_at: int = 35,
                 fault: str = "nic_down", *, n_hosts: int = 4, n_params: int = 4096,
                 rows_per_rank: int = 64, lr: float = 0.05, restart_s: float = 1.0,
                 ckpt_s: float = 0.05, modes=MODES, transport: str = "inprocess",
                 op_timeout: float = 3.0, seed: int = 0):
        self.iterations, self.ckpt_every, self.fault_at, self.fault = (iterations, ckpt_every,
                                                                      fault_at, fault)
        self.n_hosts, self.n_params, self.rows_per_rank, self.lr = (n_hosts, n_params,
                                                                    rows_per_rank, lr)
        self.restart_s, self.ckpt_s, self.modes, self.transport = (restart_s, ckpt_s, modes,
                                                                   transport)
        self.op_timeout, self.seed = op_timeout, seed

    def _data(self):
        rng = np.random.default_rng(self.seed)
        w_true = rng.normal(size=self.n_params)
        X = [rng.normal(size=(self.rows_per_rank, self.n_params)) / np.sqrt(self.n_params)
             for _ in range(self.n_hosts)]
        y = [x @ w_true + 0.1 * rng.normal(size=self.rows_per_rank) for x in X]
        return X, y

    def run(self) -> pd.DataFrame:
        """Run every mode; returns one row per mode, progress curves in ``progress_``.

        Row columns: ``mode``, ``wall_s``, ``iterations``, ``executed`` (iterations computed,
        recomputation included), ``median_iter_s``, ``normalized_s`` (``executed *
        median_iter_s`` plus restart and checkpoint costs: a wall time that does not depend on
        machine load), ``recomputed`` (iterations done twice),
        ``restarts``, ``failovers``, ``final_loss``, ``equal_to_no_fault`` (bit-equal weights),
        ``emulated``.
        """
        check_positive_int(self.iterations, "iterations")
        check_positive_int(self.ckpt_every, "ckpt_every")
        if self.fault not in FAULTS:
            raise ValueError(f"fault must be one of {sorted(FAULTS)}; got {self.fault!r}")
        if not 0 <= self.fault_at < self.iterations:
            raise ValueError(f"fault_at must be in [0, iterations); got {self.fault_at}")
        for m in self.modes:
            if m not in MODES:
                raise ValueError(f"modes must be drawn from {MODES}; got {m!r}")
        X, y = self._data()
        n_total = self.n_hosts * self.rows_per_rank
        rows, progress, weights = [], [], {}
        for mode in self.modes:
            row, prog, w = self._mode(mode, X, y, n_total)
            rows.append(row)
            progress.append(prog)
            weights[mode] = w
        ref = weights.get("no_fault")
        for row in rows:
            row["equal_to_no_fault"] = bool(ref is not None and
                                            np.array_equal(weights[row["mode"]], ref))
        self.progress_ = pd.concat(progress, ignore_index=True)
        self.weights_ = weights
        return pd.DataFrame(rows)

    def _mode(self, mode: str, X, y, n_total: int):
        n = self.n_hosts
        w = [np.zeros(self.n_params) for _ in range(n)]
        ckpt = (0, w[0].copy())
        start, restarts, recomputed, failovers = 0, 0, 0, 0
        injected = mode == "no_fault"
        log = []
        executed = [0]  # iterations computed, recomputation included
        t0 = time.monotonic()
        while start < self.iterations:
            cluster = build_ring(n, shift=(mode == "shift"), transport=self.transport,
                                 seed=self.seed + restarts)

            def hook(it, cluster=cluster, base=start):
                nonlocal injected
                if not injected and base + it == self.fault_at:
                    injected = True
                    inject_fault(cluster, self.fault, 1)

            def fill(r, it, buf):
                buf[:] = X[r].T @ (X[r] @ w[r] - y[r]) / n_total

            def after(r, it, buf, base=start):
                nonlocal ckpt
                w[r] -= self.lr * buf
                if r == 0:
                    done = base + it + 1
                    executed[0] += 1
                    log.append({"mode": mode, "t": time.monotonic() - t0, "iteration": done,
                                "executed": executed[0]})
                    if done % self.ckpt_every == 0:
                        ckpt = (done, w[0].copy())
                        time.sleep(self.ckpt_s)

            try:
                out = run_allreduce(cluster, self.n_params, self.iterations - start,
                                    on_iteration=hook, fill=fill, after=after,
                                    timeout=self.op_timeout)
                failovers += sum(e["event"] == "failover" for qp in out["qps"]
                                 for e in getattr(qp, "events", []))
            finally:
                cluster.close()
            if not out["errors"]:
                break
            # the job died: relaunch, restore the last checkpoint, recompute since
            reached = log[-1]["iteration"] if log else 0
            time.sleep(self.restart_s)
            restarts += 1
            recomputed += reached - ckpt[0]
            start = ckpt[0]
            w[:] = [ckpt[1].copy() for _ in range(n)]
            log.append({"mode": mode, "t": time.monotonic() - t0, "iteration": start,
                        "executed": executed[0]})
        loss = sum(float(np.sum((X[r] @ w[0] - y[r]) ** 2)) for r in range(n)) / (2 * n_total)
        prog = pd.DataFrame(log)
        steps = np.diff(prog["t"].to_numpy())[np.diff(prog["executed"].to_numpy()) == 1]
        median_iter = float(np.median(steps)) if steps.size else float("nan")
        n_ckpt = executed[0] // self.ckpt_every
        row = {"mode": mode, "wall_s": time.monotonic() - t0, "iterations": self.iterations,
               "executed": executed[0], "median_iter_s": median_iter,
               # load-normalised time: executed iterations at this run's median iteration time
               # plus the fixed (emulated) restart and checkpoint costs
               "normalized_s": executed[0] * median_iter + restarts * self.restart_s
               + n_ckpt * self.ckpt_s,
               "recomputed": recomputed, "restarts": restarts, "failovers": failovers,
               "final_loss": loss, "fault": "none" if mode == "no_fault" else self.fault,
               "emulated": True}
        return row, prog, w[0].copy()
