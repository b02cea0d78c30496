"""Steady-state datapath cost of SHIFT: time per ``post_send``, per empty ``poll`` and per
signaled 8-byte WRITE round trip, with plain RC QPs and with SHIFT QPs, on the same emulated NICs.

The paper measured these on ConnectX-5 NICs (negligible difference; ``ib_write_lat`` 2.68-2.71 us
either way). Here both sides are Python emulations, so the absolute times are the emulator's; the
ratio SHIFT / plain is the quantity to read: it is the cost of SHIFT's wrapper logic relative to
an emulated verbs call.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int
from causalkit.systems.rdma.verbs import Opcode, QPCap, SendWR, WCStatus
from causalkit.systems.rdma.workloads import _connect, build_ring

__all__ = ["measure_datapath_overhead", "datapath_costs", "summarize_datapath"]


def _one(shift: bool, n_ops: int, transport: str, seed: int) -> dict:
    cluster = build_ring(2, shift=shift, transport=transport, seed=seed)
    try:
        a, b = cluster.hosts
        src, dst = np.zeros(8, np.uint8), np.zeros(8, np.uint8)
        mr_src, mr_dst = a.reg_mr(src), b.reg_mr(dst)
        cap = QPCap(max_send_wr=128, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        scq, rcq = a.create_cq(), a.create_cq()
        qa = a.create_qp(scq, rcq, cap)
        qb = b.create_qp(b.create_cq(), b.create_cq(), cap)
        _connect(cluster, qa, qb)
        sge = mr_src.sge()
        post_t, lat_t = [], []
        batch = 64
        for _ in range(0, n_ops, batch):  # post cost: batches of unsignaled WRs + one signaled
            wrs = [SendWR(i, Opcode.RDMA_WRITE, (sge,), mr_dst.addr, mr_dst.rkey,
                          signaled=(i == batch - 1)) for i in range(batch)]
            t0 = time.perf_counter()
            for wr in wrs:
                qa.post_send(wr)
            post_t.append((time.perf_counter() - t0) / batch)
            if not scq.wait(10.0) or scq.poll(1)[0].status != WCStatus.SUCCESS:
                raise RuntimeError("overhead benchmark: write did not complete")
        t0 = time.perf_counter()
        for _ in range(n_ops):  # poll cost on an empty CQ
            scq.poll(16)
        poll_t = (time.perf_counter() - t0) / n_ops
        for i in range(max(n_ops // 20, 10)):  # latency: one signaled write at a time
            t0 = time.perf_counter()
            qa.post_send(SendWR(i, Opcode.RDMA_WRITE, (sge,), mr_dst.addr, mr_dst.rkey))
            if not scq.wait(10.0) or scq.poll(1)[0].status != WCStatus.SUCCESS:
                raise RuntimeError("overhead benchmark: write did not complete")
            lat_t.append(time.perf_counter() - t0)
    finally:
        cluster.close()
    return {"post_send_us": 1e6 * float(np.median(post_t)), "poll_us": 1e6 * poll_t,
            "write_latency_us": 1e6 * float(np.median(lat_t))}


def measure_datapath_overhead(n_ops: int = 2000, reps: int = 3, transport: str = "inprocess",
                     seed: int = 0) -> pd.DataFrame:
    """Per-call times with plain and SHIFT QPs.

    Returns
    -------
    pandas.DataFrame
        One row per (operation, shift): median over ``reps`` of the per-call microseconds, plus
        the ratio SHIFT / plain in the SHIFT rows; ``emulated=True``.
    """
    check_positive_int(n_ops, "n_ops", minimum=64)
    check_positive_int(reps, "reps")
    rows = [row for rep in range(reps)
            for row in datapath_costs(n_ops, transport, seed + rep, rep=rep)]
    return summarize_datapath(pd.DataFrame(rows), transport)


def datapath_costs(n_ops: int, transport: str = "inprocess", seed: int = 0,
                   rep: int = 0) -> list[dict]:
    """One repetition: per-call microseconds of every operation, plain RC then SHIFT (back to
    back, so machine load affects both alike); rows ``op, shift, rep, us``."""
    return [{"op": op.removesuffix("_us"), "shift": shift, "rep": rep, "us": us}
            for shift in (False, True)
            for op, us in _one(shift, n_ops, transport, seed).items()]


def summarize_datapath(rows: pd.DataFrame, transport: str) -> pd.DataFrame:
    """Median per-call microseconds per (operation, shift) over repetitions, with the ratio
    SHIFT / plain and ``emulated=True``."""
    df = rows.groupby(["op", "shift"], as_index=False)["us"].median()
    plain = df[~df["shift"]].set_index("op")["us"]
    df["ratio_vs_plain"] = df["us"] / df["op"].map(plain)
    df["emulated"] = True
    df["transport"] = transport
    return df
