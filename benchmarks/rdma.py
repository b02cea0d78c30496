"""Speed of the emulated RDMA stack (software NICs; no RDMA hardware here).

Prints, with ratios:

1. datapath cost per call, plain RC vs SHIFT (post_send, empty poll, 8-byte WRITE round trip);
2. bulk RDMA WRITE bandwidth per transport (in-process queues, UDP loopback, shared memory);
3. ring all-reduce time per iteration, plain vs SHIFT, against a numpy sum of the same arrays
   (the cost of moving the data through the emulated NICs, not a network benchmark);
4. model-checker speed (states per second).

Timings are wall-clock and depend on machine load; run with ``--quick`` for a short version.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from causalkit.systems.rdma import check_trilemma, measure_datapath_overhead
from causalkit.systems.rdma.verbs import Fabric, Opcode, SendWR, WCStatus, bring_up
from causalkit.systems.rdma.workloads import TRANSPORTS, build_ring, run_allreduce


def write_bandwidth(transport: str, nbytes: int, mtu: int) -> float:
    """MB/s of one large RDMA WRITE between two emulated NICs over ``transport``."""
    with Fabric() as f:
        a, b = f.add_device("a", mtu=mtu), f.add_device("b", mtu=mtu)
        f.connect(a, b, TRANSPORTS[transport]())
        pa, pb = a.alloc_pd(), b.alloc_pd()
        ca, cb = a.create_cq(), b.create_cq()
        qa, qb = pa.create_qp(ca, ca), pb.create_qp(cb, cb)
        bring_up(qa, qb)
        bring_up(qb, qa)
        src = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
        dst = np.zeros_like(src)
        ma, mb = pa.reg_mr(src), pb.reg_mr(dst)
        t0 = time.perf_counter()
        qa.post_send(SendWR(1, Opcode.RDMA_WRITE, (ma.sge(),), mb.addr, mb.rkey))
        if not ca.wait(120) or ca.poll(1)[0].status != WCStatus.SUCCESS:
            raise RuntimeError("write did not complete")
        dt = time.perf_counter() - t0
        assert np.array_equal(src, dst)
    return nbytes / dt / 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n_ops, reps, nbytes, n_elems, iters = ((500, 1, 4 << 20, 8192, 5) if args.quick else
                                           (5000, 5, 32 << 20, 65536, 20))
    print("emulated NICs; wall-clock timings on a possibly shared machine\n")

    print("1. datapath cost per call (median us), SHIFT / plain")
    ov = measure_datapath_overhead(n_ops, reps)
    for op, g in ov.groupby("op"):
        plain, shift = g[~g["shift"]]["us"].iloc[0], g[g["shift"]]["us"].iloc[0]
        print(f"   {op:14s} plain {plain:8.2f}  SHIFT {shift:8.2f}  ratio {shift / plain:5.2f}")

    print(f"\n2. one {nbytes >> 20} MiB RDMA WRITE, MB/s (mtu 4096 and 16384)")
    base = None
    for transport in TRANSPORTS:
        for mtu in (4096, 16384):
            bw = write_bandwidth(transport, nbytes, mtu)
            base = base or bw
            print(f"   {transport:10s} mtu {mtu:6d}: {bw:8.1f} MB/s  (x{bw / base:4.2f} vs "
                  f"inprocess/4096)")

    print(f"\n3. ring all-reduce, 4 ranks x {n_elems} float64, per iteration")
    arrays = [np.random.default_rng(r).normal(size=n_elems) for r in range(4)]
    t0 = time.perf_counter()
    for _ in range(iters):
        np.sum(arrays, axis=0)
    t_np = (time.perf_counter() - t0) / iters
    times = {}
    for shift in (False, True):
        with build_ring(4, shift=shift) as c:
            t0 = time.perf_counter()
            out = run_allreduce(c, n_elems, iters)
            times[shift] = (time.perf_counter() - t0) / iters
            assert not out["errors"]
    print(f"   numpy sum {1e3 * t_np:8.3f} ms | plain RC {1e3 * times[False]:8.2f} ms "
          f"(x{times[False] / t_np:.0f} numpy) | SHIFT {1e3 * times[True]:8.2f} ms "
          f"(x{times[True] / times[False]:.2f} plain)")

    print("\n4. trilemma model check")
    rep = check_trilemma()
    print(f"   {rep.states} states in {rep.seconds:.2f} s = {rep.states / rep.seconds:,.0f} "
          "states/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
