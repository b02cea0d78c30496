"""``causalkit systems trace``: run a traced training job with an injected fault and diagnose it,
or diagnose an existing trace store."""

from __future__ import annotations

import argparse

from causalkit.systems._cli import add_shared_arguments, finish, results_store, sized

_FAULTS = ("none", "compute_straggler", "link_degradation", "pipeline_bubble", "jit_stall",
           "masked_straggler")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fault", choices=_FAULTS, default="compute_straggler",
                        help="fault to inject (link_degradation needs 4 ranks)")
    parser.add_argument("--link-mode", choices=("emulated", "tbf", "auto"), default="emulated",
                        help="link_degradation: held collectives, a real tbf-shaped veth link "
                             "(root, ip, tc), or tbf where available")
    parser.add_argument("--world-size", type=int, default=2, help="rank processes (2-4)")
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps (default 48; --quick: 24)")
    add_shared_arguments(parser, reps_help="independent runs (trace stores kept in "
                                           "DIR/traces with --out)", jobs=False)
    parser.add_argument("--diagnose", metavar="STORE", default=None,
                        help="only diagnose an existing trace-store directory")
    parser.add_argument("--plot", metavar="PNG", default=None,
                        help="write the diagnosis figure of the last run")


def run(args) -> int:
    import sys
    from pathlib import Path

    from causalkit.systems.tracing.diagnosis import diagnose
    from causalkit.systems.tracing.events import TraceFileError

    if args.diagnose is not None:
        try:
            report = diagnose(args.diagnose)
        except (FileNotFoundError, TraceFileError, ValueError) as exc:
            print(f"causalkit systems trace: {exc}", file=sys.stderr)
            return 2
        print(report.summary())
    else:
        import tempfile

        from causalkit.systems.tracing.experiment import TrainingExperiment

        with tempfile.TemporaryDirectory(prefix="argus-") as tmp:
            store = results_store(args)
            traces = (store.parent if store is not None else Path(tmp)) / "traces"
            try:
                exp = TrainingExperiment(world_size=args.world_size,
                                         fault=None if args.fault == "none" else args.fault,
                                         steps=sized(args.steps, 48, args.quick, 24),
                                         repetitions=args.reps, link_mode=args.link_mode,
                                         seed=args.seed, out_dir=traces)
                table = exp.run(out=store, overwrite=args.overwrite)
            except (ValueError, RuntimeError) as exc:
                print(f"causalkit systems trace: {exc}", file=sys.stderr)
                return 2
            for row in table.itertuples():
                report = diagnose(traces / f"{row.fault}-ws{row.world_size}-seed{row.seed}"
                                  / "traces", **exp.diagnose_options)
                print(report.summary())
        cols = ["fault", "rep", "detected", "culprit_kind", "culprit_rank", "precision",
                "recall", "steps_to_detect", "time_to_detect_s", "step_ms_before",
                "step_ms_after", "compression_ratio", "dropped", "emulated", "link_mode"]
        print(table[cols].to_string(index=False))
        finish(args, table, "trace")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        report.plot().savefig(args.plot, dpi=120)
    return 0
