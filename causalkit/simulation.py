"""The experiment engine: seeded replications, local or Dask parallelism, a crash-safe resumable
store, design fingerprints, and the usual Monte Carlo summaries.

Two front ends share one execution path (``_execute``):

* :func:`run_study` -- a statistical study: a ``design`` (a function of a numpy Generator returning
  one simulated data set and its true estimand) and ``estimators`` (functions of that data set);
* :func:`run_experiment` -- a systems experiment: ``run_once(rng, rep, **config) -> dict`` rows
  over a list of configurations.

Repetition ``r`` always uses ``numpy.random.default_rng([seed, r])`` (``SeedSequence([seed, r])``),
so its numbers do not depend on scheduling, on the number of workers or on whether the run was
interrupted and resumed. Finished tasks are stored as they arrive (see :mod:`causalkit._store`
for the file format and its guarantees).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import inspect
import json
import math
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed, parallel_config

from causalkit._base import _threadpools
from causalkit._store import (
    FingerprintMismatch,
    ResultStore,
    StoreLocked,
    meta_path,
    read_records,
)
from causalkit._validation import check_alpha, check_positive_int
from causalkit.exceptions import CausalkitWarning
from causalkit.inference import Estimate

__all__ = ["run_study", "run_experiment", "engine_options", "summarize", "load_results",
           "design_fingerprint", "StoreLocked", "FingerprintMismatch"]

_BASE_COLUMNS = ["rep", "estimator", "estimate", "std_error", "ci_lower", "ci_upper", "truth",
                 "covered", "seconds", "error"]
_RESERVED = frozenset(_BASE_COLUMNS) | {"n_warnings"}
_RESERVED_NUMERIC = frozenset(_BASE_COLUMNS[2:]) - {"error"}
_BACKENDS = ("loky", "dask")
_RECORDED_ERRORS = (ValueError, ArithmeticError, np.linalg.LinAlgError, RuntimeError)


# design fingerprints -----------------------------------------------------------------------------
def _describe(value, depth: int = 0):
    """A JSON-able, process-independent description of a design, estimator or parameter."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, np.integer):
        return int(value)
    if depth > 4:
        return type(value).__qualname__
    if isinstance(value, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
        return {"array": list(value.shape), "dtype": str(value.dtype), "sha256": digest}
    if isinstance(value, (pd.DataFrame, pd.Series)):
        hashed = pd.util.hash_pandas_object(value, index=True).to_numpy()
        return {"frame": list(value.shape), "sha256": _describe(hashed)["sha256"]}
    if isinstance(value, Mapping):
        return {str(k): _describe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_describe(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(repr(v) for v in value)
    if isinstance(value, partial):
        return {"partial": _describe(value.func, depth + 1),
                "args": _describe(value.args, depth + 1),
                "keywords": _describe(value.keywords, depth + 1)}
    if inspect.isfunction(value) or inspect.ismethod(value):
        func = getattr(value, "__func__", value)
        closure = {name: _describe(cell.cell_contents, depth + 1)
                   for name, cell in zip(func.__code__.co_freevars, func.__closure__ or (),
                                         strict=True) if name != "__class__"}
        out = {"function": func.__qualname__, "defaults": _describe(func.__defaults__, depth + 1),
               "kwdefaults": _describe(func.__kwdefaults__, depth + 1)}
        if closure:
            out["closure"] = closure
        if inspect.ismethod(value):
            out["self"] = _describe(value.__self__, depth + 1)
        return out
    if inspect.isclass(value) or inspect.isbuiltin(value):
        return value.__qualname__
    params = (value.get_params(deep=False) if hasattr(value, "get_params")
              else {k: v for k, v in vars(value).items()          # configuration only: no
                    if not (k.startswith("_") or k.endswith("_"))}  # private or fitted state
              if hasattr(value, "__dict__") else None)
    if params is not None:
        return {"object": type(value).__qualname__, "params": _describe(params, depth + 1)}
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def design_fingerprint(description: Mapping) -> str:
    """The design fingerprint: a SHA-256 (16 hex digits) of a description's canonical JSON."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# options set by a study runner -------------------------------------------------------------------
_OPTIONS = contextvars.ContextVar("causalkit_engine_options", default=None)


@contextlib.contextmanager
def engine_options(*, overwrite: bool = False, params: Mapping | None = None):
    """Options for every :func:`run_study` / :func:`run_experiment` call inside the block.

    A study runner uses it to pass the command line's ``--overwrite`` and ``--quick`` to the
    engine calls a study function makes, without threading them through every study's signature.

    Parameters
    ----------
    overwrite : bool
        Default of ``overwrite`` (an explicit argument wins).
    params : dict, optional
        Merged into each call's ``params`` (so into its design fingerprint).
    """
    token = _OPTIONS.set({"overwrite": bool(overwrite), "params": dict(params or {})})
    try:
        yield
    finally:
        _OPTIONS.reset(token)


def _resolve_options(overwrite, params) -> tuple[bool, dict]:
    options = _OPTIONS.get() or {}
    merged = {**options.get("params", {}), **dict(params or {})}
    return (options.get("overwrite", False) if overwrite is None else bool(overwrite)), merged


# running tasks -----------------------------------------------------------------------------------
_WATCHED_PARENT = None


def _exit_with_parent(parent: int) -> None:
    """In a worker process the study's process started (called by :func:`_start_worker`, the
    loky workers' initializer), exit as soon as that process dies.

    A SIGKILLed study cannot tell its workers to stop; each worker instead polls its parent id
    (which changes when the parent dies) from a daemon thread, twice a second. A worker that
    loky started (or replaced) just before the study died finds itself already re-parented
    when its initializer runs, and exits at once.
    """
    global _WATCHED_PARENT
    if _WATCHED_PARENT is not None or os.getpid() == parent:
        return
    if os.getppid() != parent:
        os._exit(1)
    _WATCHED_PARENT = parent

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="causalkit-exit-with-parent", daemon=True).start()


def _start_worker(parent: int, one_thread: bool) -> None:
    """Initializer of the engine's loky workers: exit when the study's process dies
    (:func:`_exit_with_parent`, also in a worker that never gets a task). A pool of study
    replications is started with ``inner_max_num_threads=1``, so every BLAS/OpenMP library
    reads a one-thread limit from the environment as it loads; ``one_thread`` marks the worker
    as such, and its replications skip setting the limit again."""
    global _ONE_THREAD
    _ONE_THREAD = one_thread
    _exit_with_parent(parent)


def _call(task: Callable, key) -> tuple:
    return key, task(key)


def _stream(task, keys, n_jobs, backend, scheduler, one_thread):
    if backend == "loky" and n_jobs == 1:
        yield from ((key, task(key)) for key in keys)
        return
    jobs = (delayed(_call)(task, key) for key in keys)
    if backend == "loky":
        with parallel_config(backend="loky", initializer=_start_worker,
                             initargs=(os.getpid(), one_thread),
                             inner_max_num_threads=1 if one_thread else None):
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


def _execute(task: Callable, keys: list, description: Callable[[], dict], *, out, overwrite,
             n_jobs, backend, scheduler, progress, sync_seconds, run_order=None,
             replications: bool = False) -> list[dict]:
    """Run ``task(key) -> list of row dicts`` for every key (an int or a tuple of ints) not yet
    in ``out`` (in the order ``sorted(keys, key=run_order)`` if given); return the rows of all
    keys, in the order of ``keys``. ``description()`` gives the design description (computed
    only when there is a store to check it against). ``replications``: the tasks are study
    replications; run in-process, they share one :class:`_ReplicationBlock`."""
    bar, store = None, _NoStore()
    if out is not None:
        described = description()
        store = ResultStore(out, design_fingerprint(described), described, overwrite=overwrite,
                            sync_seconds=sync_seconds)
    with store:
        stored = {_hashable(r["key"]): r["rows"] for r in store.records}
        done = {k: stored[k] for k in keys if k in stored}
        todo = [k for k in keys if k not in done]
        if run_order is not None:
            todo.sort(key=run_order)
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=len(keys), initial=len(done), desc="repetitions", leave=False)
        one_block = replications and backend == "loky" and n_jobs == 1
        try:
            with _ReplicationBlock() if one_block else contextlib.nullcontext():
                for key, rows in _stream(task, todo, n_jobs, backend, scheduler, replications):
                    store.append({"key": key, "rows": rows})
                    done[key] = rows
                    if bar is not None:
                        bar.update(1)
        finally:
            if bar is not None:
                bar.close()
    return [row for key in keys for row in done[key]]


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


class _NoStore:
    """Stand-in for :class:`~causalkit._store.ResultStore` when nothing is written."""

    records = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def append(self, record):
        return None


def _check_common(reps, n_jobs, backend, scheduler, sync_seconds):
    reps = check_positive_int(reps, "reps")
    n_jobs = check_positive_int(n_jobs, "n_jobs") if n_jobs != -1 else -1
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}; got {backend!r}")
    if backend == "dask" and scheduler is None:
        raise ValueError("backend='dask' needs scheduler (an address or a distributed.Client)")
    if not (isinstance(sync_seconds, (int, float)) and sync_seconds >= 0):
        raise ValueError(f"sync_seconds must be a number >= 0; got {sync_seconds!r}")
    return reps, n_jobs


def _version() -> str:
    from causalkit import __version__
    return __version__


# statistical studies -----------------------------------------------------------------------------
def _row(name: str, output, truth: float, alpha: float) -> dict:
    """One estimator's row; standard columns that would be NaN are left out (they read back as
    NaN), diagnostics are kept as they are."""
    row = {"estimator": name, "truth": truth, "error": ""}
    if isinstance(output, Estimate):
        lo, hi = output.conf_int(alpha)
        row.update(estimate=output.value, std_error=output.std_error, ci_lower=lo, ci_upper=hi)
        details = {k: v for k, v in output.details.items() if isinstance(v, (int, float, bool))}
    elif type(output) is dict or isinstance(output, Mapping):
        if "estimate" not in output:
            raise ValueError(f"estimator {name!r} returned a dict without 'estimate'")
        details = {k: v for k, v in output.items() if k not in _RESERVED}
        row.update({k: float(v) for k, v in output.items() if k in _RESERVED_NUMERIC})
    else:
        row["estimate"] = float(output)
        details = {}
    lo, hi = row.get("ci_lower", math.nan), row.get("ci_upper", math.nan)
    if math.isfinite(lo) and math.isfinite(hi):
        row["covered"] = float(lo <= truth <= hi)
    row = {k: v for k, v in row.items() if v == v}
    row.update({k: float(v) for k, v in details.items()})
    return row


#: The warnings log of the enclosing :func:`_recording` block (None outside one).
_RECORDED: list | None = None


@contextlib.contextmanager
def _recording():
    """Record every warning raised inside the block (filter ``"always"``, so repeats count) in
    one list; an inner block shares the outer one's list. A study run in-process opens one
    block around all its replications (see :func:`_execute`), which costs a replication far
    less than a block of its own; what is still in the list when the outermost block closes
    was raised outside any replication and is shown then."""
    global _RECORDED
    if _RECORDED is not None:
        yield _RECORDED
        return
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        _RECORDED = log
        try:
            yield log
        finally:
            _RECORDED = None
    registry: dict = {}     # one registry: the usual "default" filter shows a repeat once
    for message in log:
        warnings.warn_explicit(message.message, message.category, message.filename,
                               message.lineno, registry=registry, source=message.source)


#: True inside a :class:`_ReplicationBlock` (the process runs with one BLAS/OpenMP thread).
_ONE_THREAD = False


def _single_thread_done() -> None:
    global _ONE_THREAD
    _ONE_THREAD = False


class _ReplicationBlock:
    """Record warnings (:func:`_recording`) and run BLAS/OpenMP with one thread: a replication's
    fits are small and repeated, and parallel replications would otherwise oversubscribe the
    cores. Re-entrant like :func:`_recording`: a study run in-process opens one block around all
    its replications (setting and restoring the thread limit costs about 30 us, as much as a
    trivial replication), and each replication's own block then costs well under a
    microsecond (a class, not a generator, for that reason)."""

    def __enter__(self) -> list:
        global _ONE_THREAD
        self._stack = None
        if _ONE_THREAD and _RECORDED is not None:
            return _RECORDED
        self._stack = contextlib.ExitStack()
        log = self._stack.enter_context(_recording())
        if not _ONE_THREAD:
            self._stack.enter_context(_threadpools().limit(limits=1))
            _ONE_THREAD = True
            self._stack.callback(_single_thread_done)
        return log

    def __exit__(self, *exc) -> None:
        if self._stack is not None:
            self._stack.__exit__(*exc)


def _run_replication(rep: int, design: Callable, estimators: Mapping, seed: int,
                     alpha: float) -> list[dict]:
    rng = np.random.default_rng([seed, rep])
    data = design(rng)
    if not (type(data) is dict or isinstance(data, Mapping)) or "truth" not in data:
        raise TypeError("design(rng) must return a dict with a 'truth' entry")
    truth = float(data["truth"])
    rows = []
    with _ReplicationBlock() as caught:
        first = len(caught)
        try:
            for name, fn in estimators.items():
                before = len(caught)
                start = time.perf_counter()
                try:
                    row = _row(name, fn(data), truth, alpha)
                except _RECORDED_ERRORS as exc:
                    row = _row(name, np.nan, truth, alpha)
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                row.update(seconds=time.perf_counter() - start,
                           n_warnings=len(caught) - before, rep=rep)
                rows.append(row)
        finally:
            del caught[first:]      # counted, not shown (run_study reports them in one warning)
    return rows


def run_study(design: Callable, estimators: Mapping[str, Callable], reps: int, seed: int = 0, *,
              n_jobs: int = 1, backend: str = "loky", scheduler=None, out=None,
              overwrite: bool | None = None, params: Mapping | None = None,
              progress: bool = True, alpha: float = 0.05,
              sync_seconds: float = 1.0) -> pd.DataFrame:
    """Run a Monte Carlo study, storing results as replications finish.

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
        Local worker processes (``backend="loky"``); ``-1`` for one per core. Workers exit when
        the study's process dies. Each replication runs with one BLAS/OpenMP thread.
    backend : {"loky", "dask"}
        ``"dask"`` runs replications on the ``dask.distributed`` cluster at ``scheduler``
        (an address such as ``"tcp://127.0.0.1:8786"`` or a ``distributed.Client``), through
        joblib's Dask backend.
    out : str or Path, optional
        Results file (JSON Lines, one replication per line; see :mod:`causalkit._store`). A rerun
        with the same ``out`` and design resumes, running only the missing replications; a rerun
        with another design raises :class:`FingerprintMismatch`; a second process writing the
        same ``out`` at the same time gets :class:`StoreLocked`.
    overwrite : bool, optional
        Discard what ``out`` holds instead of resuming (default: False, or as set by
        :func:`engine_options`).
    params : dict, optional
        Further values that identify the design (e.g. ``{"quick": True}``), added to the design
        fingerprint (together with those of :func:`engine_options`). The fingerprint always
        covers the design's and estimators' parameters
        (partial keywords, defaults, closure values), ``seed``, ``alpha`` and the package version.
    progress : bool
        Show a tqdm progress bar.
    alpha : float
        Level of the recorded confidence intervals (coverage uses them).
    sync_seconds : float
        Bounded loss window: finished replications are written to ``out`` in batches at most
        50 ms after they finish (a SIGKILLed process loses at most that much finished work;
        any other exit writes everything), and ``fsync`` runs at most every ``sync_seconds``
        seconds, so an operating-system crash or power cut loses at most that much.

    Returns
    -------
    pandas.DataFrame
        One row per replication and estimator: ``rep, estimator, estimate, std_error, ci_lower,
        ci_upper, truth, covered, seconds, error, n_warnings`` and one column per numeric
        diagnostic.
    """
    if not callable(design):
        raise TypeError("design must be callable: design(rng) -> dict")
    if not isinstance(estimators, Mapping) or not estimators:
        raise ValueError("estimators must be a non-empty dict of name -> callable")
    bad = [k for k, v in estimators.items() if not callable(v)]
    if bad:
        raise TypeError(f"estimators {bad} are not callable")
    reps, n_jobs = _check_common(reps, n_jobs, backend, scheduler, sync_seconds)
    alpha = check_alpha(alpha)
    overwrite, params = _resolve_options(overwrite, params)
    def description():
        return {"kind": "study", "design": _describe(design),
                "estimators": _describe(dict(estimators)), "seed": int(seed),
                "alpha": repr(alpha), "params": _describe(params), "version": _version()}

    task = partial(_run_replication, design=design, estimators=dict(estimators), seed=seed,
                   alpha=alpha)
    rows = _execute(task, list(range(reps)), description, out=out, overwrite=overwrite,
                    n_jobs=n_jobs, backend=backend, scheduler=scheduler, progress=progress,
                    sync_seconds=sync_seconds, replications=True)
    results = _study_frame(rows)
    _report_warnings(results, seed)
    return results


def _study_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=[*_BASE_COLUMNS, "n_warnings"])
    columns = _BASE_COLUMNS + [c for c in frame.columns if c not in _BASE_COLUMNS]
    frame = frame.reindex(columns=columns).sort_values(["rep", "estimator"], kind="stable")
    frame = frame.reset_index(drop=True)
    frame["rep"] = frame["rep"].astype(int)
    frame["error"] = frame["error"].fillna("").astype(str)
    return frame


def _report_warnings(results: pd.DataFrame, seed: int) -> None:
    """One summary warning for the warnings estimators raised inside replications."""
    if "n_warnings" not in results or not results["n_warnings"].any():
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


# systems experiments -----------------------------------------------------------------------------
def _run_configuration(key, run_once: Callable, configs: Sequence[Mapping], seed: int):
    index, rep = key
    config = configs[index]
    output = run_once(np.random.default_rng([seed, rep]), rep, **config)
    rows = [output] if isinstance(output, Mapping) else list(output)
    if not all(isinstance(r, Mapping) for r in rows):
        raise TypeError("run_once must return a dict (one row) or a list of dicts")
    return [{**config, **row, "rep": rep} for row in rows]


def _round_robin(key: tuple) -> tuple:
    """Run order of an experiment: repetition ``r`` of every configuration before ``r + 1``."""
    index, rep = key
    return rep, index


def run_experiment(run_once: Callable, configs: Sequence[Mapping], reps: int, seed: int = 0, *,
                   n_jobs: int = 1, backend: str = "loky", scheduler=None, out=None,
                   overwrite: bool | None = None, params: Mapping | None = None,
                   progress: bool = True, sync_seconds: float = 1.0) -> pd.DataFrame:
    """Run a systems experiment: every configuration, ``reps`` repetitions each.

    Parameters
    ----------
    run_once : callable
        ``run_once(rng, rep, **config) -> dict`` (one row) or a list of dicts (several rows);
        values must be JSON-able (numbers, strings, booleans, numpy scalars).
    configs : sequence of dict
        The configurations; each dict is passed as keyword arguments and prepended to its rows.
        Use ``[{}]`` for a single configuration.
    reps : int
        Repetitions per configuration. Repetition ``r`` of every configuration uses
        ``numpy.random.default_rng([seed, r])`` (common random numbers across configurations).
        Tasks start in rounds: repetition ``r`` of every configuration before repetition
        ``r + 1`` of any, so that a change in machine load hits every configuration alike and
        an interrupted run leaves balanced results.
    seed, n_jobs, backend, scheduler, out, overwrite, params, progress, sync_seconds
        As in :func:`run_study`; the fingerprint covers ``run_once``, ``configs`` and ``seed``.

    Returns
    -------
    pandas.DataFrame
        One row per configuration, repetition and row of ``run_once``: the configuration's
        keys, the row's keys and ``rep``, ordered by configuration then repetition.
    """
    if not callable(run_once):
        raise TypeError("run_once must be callable: run_once(rng, rep, **config) -> dict")
    if (isinstance(configs, Mapping) or not isinstance(configs, Sequence) or not configs
            or not all(isinstance(c, Mapping) for c in configs)):
        raise ValueError("configs must be a non-empty list of dicts (use [{}] for one)")
    reps, n_jobs = _check_common(reps, n_jobs, backend, scheduler, sync_seconds)
    configs = [dict(c) for c in configs]
    overwrite, params = _resolve_options(overwrite, params)
    def description():
        return {"kind": "experiment", "run_once": _describe(run_once),
                "configs": _describe(configs), "seed": int(seed), "params": _describe(params),
                "version": _version()}

    task = partial(_run_configuration, run_once=run_once, configs=configs, seed=seed)
    keys = [(i, rep) for i in range(len(configs)) for rep in range(reps)]
    rows = _execute(task, keys, description, out=out, overwrite=overwrite, n_jobs=n_jobs,
                    backend=backend, scheduler=scheduler, progress=progress,
                    sync_seconds=sync_seconds, run_order=_round_robin)
    return pd.DataFrame(rows)


# reading and summarising -------------------------------------------------------------------------
def load_results(path) -> pd.DataFrame:
    """Read a results file written by :func:`run_study` or :func:`run_experiment`.

    Only complete records are read (a torn last line is skipped); the file is not changed.
    Files of the older CSV format (complete replications only) are read as well.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file at {path}")
    meta = json.loads(meta_path(path).read_text())
    if "fingerprint" not in meta:
        return _read_csv_results(path, len(meta["estimators"]))
    records = sorted(read_records(path), key=lambda r: _hashable(r["key"]))
    rows = [row for record in records for row in record["rows"]]
    if meta["design"].get("kind") == "experiment":
        return pd.DataFrame(rows)
    return _study_frame(rows)


def _read_csv_results(path: Path, n_estimators: int) -> pd.DataFrame:
    """Complete replications of a results file of the older CSV format."""
    numeric = [c for c in _BASE_COLUMNS if c not in ("estimator", "error")]
    frame = pd.read_csv(path, keep_default_na=False,
                        na_values={c: ["", "nan", "NaN"] for c in numeric})
    frame = frame[frame.groupby("rep")["estimator"].transform("size") == n_estimators]
    details = pd.DataFrame([json.loads(d) if d else {} for d in frame.pop("details")],
                           index=frame.index)
    return _study_frame(pd.concat([frame, details], axis=1).to_dict("records"))


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
