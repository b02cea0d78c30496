"""``causalkit systems elastic``: live resize vs checkpoint/restart on real CPU workers."""

from __future__ import annotations

import argparse
import sys

from causalkit.systems._cli import add_shared_arguments, finish, results_store, sized


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schedule", default="2,3,4,2",
                        help="comma-separated world sizes or TPxPPxDP layouts; the first is the "
                             "initial layout (default: 2,3,4,2)")
    parser.add_argument("--steps", type=int, default=None,
                        help="optimizer steps per run (default 40; --quick: 3 per layout)")
    parser.add_argument("--mode", choices=["live", "restart", "both"], default="both")
    parser.add_argument("--staging-kib", type=int, default=64,
                        help="staging bound per worker in KiB (live transfers)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--state-mb", type=float, default=None,
                        help="size the model so that parameters + Adam moments take about this "
                             "many MiB (the MLP width grows; 12 sequences of 4 tokens per step); "
                             "default: the small built-in model")
    add_shared_arguments(parser, reps_help="runs per mode (fresh processes each)", jobs=False)
    parser.add_argument("--plan-only", action="store_true",
                        help="print the resharding plans (no processes started)")


def run(args) -> int:
    import pandas as pd

    from .experiment import ElasticExperiment, parse_schedule
    from .layout import ModelSpec, spec_for_state
    from .plan import reshard_plan
    from .transfer_study import SPEC

    try:
        if args.state_mb is not None and not args.state_mb > 0:
            raise ValueError(f"--state-mb must be > 0; got {args.state_mb}")
        spec = ModelSpec(dtype=args.dtype) if args.state_mb is None else spec_for_state(
            args.state_mb * 2**20, dtype=args.dtype, **SPEC)
        layouts = parse_schedule(args.schedule, spec)
        staging = args.staging_kib * 1024
        plans = [reshard_plan(a, b, spec, staging_bytes=staging).to_dict()
                 for a, b in zip(layouts, layouts[1:], strict=False)]
    except (ValueError, TypeError) as exc:
        print(f"causalkit systems elastic: {exc}", file=sys.stderr)
        return 2
    print(f"model: {spec.n_params} parameters ({spec.dtype}; state {spec.state_bytes / 2**20:.1f} "
          f"MiB with Adam); schedule: "
          + " -> ".join(str(x) for x in layouts) + " (TPxPPxDP)")
    print(pd.DataFrame(plans).to_string(index=False))
    if args.plan_only:
        return 0
    modes = ["live", "restart"] if args.mode == "both" else [args.mode]
    steps = sized(args.steps, 40, args.quick, 3 * len(layouts))
    experiments = {m: ElasticExperiment(layouts, steps=steps, mode=m, spec=spec,
                                        staging_bytes=staging, repeats=args.reps, seed=args.seed)
                   for m in modes}
    try:
        for exp in experiments.values():
            exp._validate()
    except (ValueError, TypeError) as exc:
        print(f"causalkit systems elastic: {exc}", file=sys.stderr)
        return 2
    tables = [exp.run(out=results_store(args, f"runs_{m}"), overwrite=args.overwrite)
              for m, exp in experiments.items()]
    table = pd.concat(tables, ignore_index=True)
    cols = [c for c in ("mode", "event", "old_layout", "new_layout", "outcome", "downtime_s",
                        "goodput") if c in table]
    print(table[cols].to_string(index=False))
    if len(modes) == 2:
        live = table[table["mode"] == "live"].downtime_s.mean()
        restart = table[table["mode"] == "restart"].downtime_s.mean()
        print(f"mean downtime: live {live:.3f} s, restart {restart:.3f} s, "
              f"ratio {restart / live:.1f}x (measured on this machine, real processes)")
    finish(args, table, "elastic")
    return 0
