"""Speed of the vClos driver (simulated cluster).

1. The acceptance workload: a 1,024-GPU leaf-spine cluster (128 leaves x 8 GPUs x 8 spines) and a
   2,000-job synthetic trace at offered load 0.8, for every scheduler (best fit also with 4 queue
   pairs per connection and with adaptive routing; vClos with its default
   exact enumeration solver and with the HiGHS MILP): wall time (target < 120 s
   on 2 cores), events, max-min solves and flows solved per second.
2. The max-min kernel (numpy + scipy.sparse progressive filling) against a plain-Python
   progressive filling over per-flow link lists, on the same random instance (equal rates checked).

Usage: ``python benchmarks/netsched.py [--jobs 2000] [--leaves 128]``. Timings depend on machine
load; the numbers printed are what this run measured.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from causalkit.systems.netsched import (
    BestFit,
    LeafSpine,
    VClos,
    incidence,
    max_min_rates,
    simulate_cluster,
    synthetic_trace,
)


def python_max_min(flow_links, capacity):
    """Reference: textbook progressive filling with Python loops (one flow = one entity)."""
    rate = [0.0] * len(flow_links)
    residual = list(capacity)
    active = set(range(len(flow_links)))
    while active:
        count = [0] * len(capacity)
        for f in active:
            for link in flow_links[f]:
                count[link] += 1
        delta = min(residual[link] / count[link] for link in range(len(capacity)) if count[link])
        for f in active:
            rate[f] += delta
        sat = set()
        for link in range(len(capacity)):
            if count[link]:
                residual[link] -= delta * count[link]
                if residual[link] <= 1e-9 * capacity[link]:
                    sat.add(link)
        active = {f for f in active if not sat.intersection(flow_links[f])}
    return np.array(rate)


def bench_kernel(n_flows=3000, n_links=400, seed=0):
    rng = np.random.default_rng(seed)
    links = np.stack([rng.choice(n_links, 4, replace=False) for _ in range(n_flows)])
    cap = rng.uniform(50, 150, n_links)
    W = incidence(links, np.arange(n_flows), n_links, n_flows)
    t0 = time.perf_counter()
    fast, rounds = max_min_rates(W, cap)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = python_max_min([list(r) for r in links], list(cap))
    t_slow = time.perf_counter() - t0
    assert np.allclose(fast, slow, rtol=1e-6), "kernel disagrees with the reference"
    print(f"max-min kernel: {n_flows} flows x {n_links} links, {rounds} rounds: "
          f"numpy/scipy {t_fast * 1e3:.1f} ms, plain Python {t_slow * 1e3:.1f} ms "
          f"(speed-up x{t_slow / t_fast:.1f}); {n_flows / t_fast:,.0f} flows/s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--leaves", type=int, default=128)
    parser.add_argument("--load", type=float, default=0.8)
    args = parser.parse_args(argv)
    cluster = LeafSpine(args.leaves, 8, 8)
    jobs = synthetic_trace(args.jobs, cluster, args.load, random_state=0)
    print(f"simulated cluster: {cluster.n_gpus} GPUs ({args.leaves} leaves x 8, 8 spines), "
          f"{args.jobs} jobs, offered load {args.load} (timings on a shared machine)")
    budget = 120.0
    policies = {"ecmp": "ecmp", "bestfit": "bestfit", "bestfit-qps4": BestFit(qps=4),
                "bestfit-adapt": BestFit(adaptive=True), "vclos-ecmp": "vclos-ecmp",
                "vclos": "vclos", "vclos-milp": VClos(solver="milp"), "ocs-vclos": "ocs-vclos",
                "ideal": "ideal"}
    for name, policy in policies.items():
        res = simulate_cluster(cluster.with_ocs(name == "ocs-vclos"), jobs, policy)
        fps = res.flows_solved / res.solve_seconds if res.solve_seconds else float("nan")
        print(f"  {name:13s} wall {res.wall_seconds:6.2f} s ({res.wall_seconds / budget:5.1%} of "
              f"the 120 s budget)  events {len(res.timeline):5d}  solves {res.n_solves:5d}  "
              f"flows solved {res.flows_solved:10,d}  = {fps:12,.0f} flows/s")
    bench_kernel()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
