"""vClos: contention-free scheduling of distributed training on leaf-spine GPU clusters.

A *simulated* cluster (flow-level, event-driven, max-min fair rates; no switches or GPUs are
driven) for comparing job placement and routing: first fit + ECMP, best fit + ECMP (the main
baseline; ECMP with 1-8 queue pairs per connection or adaptive routing), vClos placement + ECMP,
vClos (an isolated virtual Clos per job with source routing) and OCS-vClos (per-job optical
circuits); every run gets a queue-stability verdict (:func:`queue_trend`). Reference: Zhao et
al., "vClos: network contention aware scheduling for distributed machine learning tasks in
multi-tenant GPU clusters", Computer Networks 268 (2025), 111285 (arXiv:2308.05692).

>>> from causalkit.systems.netsched import LeafSpine, simulate_cluster, synthetic_trace
>>> cluster = LeafSpine(leaves=4, spines=8, gpus_per_leaf=8)
>>> jobs = synthetic_trace(20, cluster, load=0.8, random_state=0)
>>> res = simulate_cluster(cluster, jobs, scheduler="vclos")
>>> bool(res.jobs["slowdown"].max() < 1 + 1e-9)
True
"""

from causalkit.systems.netsched.allocation import solve_vclos
from causalkit.systems.netsched.experiment import ClusterExperiment
from causalkit.systems.netsched.maxmin import incidence, max_min_rates
from causalkit.systems.netsched.routing import (
    ECMP,
    SourceRouting,
    collision_free_probability,
    ecmp_collision_trials,
)
from causalkit.systems.netsched.schedulers import (
    SCHEDULERS,
    BestFit,
    FirstFit,
    OCSVClos,
    VClos,
    VClosECMP,
    best_fit_leaves,
)
from causalkit.systems.netsched.sim import Result, check_jobs, simulate_cluster
from causalkit.systems.netsched.stability import queue_trend
from causalkit.systems.netsched.topology import LeafSpine
from causalkit.systems.netsched.traces import (
    load_helios,
    load_pai,
    load_philly,
    synthetic_trace,
)
from causalkit.systems.netsched.traffic import PATTERNS, job_flows

__all__ = [
    "LeafSpine", "simulate_cluster", "Result", "check_jobs", "ClusterExperiment",
    "ECMP", "SourceRouting", "collision_free_probability", "ecmp_collision_trials",
    "SCHEDULERS", "FirstFit", "BestFit", "VClos", "VClosECMP", "OCSVClos", "solve_vclos",
    "best_fit_leaves", "queue_trend",
    "max_min_rates", "incidence", "PATTERNS", "job_flows",
    "synthetic_trace", "load_philly", "load_helios", "load_pai",
]
