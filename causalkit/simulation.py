"""Simulation-study runner: seeded replications, local or Dask parallelism, incremental results
with resume, and the usual Monte Carlo summaries.

A study is a ``design`` (a function of a numpy Generator returning one simulated data set and its
true estimand) and a set of ``estimators`` (functions of that data set). Replication ``r`` always
uses ``numpy.random.default_rng([seed, r])``, so its numbers do not depend on scheduling, on the
number of workers or on whether the run was interrupted and resumed.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Mapping
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed, parallel_config

from causalkit._validation import check_alpha, check_positive_int
from causalkit.exceptions import CausalkitWarning
from causalkit.inference import Estimate

__all__ = ["run_study", "summarize", "load_results"]

_BASE_COLUMNS = ["rep", "estimator", "estimate", "std_error", "ci_lower", "ci_upper", "truth",
                 "covered", "seconds", "error", "details"]
_NUMERIC_COLUMNS = [c for c in _BASE_COLUMNS if c not in ("estimator", "error", "details")]
_BACKENDS = ("loky", "dask")


def _row(name: str, output, truth: float, alpha: float, seconds: float,
         n_warnings: int = 0) -> dict:
    row = dict.fromkeys(_BASE_COLUMNS[2:], np.nan)
    row.update(estimator=name, truth=truth, seconds=seconds, error="", details="{}")
    if isinstance(output, Estimate):
        lo, hi = output.conf_int(alpha)
        row.update(estimate=output.value, std_error=output.std_error, ci_lower=lo, ci_upper=hi)
        details = {k: v for k, v in output.details.items() if isinstance(v, (int, float, bool))}
    elif isinstance(output, Mapping):
        if "estimate" not in output:
            raise ValueError(f"estimator {name!r} returned a dict without 'estimate'")
        details = {k: v for k, v in output.items() if k not in row}
        row.update({k: float(v) for k, v in output.items() if k in row and k != "estimator"})
    else:
        row["estimate"] = float(output)
        details = {}
    if np.isfinite(row["ci_lower"]) and np.isfinite(row["ci_upper"]):
        row["covered"] = float(row["ci_lower"] <= truth <= row["ci_upper"])
    details["n_warnings"] = n_warnings
    row["details"] = json.dumps({k: float(v) for k, v in details.items()}, sort_keys=True)
    return row


def _run_replication(design: Callable, estimators: Mapping, seed: int, rep: int,
                     alpha: float) -> list[dict]:
    rng = np.random.default_rng([seed, rep])
    data = design(rng)
    if not isinstance(data, Mapping) or "truth" not in data:
        raise TypeError("design(rng) must return a dict with a 'truth' entry")
    truth = float(data["truth"])
    rows = []
    for name, fn in estimators.items():
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                output = fn(data)
                row = _row(name, output, truth, alpha, time.perf_counter() - start, len(caught))
            except (ValueError, ArithmeticError, np.linalg.LinAlgError, RuntimeError) as exc:
                row = _row(name, np.nan, truth, alpha, time.perf_counter() - start, len(caught))
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        row["rep"] = rep
        rows.append(row)
    return rows


def _meta_path(out: Path) -> Path:
    return out.with_name(out.name + ".meta.json")


def _read_complete(out: Path, n_estimators: int) -> pd.DataFrame:
    """Rows of replications fully present in ``out``.

    A run killed mid-write can leave a torn last line or a replication with only some of its
    rows; both are discarded and the file is rewritten without them (atomically).
    """
    raw = out.read_text()
    text = raw if raw.endswith("\n") else raw[: raw.rfind("\n") + 1]
    if text.count("\n") <= 1:
        frame = pd.DataFrame(columns=_BASE_COLUMNS)
    else:
        frame = pd.read_csv(StringIO(text), keep_default_na=False,
                            na_values={c: ["", "nan", "NaN"] for c in _NUMERIC_COLUMNS})
    counts = frame.groupby("rep")["estimator"].transform("size")
    complete = frame[counts == n_estimators]
    if len(complete) != len(frame) or text != raw:
        tmp = out.with_name(out.name + ".tmp")
        complete.to_csv(tmp, index=False, columns=_BASE_COLUMNS)
        os.replace(tmp, out)
    return complete


def _check_meta(out: Path, meta: dict) -> None:
    path = _meta_path(out)
    if path.exists():
        old = json.loads(path.read_text())
        if old != meta:
            raise ValueError(f"out={str(out)!r} holds results of a different study "
                             f"(seed/estimators differ: {old} vs {meta}); use a new file")
    else:
        path.write_text(json.dumps(meta))


def _results_stream(todo, design, estimators, seed, alpha, n_jobs, backend, scheduler):
    jobs = (delayed(_run_replication)(design, estimators, seed, r, alpha) for r in todo)
    if backend == "loky":
        yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(jobs)
        return
    from distributed import Client
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        with parallel_config(backend="dask", wait_for_workers_timeout=60):
            yield from Parallel(n_jobs=-1, return_as="generator_unordered")(jobs)
    finally:
        if client is not scheduler:
            client.close()


def run_study(design: Callable, estimators: Mapping[str, Callable], reps: int, seed: int = 0, *,
              n_jobs: int = 1, backend: str = "loky", scheduler=None, out=None,
              progress: bool = True, alpha: float = 0.05) -> pd.DataFrame:
    """Run a Monte Carlo study, appending results as replications finish.

    Parameters
    ----------
    design : callable
        ``design(rng) -> dict``: one simulated data set; the dict must hold ``"truth"`` (the true
        estimand) and whatever the estimators read. Draw every random number from ``rng``; pass
        estimators a seed through the dict (e.g. ``rng.integers(2**31)``) if they need one.
    estimators : dict of name -> callable
        ``fn(data) -> Estimate | float | dict``. A dict must hold ``"estimate"`` and may hold
        ``"std_error"``, ``"ci_lower"``, ``"ci_upper"`` and extra numeric diagnostics.
        An estimator raising ``ValueError``/``ArithmeticError``/``LinAlgError``/``RuntimeError``
        gets a row with its error message and a NaN estimate; other errors stop the study.
    reps : int
        Total number of replications (already stored ones are skipped).
    seed : int
        Replication ``r`` uses ``numpy.random.default_rng([seed, r])``.
    n_jobs : int
        Local worker processes (``backend="loky"``).
    backend : {"loky", "dask"}
        ``"dask"`` runs replications on the ``dask.distributed`` cluster at ``scheduler``
        (an address such as ``"tcp://127.0.0.1:8786"`` or a ``distributed.Client``), through
        joblib's Dask backend.
    out : str or Path, optional
        CSV file. Each finished replication's rows are appended and flushed at once; a rerun
        with the same ``out`` resumes, running only the missing replications. A sidecar
        ``<out>.meta.json`` guards against mixing different studies in one file.
    progress : bool
        Show a tqdm progress bar.
    alpha : float
        Level of the recorded confidence intervals (coverage uses them).

    Returns
    -------
    pandas.DataFrame
        One row per replication and estimator: ``rep, estimator, estimate, std_error, ci_lower,
        ci_upper, truth, covered, seconds, error`` and one column per numeric diagnostic.
    """
    if not callable(design):
        raise TypeError("design must be callable: design(rng) -> dict")
    if not isinstance(estimators, Mapping) or not estimators:
        raise ValueError("estimators must be a non-empty dict of name -> callable")
    bad = [k for k, v in estimators.items() if not callable(v)]
    if bad:
        raise TypeError(f"estimators {bad} are not callable")
    reps = check_positive_int(reps, "reps")
    n_jobs = check_positive_int(n_jobs, "n_jobs") if n_jobs != -1 else -1
    alpha = check_alpha(alpha)
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}; got {backend!r}")
    if backend == "dask" and scheduler is None:
        raise ValueError("backend='dask' needs scheduler (an address or a distributed.Client)")

    names = list(estimators)
    done = pd.DataFrame(columns=_BASE_COLUMNS)
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        _check_meta(out, {"seed": int(seed), "estimators": names, "alpha": alpha})
        if out.exists() and out.stat().st_size > 0:
            done = _read_complete(out, len(names))
    done_reps = set(done["rep"].astype(int))
    todo = [r for r in range(reps) if r not in done_reps]

    collected = [done] if len(done) else []
    stream = _results_stream(todo, design, estimators, seed, alpha, n_jobs, backend, scheduler)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=reps, initial=reps - len(todo), desc="replications", leave=False)
    for rows in stream:
        frame = pd.DataFrame(rows, columns=_BASE_COLUMNS)
        if out is not None:
            header = not out.exists() or out.stat().st_size == 0
            with open(out, "a", encoding="utf-8") as fh:
                fh.write(frame.to_csv(index=False, header=header))
                fh.flush()
                os.fsync(fh.fileno())
        collected.append(frame)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    results = _expand(pd.concat(collected, ignore_index=True) if collected else done)
    results = results[results["rep"] < reps]
    _report_warnings(results, seed)
    return results


def _report_warnings(results: pd.DataFrame, seed: int) -> None:
    """One summary warning for the warnings estimators raised inside replications."""
    if "n_warnings" not in results:
        return
    counts = results.groupby("estimator", sort=False)["n_warnings"].agg(
        calls=lambda w: int((w > 0).sum()), total=lambda w: int(w.sum()))
    counts = counts[counts["total"] > 0]
    if counts.empty:
        return
    listed = ", ".join(f"{name}: {row.total} in {row.calls} replication(s)"
                       for name, row in counts.iterrows())
    warnings.warn(f"estimators raised warnings inside replications ({listed}); the count per "
                  "replication is in column 'n_warnings'. To see the messages, rerun one: "
                  f"design(numpy.random.default_rng([{seed}, rep])).", CausalkitWarning,
                  stacklevel=3)


def _expand(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.sort_values(["rep", "estimator"], kind="stable").reset_index(drop=True)
    frame["rep"] = frame["rep"].astype(int)
    frame["error"] = frame["error"].fillna("").astype(str)
    details = pd.DataFrame([json.loads(d) if isinstance(d, str) and d else {}
                            for d in frame["details"]], index=frame.index)
    return pd.concat([frame.drop(columns="details"), details], axis=1)


def load_results(path) -> pd.DataFrame:
    """Read a results file written by :func:`run_study` (complete replications only)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file at {path}")
    meta = json.loads(_meta_path(path).read_text())
    return _expand(_read_complete(path, len(meta["estimators"])))


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Monte Carlo summary per estimator.

    Columns: ``n_reps``, ``truth`` (mean), ``mean_estimate``, ``bias``, ``mc_se_bias``
    (:math:`sd/\\sqrt{R}`), ``sd``, ``rmse`` (:math:`\\sqrt{bias^2 + sd^2}` computed directly as
    the root mean squared error), ``mean_se``, ``coverage``, ``mean_ci_length``,
    ``mean_seconds``, ``n_errors``, and the mean of every numeric diagnostic column.
    """
    if results.empty:
        raise ValueError("results is empty")
    known = set(_BASE_COLUMNS)
    extra = [c for c in results.columns if c not in known
             and pd.api.types.is_numeric_dtype(results[c])]
    rows = {}
    for name, grp in results.groupby("estimator", sort=False):
        ok = grp[grp["error"] == ""]
        err = ok["estimate"] - ok["truth"]
        n = len(ok)
        row = {"n_reps": n,
               "truth": ok["truth"].mean(),
               "mean_estimate": ok["estimate"].mean(),
               "bias": err.mean(),
               "mc_se_bias": err.std(ddof=1) / np.sqrt(n) if n > 1 else np.nan,
               "sd": ok["estimate"].std(ddof=1),
               "rmse": float(np.sqrt(np.mean(err ** 2))) if n else np.nan,
               "mean_se": ok["std_error"].mean(),
               "coverage": ok["covered"].mean(),
               "mean_ci_length": (ok["ci_upper"] - ok["ci_lower"]).mean(),
               "mean_seconds": ok["seconds"].mean(),
               "n_errors": int(len(grp) - n)}
        row.update({f"mean_{c}": ok[c].mean() for c in extra})
        rows[name] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "estimator"
    return out
