"""Command-line interface: ``causalkit demo | simulate | borrow | longterm | policy | systems``.

Subcommands that belong to a subpackage are declared here by module path and loaded lazily: each
such module defines ``add_arguments(parser)`` and ``run(args) -> int`` and imports its heavy
dependencies inside ``run``, so ``causalkit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from causalkit._cli_estimators import COMMANDS as ESTIMATOR_COMMANDS
from causalkit._cli_estimators import add_arguments as add_estimator_arguments

#: ``causalkit systems NAME``: module implementing the driver's command line.
#: Each driver answers to its paper's name (the name of its studies and results folder) and to
#: its package's name.
SYSTEMS_COMMANDS = {
    "ann": ("causalkit.systems.ann.cli", "SmartANN: diagnose and auto-design ANN indexes"),
    "trace": ("causalkit.systems.tracing.cli", "ARGUS: trace a training run and diagnose faults"),
    "elastic": ("causalkit.systems.elastic.cli", "LiveR: live resharding vs checkpoint/restart"),
    "rdma": ("causalkit.systems.rdma.cli", "SHIFT: cross-NIC RDMA failover (emulated verbs)"),
    "netsched": ("causalkit.systems.netsched.cli", "vClos: contention-free cluster scheduling"),
    "smartann": ("causalkit.systems.ann.cli", "SmartANN (same as: systems ann)"),
    "argus": ("causalkit.systems.tracing.cli", "ARGUS (same as: systems trace)"),
    "tracing": ("causalkit.systems.tracing.cli", "ARGUS (same as: systems trace)"),
    "liver": ("causalkit.systems.elastic.cli", "LiveR (same as: systems elastic)"),
    "shift": ("causalkit.systems.rdma.cli", "SHIFT (same as: systems rdma)"),
    "vclos": ("causalkit.systems.netsched.cli", "vClos (same as: systems netsched)"),
}


def _add_lazy(subparsers, name: str, module: str, help_text: str) -> None:
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        parser.set_defaults(_handler=_unavailable(name, exc))
        return
    mod.add_arguments(parser)
    parser.set_defaults(_handler=mod.run)


def _unavailable(name: str, exc: Exception):
    def handler(_args) -> int:
        print(f"causalkit {name}: not available ({exc})", file=sys.stderr)
        return 2
    return handler


def _demo(args) -> int:
    from causalkit.demo import run_demo
    run_demo(out_dir=args.out, plot=not args.no_plot)
    return 0


def _simulate(args) -> int:
    from causalkit.simulation import FingerprintMismatch, StoreLocked
    from causalkit.studies import list_studies, run_named_study
    if args.list:
        studies = list_studies()
        width = studies["study"].str.len().max()
        for row in studies.itertuples():
            print(f"{row.study:<{width}}  {row.description}")
        return 0
    if args.study is None:
        print("causalkit simulate: give a study name, or --list to see them", file=sys.stderr)
        return 2
    for flag in ("reps", "jobs"):
        value = getattr(args, flag)
        if value is not None and value < 1 and not (flag == "jobs" and value == -1):
            print(f"causalkit simulate: --{flag} must be a positive integer; got {value}",
                  file=sys.stderr)
            return 2
    try:
        run_named_study(args.study, reps=args.reps, seed=args.seed, n_jobs=args.jobs,
                        backend=args.backend, scheduler=args.scheduler, out=args.out,
                        quick=args.quick, overwrite=args.overwrite)
    except (FingerprintMismatch, StoreLocked, OSError) as exc:
        print(f"causalkit simulate: {exc}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used to render ``--help`` in the docs)."""
    from causalkit import __version__
    from causalkit.studies import STUDIES, add_study_arguments

    parser = argparse.ArgumentParser(prog="causalkit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"causalkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="NSW trial + CPS external controls: compare estimators",
                          description="Estimate the NSW training effect borrowing CPS controls; "
                                      "print a comparison table and write a figure.")
    demo.add_argument("--out", default=".", help="folder for the table (CSV) and figure (PNG)")
    demo.add_argument("--no-plot", action="store_true", help="skip the figure")
    demo.set_defaults(_handler=_demo)

    sim = sub.add_parser("simulate", help="run a registered study (incremental, resumable)",
                         description="Run a registered statistical or systems study; results "
                                     "are stored in --out DIR as repetitions finish, a rerun "
                                     "resumes, and DIR/MANIFEST.json records the provenance.")
    sim.add_argument("study", nargs="?", choices=sorted(STUDIES), help="study name")
    sim.add_argument("--list", action="store_true", help="list every registered study")
    add_study_arguments(sim)
    sim.set_defaults(_handler=_simulate)

    for name, (help_text, _, _) in ESTIMATOR_COMMANDS.items():
        parser_ = sub.add_parser(name, help=help_text, description=help_text)
        add_estimator_arguments(parser_, name)

    systems = sub.add_parser("systems", help="systems experiment drivers",
                             description="Run one of the systems experiment drivers.")
    systems_sub = systems.add_subparsers(dest="driver", metavar="DRIVER")
    for name, (module, help_text) in SYSTEMS_COMMANDS.items():
        _add_lazy(systems_sub, name, module, help_text)
    systems.set_defaults(_handler=lambda _a: (systems.print_help(), 2)[1])
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``causalkit`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "_handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return int(handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
