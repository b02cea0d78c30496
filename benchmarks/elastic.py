"""Speed of the LiveR driver's pieces: plan construction, staging bound vs batches, and the live
transfer bandwidth over gloo (loopback) against one raw gloo message of the same size.

    python benchmarks/elastic.py [--quick]

Numbers are wall-clock on this machine (2 shared cores: report the load with them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time

import pandas as pd

from causalkit.systems.elastic import ElasticTrainer, ModelSpec, reshard_plan
from causalkit.systems.elastic import ParallelLayout as L
from causalkit.systems.elastic.timeline import phase_table

RAW = textwrap.dedent("""
    import sys, time, torch
    from causalkit.systems.elastic.comm import build_group, connect_store
    port, me, nbytes, reps = (int(a) for a in sys.argv[1:5])
    store = connect_store(port)
    g = build_group(store, "raw/", [0, 1], me, 60)
    buf = torch.zeros(nbytes // 4)
    for r in range(reps + 1):
        if r == 1:
            t0 = time.perf_counter()
        (g.isend(buf, 1, r) if me == 0 else g.irecv(buf, 0, r)).wait()
    if me == 1:
        print((time.perf_counter() - t0) / reps)
""")


def raw_gloo_seconds(nbytes: int, reps: int = 5) -> float:
    """Median-free mean time of one ``nbytes`` gloo send between two processes."""
    from causalkit.systems.elastic.comm import serve_store

    store, port = serve_store()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", RAW, str(port), str(me), str(nbytes),
                               str(reps)], stdout=subprocess.PIPE, env=env, text=True)
             for me in (0, 1)]
    out = [p.communicate(timeout=120)[0] for p in procs]
    return float(out[1].strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")

    # 1. plan construction time
    rows = []
    sizes = [(48, 96, 4), (96, 384, 4)] if args.quick else [(48, 96, 4), (96, 384, 8),
                                                            (192, 768, 16)]
    for dim, ffn, layers in sizes:
        spec = ModelSpec(dim=dim, heads=12, ffn=ffn, layers=layers)
        for old, new in ((L(2, 1, 1), L(1, 3, 1)), (L(2, 2, 1), L(3, 1, 2)),
                         (L(1, 1, 4), L(4, 2, 1))):
            t0 = time.perf_counter()
            plan = reshard_plan(old, new, spec, staging_bytes=256 << 10)
            rows.append({"params": spec.n_params, "old": str(old), "new": str(new),
                         "transfers": len(plan.transfers), "batches": plan.n_batches,
                         "network_MB": plan.network_bytes / 1e6,
                         "plan_ms": 1e3 * (time.perf_counter() - t0)})
    print("\n1. reshard_plan construction (pure Python)\n" + pd.DataFrame(rows).to_string(
        index=False))

    # 2. staging bound vs batches (computed, nothing runs)
    spec = ModelSpec(dim=96, ffn=384, vocab=64)
    rows = []
    for kib in (16, 64, 256, 1024, 4096):
        plan = reshard_plan(L(2, 1, 1), L(1, 1, 2), spec, staging_bytes=kib << 10)
        rows.append({"staging_KiB": kib, "transfers": len(plan.transfers),
                     "batches": plan.n_batches, "peak_staging_KiB": plan.peak_staging_bytes / 1024,
                     "network_MB": plan.network_bytes / 1e6})
    print("\n2. staging bound B vs plan (2x1x1 -> 1x1x2, 0.46 M params)\n"
          + pd.DataFrame(rows).to_string(index=False))

    # 3. live transfer bandwidth vs one raw gloo message of the plan's size
    rows = []
    for kib in ((64, 1024) if args.quick else (16, 64, 256, 1024, 4096)):
        with ElasticTrainer(L(2, 1, 1), spec, steps=10**6, staging_bytes=kib << 10) as tr:
            tr.wait_step(3)
            rec = tr.resize(L(1, 1, 2))
            tr.wait_step(tr.progress() + 3)
            tr.stop(tr.progress() + 1)
            tr.wait()
            ph = phase_table(tr.timeline()).iloc[0]
        moved = rec["plan_network_bytes"]
        rows.append({"staging_KiB": kib, "batches": rec["plan_batches"],
                     "network_MB": moved / 1e6, "transfer_s": ph.transfer,
                     "MB_per_s": moved / 1e6 / ph.transfer, "downtime_s": ph.downtime_s})
    raw = raw_gloo_seconds(int(rows[0]["network_MB"] * 1e6) // 4 * 4)
    df = pd.DataFrame(rows)
    df["raw_single_message_s"] = raw
    df["ratio_vs_raw"] = df.transfer_s / raw
    print("\n3. live transfer (real processes) vs one raw gloo send of the same bytes\n"
          + df.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
