"""``causalkit systems rdma``: run a SHIFT failover experiment or the trilemma model check.

Emulated NICs (no RDMA hardware here); outputs say so.
"""

from __future__ import annotations

import argparse

from causalkit.systems._cli import add_shared_arguments, finish, results_store, sized

_FAULTS = ("none", "nic_down", "link_flap", "drop", "drop_acks", "delay")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options (light: no heavy imports here)."""
    parser.add_argument("--fault", choices=_FAULTS, default="nic_down", help="fault to inject")
    parser.add_argument("--workload", choices=("allreduce", "p2p"), default="allreduce")
    parser.add_argument("--transport", choices=("inprocess", "udp", "shm"), default="inprocess")
    parser.add_argument("--hosts", type=int, default=4, help="ranks of the all-reduce ring")
    parser.add_argument("--elems", type=int, default=None,
                        help="float64 elements per rank (default 32768; --quick: 3000)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="all-reduces (or messages) (default 20; --quick: 6)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="run SHIFT only (skip plain RC QPs)")
    parser.add_argument("--check-trilemma", action="store_true",
                        help="run the explicit-state model checker instead")
    add_shared_arguments(parser, reps_help="repetitions per configuration")


def run(args) -> int:
    """Run and print the table; returns the exit status."""
    import pandas as pd

    if args.check_trilemma:
        from causalkit.systems.rdma.trilemma import check_trilemma

        report = check_trilemma()
        print(report.summary())
        table = report.combinations.drop(columns=["witness"])
    else:
        from causalkit.systems.rdma.experiment import FailoverExperiment

        iterations = sized(args.iterations, 20, args.quick, 6)
        exp = FailoverExperiment(workload=args.workload, fault=args.fault,
                                 transport=args.transport,
                                 shift=(True,) if args.no_baseline else (False, True),
                                 n_hosts=args.hosts,
                                 n_elems=sized(args.elems, 32768, args.quick, 3000),
                                 iterations=iterations, n_msgs=iterations,
                                 reps=args.reps, seed=args.seed)
        table = exp.run(n_jobs=args.jobs, out=results_store(args), overwrite=args.overwrite)
        cols = ["workload", "fault", "transport", "shift", "rep", "completed", "correct",
                "ops_done", "downtime_s", "detect_s", "max_gap_s", "failovers", "switch_backs",
                "throughput_MBps"]
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print("emulated NICs (software verbs; no RDMA hardware)")
            print(table[cols].to_string(index=False))
    finish(args, table, "rdma")
    return 0
