"""``causalkit systems elastic``: live resize vs checkpoint/restart on real CPU workers."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schedule", default="2,3,4,2",
                        help="comma-separated world sizes or TPxPPxDP layouts; the first is the "
                             "initial layout (default: 2,3,4,2)")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per run")
    parser.add_argument("--mode", choices=["live", "restart", "both"], default="both")
    parser.add_argument("--staging-kib", type=int, default=64,
                        help="staging bound per worker in KiB (live transfers)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--out", default=None, help="write the per-event table to this CSV")
    parser.add_argument("--plan-only", action="store_true",
                        help="print the resharding plans (no processes started)")


def run(args) -> int:
    import pandas as pd

    from .experiment import ElasticExperiment, parse_schedule
    from .layout import ModelSpec
    from .plan import reshard_plan

    spec = ModelSpec(dtype=args.dtype)
    try:
        layouts = parse_schedule(args.schedule, spec)
        staging = args.staging_kib * 1024
        plans = [reshard_plan(a, b, spec, staging_bytes=staging).summary()
                 for a, b in zip(layouts, layouts[1:], strict=False)]
    except (ValueError, TypeError) as exc:
        print(f"causalkit systems elastic: {exc}")
        return 2
    print(f"model: {spec.n_params} parameters ({spec.dtype}); schedule: "
          + " -> ".join(str(x) for x in layouts) + " (TPxPPxDP)")
    print(pd.DataFrame(plans).to_string(index=False))
    if args.plan_only:
        return 0
    modes = ["live", "restart"] if args.mode == "both" else [args.mode]
    tables = [ElasticExperiment(layouts, steps=args.steps, mode=m, spec=spec,
                                staging_bytes=staging).run() for m in modes]
    table = pd.concat(tables, ignore_index=True)
    cols = [c for c in ("mode", "event", "old_layout", "new_layout", "outcome", "downtime_s",
                        "goodput") if c in table]
    print(table[cols].to_string(index=False))
    if len(modes) == 2:
        live = table[table["mode"] == "live"].downtime_s.mean()
        restart = table[table["mode"] == "restart"].downtime_s.mean()
        print(f"mean downtime: live {live:.3f} s, restart {restart:.3f} s, "
              f"ratio {restart / live:.1f}x (measured on this machine, real processes)")
    if args.out:
        table.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0
