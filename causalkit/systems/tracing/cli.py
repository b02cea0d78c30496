"""``causalkit systems trace``: run a traced training job with an injected fault and diagnose it,
or diagnose an existing trace store."""

from __future__ import annotations

import argparse

_FAULTS = ("none", "compute_straggler", "link_degradation", "pipeline_bubble", "jit_stall",
           "masked_straggler")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fault", choices=_FAULTS, default="compute_straggler",
                        help="fault to inject (link_degradation needs 4 ranks)")
    parser.add_argument("--link-mode", choices=("emulated", "tbf", "auto"), default="emulated",
                        help="link_degradation: held collectives, a real tbf-shaped veth link "
                             "(root, ip, tc), or tbf where available")
    parser.add_argument("--world-size", type=int, default=2, help="rank processes (2-4)")
    parser.add_argument("--steps", type=int, default=48, help="training steps")
    parser.add_argument("--repetitions", type=int, default=1, help="independent runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None,
                        help="folder to keep trace stores and results.csv (default: temporary)")
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
        from causalkit.systems.tracing.experiment import TrainingExperiment

        try:
            exp = TrainingExperiment(world_size=args.world_size,
                                     fault=None if args.fault == "none" else args.fault,
                                     steps=args.steps, repetitions=args.repetitions,
                                     link_mode=args.link_mode,
                                     seed=args.seed, out_dir=args.out)
        except ValueError as exc:
            print(f"causalkit systems trace: {exc}", file=sys.stderr)
            return 2
        rows = []
        for rep in range(exp.repetitions):
            try:
                row, report = exp.run_once(rep)
            except RuntimeError as exc:
                print(f"causalkit systems trace: {exc}", file=sys.stderr)
                return 2
            rows.append(row)
            print(report.summary())
        import pandas as pd

        table = pd.DataFrame(rows)
        cols = ["fault", "rep", "detected", "culprit_kind", "culprit_rank", "precision",
                "recall", "steps_to_detect", "time_to_detect_s", "step_ms_before",
                "step_ms_after", "compression_ratio", "dropped", "emulated", "link_mode"]
        print(table[cols].to_string(index=False))
        if args.out is not None:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            table.to_csv(Path(args.out) / "results.csv", index=False)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        report.plot().savefig(args.plot, dpi=120)
    return 0
