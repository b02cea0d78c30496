"""``causalkit borrow``: fit borrowing estimators on NSW/CPS or a user CSV and print summaries.

Top-level imports stay light; the estimators are imported inside :func:`run`.
"""

from __future__ import annotations

import argparse

_NAMES = ("trial", "full", "calibrated-full", "power-prior", "selective", "aib", "acib")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``causalkit borrow``."""
    parser.add_argument("--data", default="nsw-cps",
                        help="'nsw-cps' (bundled NSW trial + CPS controls) or a CSV path")
    parser.add_argument("--outcome", default="re78", help="outcome column")
    parser.add_argument("--treatment", default="treat", help="treatment column (0/1)")
    parser.add_argument("--trial", default="trial",
                        help="trial-indicator column (1 trial, 0 external control)")
    parser.add_argument("--covariates", default=None,
                        help="comma-separated covariate columns (default: NSW covariates for "
                             "nsw-cps, else every other numeric column)")
    parser.add_argument("--estimators", default="trial,full,aib,acib",
                        help=f"comma-separated, from {', '.join(_NAMES)} (or 'all')")
    parser.add_argument("--inference", choices=("analytic", "bootstrap"), default="analytic")
    parser.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates")
    parser.add_argument("--jobs", type=int, default=1, help="bootstrap workers")
    parser.add_argument("--seed", type=int, default=0, help="random_state of the estimators")
    parser.add_argument("--plot", default=None,
                        help="write the AIB diagnostic figure (scores, MSE path) to this PNG")


def _load(args):
    import pandas as pd

    from causalkit.datasets import NSW_COVARIATES, load_nsw_cps

    if args.data == "nsw-cps":
        frame = load_nsw_cps()
        default_cov = NSW_COVARIATES
    else:
        frame = pd.read_csv(args.data)
        default_cov = None
    missing = [c for c in (args.outcome, args.treatment, args.trial) if c not in frame]
    if missing:
        raise ValueError(f"--data has no column(s) {missing}; columns: {list(frame.columns)}")
    if args.covariates:
        cov = [c.strip() for c in args.covariates.split(",") if c.strip()]
    elif default_cov is not None:
        cov = default_cov
    else:
        used = {args.outcome, args.treatment, args.trial}
        cov = [c for c in frame.columns if c not in used
               and pd.api.types.is_numeric_dtype(frame[c])]
    absent = [c for c in cov if c not in frame]
    if absent:
        raise ValueError(f"--covariates not in the data: {absent}")
    return frame[cov], frame[args.outcome], frame[args.treatment], frame[args.trial]


def run(args) -> int:
    """Fit the chosen estimators and print one summary each, then a comparison table."""
    import sys

    import pandas as pd

    from causalkit.borrowing import ESTIMATORS

    names = list(_NAMES) if args.estimators == "all" else [
        n.strip() for n in args.estimators.split(",") if n.strip()]
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        print(f"causalkit borrow: unknown estimator(s) {unknown}; choose from {list(_NAMES)}",
              file=sys.stderr)
        return 2
    try:
        X, y, a, s = _load(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"causalkit borrow: {exc}", file=sys.stderr)
        return 2
    print(f"{int(s.sum())} trial units ({int(a[s == 1].sum())} treated), "
          f"{int((s == 0).sum())} external controls, {X.shape[1]} covariates\n")
    rows, fitted = [], {}
    for name in names:
        est = ESTIMATORS[name](random_state=args.seed).fit(X, y, a, s)
        res = est.estimate(inference=args.inference, n_boot=args.n_boot, n_jobs=args.jobs)
        fitted[name] = est
        print(res.summary(), "\n")
        rows.append(res.to_frame())
    table = pd.concat(rows)
    cols = [c for c in ("estimate", "std_error", "ci_lower", "ci_upper", "n_borrowed")
            if c in table]
    print(table[cols].round(3).to_string())
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        key = next((n for n in ("aib", "acib") if n in fitted), None)
        if key is None:
            print("--plot needs aib or acib among --estimators", file=sys.stderr)
            return 2
        fitted[key].plot().savefig(args.plot, dpi=120, bbox_inches="tight")
        print(f"\nwrote {args.plot}")
    return 0
