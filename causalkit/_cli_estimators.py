"""``causalkit borrow | longterm | policy``: fit estimators on CSV data and print their results.

The three subcommands share one front end for tabular input (:func:`covariate_columns`): the
covariates are the ``--covariates`` given, or every other numeric column, never the outcome,
treatment or another role column, and never an index or identifier column (a pandas index
written by ``DataFrame.to_csv`` as ``Unnamed: 0``, a column named ``id``/``index``/``*_id``, or an
integer column equal to the row number); the covariates used are always printed. A non-numeric
covariate column is an error that names it. Every user error ends the command with exit status 2
and a one-line ``causalkit <command>: ...`` message; warnings are printed on one line each.

This module imports nothing heavy at import time, so ``causalkit --help`` stays fast; the
estimators are imported by :func:`run`.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings

__all__ = ["COMMANDS", "UsageError", "covariate_columns", "add_arguments", "run"]

#: subcommand -> (help, module with an ``ESTIMATORS`` registry, default estimators)
COMMANDS = {
    "borrow": ("borrow external controls for a trial (AIB, ACIB, ...)", "causalkit.borrowing",
               "trial,full,aib,acib"),
    "longterm": ("long-term effect under monotone drop-out of the outcomes",
                 "causalkit.longterm", "regression,aipw"),
    "policy": ("value of treatment policies in a covariate-shifted target sample",
               "causalkit.policy", "value,learner"),
}

_ID_NAMES = re.compile(r"^(unnamed: ?\d+|index|id|row|rowid|row_id|.*_id)$", re.IGNORECASE)


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


def _columns(text):
    return [c.strip() for c in text.split(",") if c.strip()] if text else []


def _is_row_number(series) -> bool:
    import numpy as np
    import pandas as pd

    if not pd.api.types.is_integer_dtype(series):
        return False
    values = series.to_numpy()
    return bool(np.array_equal(values, np.arange(values.size))
                or np.array_equal(values, np.arange(1, values.size + 1)))


def covariate_columns(frame, roles: list, covariates: list | None):
    """The covariate columns of ``frame`` and the identifier columns that were skipped.

    Parameters
    ----------
    frame : DataFrame
    roles : list of str
        Columns used by a role (outcome, treatment, trial, short-term outcomes).
    covariates : list of str or None
        Requested columns; ``None``: every other column that is not an identifier.

    Raises
    ------
    UsageError
        A requested column is absent or is also a role; a covariate column is not numeric.
    """
    import pandas as pd

    skipped = []
    if covariates:
        absent = [c for c in covariates if c not in frame.columns]
        if absent:
            raise UsageError(f"--covariates: column(s) {absent} not in the data; columns: "
                             f"{list(frame.columns)}")
        clash = [c for c in covariates if c in roles]
        if clash:
            raise UsageError(f"--covariates: {clash} is the outcome, treatment or another role "
                             "column")
        chosen = list(covariates)
    else:
        chosen = []
        for c in frame.columns:
            if c in roles:
                continue
            if _ID_NAMES.match(str(c)) or _is_row_number(frame[c]):
                skipped.append(c)
            else:
                chosen.append(c)
    bad = [c for c in chosen if not (pd.api.types.is_numeric_dtype(frame[c])
                                     or pd.api.types.is_bool_dtype(frame[c]))]
    if bad:
        col = bad[0]
        numeric = pd.to_numeric(frame[col], errors="coerce")
        row = int(numeric.isna().to_numpy().argmax())
        raise UsageError(f"covariate column(s) {bad} are not numeric (e.g. {col!r} row {row}: "
                         f"{frame[col].iloc[row]!r}); fix the data or choose --covariates")
    if not chosen:
        raise UsageError("no covariate columns: pass --covariates")
    return chosen, skipped


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Options of one estimator subcommand."""
    _, _, default = COMMANDS[command]
    if command == "borrow":
        parser.add_argument("--data", default="nsw-cps",
                            help="'nsw-cps' (bundled NSW trial + CPS controls) or a CSV path")
        parser.add_argument("--outcome", default="re78", help="outcome column")
        parser.add_argument("--treatment", default="treat", help="treatment column (0/1)")
        parser.add_argument("--trial", default="trial",
                            help="trial-indicator column (1 trial unit, 0 external control)")
    elif command == "longterm":
        parser.add_argument("--data", required=True, help="CSV path")
        parser.add_argument("--outcome", required=True,
                            help="long-term outcome column (empty where missing)")
        parser.add_argument("--treatment", required=True, help="treatment column (0/1)")
        parser.add_argument("--short", default="",
                            help="comma-separated short-term outcome columns, in stage order "
                                 "(empty after drop-out)")
    else:
        parser.add_argument("--data", required=True, help="source-sample CSV (labelled)")
        parser.add_argument("--target", required=True,
                            help="target-sample CSV (covariates only)")
        parser.add_argument("--outcome", required=True, help="outcome column (larger is better)")
        parser.add_argument("--treatment", required=True, help="treatment-arm column")
    parser.add_argument("--covariates", default=None,
                        help="comma-separated covariate columns (default: every other numeric "
                             "column except identifiers; the list used is printed)")
    parser.add_argument("--estimators", default=default,
                        help=f"comma-separated estimator names (default {default}; 'all' for "
                             "every one)")
    kinds = ("influence", "bootstrap") + (("fab",) if command == "borrow" else ())
    parser.add_argument("--inference", choices=kinds, default=None,
                        help="interval: influence function or pipeline bootstrap"
                             + (" or FAB (adaptive only)" if command == "borrow" else "")
                             + " (default: each estimator's own)")
    parser.add_argument("--n-boot", type=int, default=200, help="bootstrap resamples")
    parser.add_argument("--jobs", type=int, default=1, help="bootstrap workers")
    parser.add_argument("--seed", type=int, default=0, help="random_state of the estimators")
    parser.add_argument("--plot", default=None,
                        help="write the first estimator's diagnostic figure to this PNG")
    parser.set_defaults(_handler=lambda args: run(command, args))


def _read(path: str, what: str):
    import pandas as pd

    try:
        return pd.read_csv(path)
    except FileNotFoundError as exc:
        raise UsageError(f"{what}: no such file {path!r}") from exc
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what}: cannot read {path!r} as CSV ({exc})") from exc


def _load(command: str, args):
    """``(frame, fit keyword arguments, extra frames)`` for the command."""
    if command == "borrow" and args.data == "nsw-cps":
        from causalkit.datasets import NSW_COVARIATES, load_nsw_cps
        frame = load_nsw_cps()
        covariates = _columns(args.covariates) or NSW_COVARIATES
    else:
        frame = _read(args.data, "--data")
        covariates = _columns(args.covariates) or None
    roles = {"y": args.outcome, "treatment": args.treatment}
    if command == "borrow":
        roles["trial"] = args.trial
    if command == "longterm":
        roles["short"] = _columns(args.short)
    role_columns = [c for v in roles.values() for c in ([v] if isinstance(v, str) else v)]
    absent = [c for c in role_columns if c not in frame.columns]
    if absent:
        raise UsageError(f"the data has no column(s) {absent}; columns: {list(frame.columns)}")
    if command == "longterm" and not roles["short"]:
        roles["short"] = None
    cov, skipped = covariate_columns(frame, role_columns, covariates)
    if command == "policy":
        target = _read(args.target, "--target")
        missing = [c for c in cov if c not in target.columns]
        if missing:
            raise UsageError(f"--target lacks the covariate column(s) {missing}")
        covariate_columns(target, [], cov)
        roles["X_target"] = target[cov]
    return frame, roles, cov, skipped


def _one_line_warnings(command):
    def show(message, category, *_args, **_kwargs):
        print(f"causalkit {command}: warning: {message}", file=sys.stderr)
    return show


def _estimators(command: str, names_text: str):
    import importlib

    registry = importlib.import_module(COMMANDS[command][1]).ESTIMATORS
    names = list(registry) if names_text == "all" else _columns(names_text)
    unknown = [n for n in names if n not in registry]
    if unknown or not names:
        raise UsageError(f"--estimators: unknown {unknown}; choose from {list(registry)}")
    return {n: registry[n] for n in names}


def _targets(command, est):
    """What to estimate with a fitted estimator: ``{row label: estimate keyword arguments}``.
    A policy-value estimator reports the target value of always giving each arm."""
    if command == "policy" and hasattr(est, "arms_") and not hasattr(est, "policy_model_"):
        return {f"always {arm}": {"policy": arm} for arm in est.arms_.tolist()}
    return {None: {}}


def _fit_all(command, args, frame, roles, cov):
    import pandas as pd

    rows, fitted = [], {}
    for name, cls in _estimators(command, args.estimators).items():
        params = cls().get_params()
        est = cls(**({"random_state": args.seed} if "random_state" in params else {}))
        est.fit(frame, covariates=cov, **roles)
        fitted[name] = est
        for label, target in _targets(command, est).items():
            res = est.estimate(inference=args.inference, n_boot=args.n_boot, n_jobs=args.jobs,
                               **target)
            print(res.summary(), "\n")
            row = res.to_frame()
            if label is not None:
                row.index = [f"{row.index[0]}: {label}"]
            row.insert(0, "interval", "bootstrap" if res.replicates is not None
                       else "fab" if res.ci_method == "fab" else "influence")
            rows.append(row)
    return pd.concat(rows), fitted


def run(command: str, args) -> int:
    """Run one estimator subcommand; user errors exit with status 2 and one line."""
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warnings(command)
        try:
            frame, roles, cov, skipped = _load(command, args)
            if skipped:
                print(f"ignoring identifier column(s) {skipped}")
            print(f"{len(frame)} rows; covariates ({len(cov)}): {', '.join(map(str, cov))}\n")
            table, fitted = _fit_all(command, args, frame, roles, cov)
        except (UsageError, ValueError, TypeError) as exc:
            print(f"causalkit {command}: {exc}".splitlines()[0], file=sys.stderr)
            return 2
    cols = [c for c in ("interval", "estimate", "std_error", "ci_lower", "ci_upper",
                        "n_borrowed") if c in table]
    print(table[cols].to_string(float_format=lambda v: f"{v:.4g}"))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        first = next(iter(fitted.values()))
        first.plot().savefig(args.plot, dpi=120, bbox_inches="tight")
        print(f"\nwrote {args.plot}")
    return 0
