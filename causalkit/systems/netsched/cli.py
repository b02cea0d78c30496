"""``causalkit systems netsched``: compare cluster schedulers on a simulated leaf-spine fabric."""

from __future__ import annotations

import argparse

from causalkit.systems._cli import add_shared_arguments, finish, results_store, sized

SCHEDULER_NAMES = ("ecmp", "bestfit", "vclos-ecmp", "vclos", "ocs-vclos", "ideal")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the netsched driver."""
    parser.add_argument("--leaves", type=int, default=None,
                        help="leaf switches (default 16; --quick: 4)")
    parser.add_argument("--spines", type=int, default=8, help="spine switches (default 8)")
    parser.add_argument("--gpus-per-leaf", type=int, default=8, help="GPUs per leaf (default 8)")
    parser.add_argument("--link-gbps", type=float, default=100.0, help="link capacity, Gbit/s")
    parser.add_argument("--schedulers", nargs="+", default=["ecmp", "bestfit", "vclos-ecmp",
                                                            "vclos", "ocs-vclos"],
                        choices=SCHEDULER_NAMES, help="policies to compare")
    parser.add_argument("--loads", nargs="+", type=float, default=None,
                        help="offered GPU loads of the synthetic traces (default 0.5 0.8; "
                             "--quick: 0.7)")
    parser.add_argument("--trace-jobs", type=int, default=None,
                        help="cluster jobs per synthetic trace (default 200; --quick: 30)")
    parser.add_argument("--qps", type=int, default=1,
                        help="ECMP queue pairs (hashed flows) per connection (default 1)")
    parser.add_argument("--adaptive-routing", action="store_true",
                        help="ECMP-routed policies spread every connection over all spines "
                             "(flowlet / adaptive routing, fluid limit)")
    parser.add_argument("--trace", default=None, metavar="KIND:PATH",
                        help="use a trace file instead: philly:FILE, helios:FILE or pai:FILE")
    parser.add_argument("--round-pow2", action="store_true",
                        help="round trace GPU counts up to powers of two")
    add_shared_arguments(parser, reps_help="traces per load")


def run(args) -> int:
    """Run the experiment, print the table (simulated cluster), optionally write a CSV."""
    import pandas as pd

    from causalkit.systems.netsched.experiment import ClusterExperiment
    from causalkit.systems.netsched.traces import load_helios, load_pai, load_philly

    jobs = None
    if args.trace:
        kind, _, path = args.trace.partition(":")
        loaders = {"philly": load_philly, "helios": load_helios, "pai": load_pai}
        if kind not in loaders or not path:
            raise SystemExit("--trace must be philly:FILE, helios:FILE or pai:FILE")
        jobs = loaders[kind](path, round_pow2=args.round_pow2, random_state=args.seed)
    exp = ClusterExperiment(leaves=sized(args.leaves, 16, args.quick, 4), spines=args.spines,
                            gpus_per_leaf=args.gpus_per_leaf, link_gbps=args.link_gbps,
                            schedulers=tuple(args.schedulers),
                            loads=tuple(sized(args.loads, [0.5, 0.8], args.quick, [0.7])),
                            trace_jobs=sized(args.trace_jobs, 200, args.quick, 30),
                            reps=args.reps, seed=args.seed, jobs=jobs,
                            ecmp={"qps": args.qps, "adaptive": args.adaptive_routing})
    df = exp.run(n_jobs=args.jobs, out=results_store(args), overwrite=args.overwrite)
    cols = ["load", "rep", "scheduler", "n_jobs", "avg_jct", "avg_jwt", "avg_slowdown",
            "utilization", "fragmentation", "jain", "contended_frac", "stable",
            "queue_slope_per_h", "wall_seconds"]
    print(f"simulated {exp.leaves}x{exp.gpus_per_leaf}-GPU leaf-spine cluster "
          f"({exp.leaves * exp.gpus_per_leaf} GPUs, {exp.spines} spines); times in seconds")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(df[cols].round(3).to_string(index=False))
    finish(args, df, "netsched")
    return 0
