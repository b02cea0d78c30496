"""Job traces: a synthetic generator and loaders for user-supplied public trace files.

Every function returns the job table :func:`~causalkit.systems.netsched.simulate_cluster`
reads: ``job_id, arrival`` (s since the first submission), ``n_gpus``, ``duration`` (s),
``comm_fraction``, ``pattern``, ``model``.

Synthetic defaults (documented assumptions, not measurements):

* sizes: powers of two with probabilities :data:`DEFAULT_SIZE_MIX` (Helios-like: many small jobs,
  a tail of multi-leaf jobs; sizes larger than the cluster are dropped and the rest rescaled);
* durations alone at line rate: log-normal, median 1 h, log-sd 1.0;
* models: :data:`DEFAULT_MODELS` (share of each iteration spent in network communication at line
  rate, collective pattern, mix weight);
* arrivals: Poisson with rate ``load * N_gpus / E[n_gpus * duration]``, so ``load`` is the offered
  GPU load.

Loaders (files are not shipped; users download them under the providers' terms):

* :func:`load_philly` - Microsoft Philly ``cluster_job_log`` (JSON list of jobs with
  ``submitted_time`` and ``attempts[].{start_time, end_time, detail[].gpus}``; Jeon et al., ATC'19);
* :func:`load_helios` - SenseTime Helios ``cluster_log.csv`` (``job_id, gpu_num, submit_time,
  duration, state, ...``; Hu et al., SC'21);
* :func:`load_pai` - Alibaba PAI 2020 ``pai_task_table.csv`` (``job_name, task_name, inst_num,
  status, start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type``, header optional;
  ``plan_gpu`` in percent of a GPU; Weng et al., NSDI'22).

Malformed rows raise ``ValueError`` naming the file and the row number (1-based data rows).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit._validation import check_positive_int, check_random_state

__all__ = ["DEFAULT_SIZE_MIX", "DEFAULT_MODELS", "synthetic_trace", "assign_models",
           "load_philly", "load_helios", "load_pai"]

#: GPU count -> probability of the synthetic generator.
DEFAULT_SIZE_MIX = {1: 0.20, 2: 0.10, 4: 0.15, 8: 0.20, 16: 0.12, 32: 0.10, 64: 0.07,
                    128: 0.04, 256: 0.02}

#: model -> (comm_fraction at line rate, pattern, mix weight).
DEFAULT_MODELS = {
    "resnet50": (0.25, "ring", 0.3),
    "vgg16": (0.55, "ring", 0.2),
    "bert": (0.45, "ring", 0.3),
    "gpt": (0.60, "ring", 0.1),
    "moe": (0.50, "alltoall", 0.1),
}

_EPOCH = pd.Timestamp("1970-01-01")

PAI_TASK_COLUMNS = ["job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"]


def _n_gpus_of(cluster) -> int:
    return int(cluster) if isinstance(cluster, (int, np.integer)) else int(cluster.n_gpus)


def assign_models(jobs: pd.DataFrame, models=None, random_state=None) -> pd.DataFrame:
    """Draw a model (comm_fraction, pattern) for every job from a model mix."""
    models = DEFAULT_MODELS if models is None else models
    names = list(models)
    w = np.array([models[k][2] for k in names], dtype=float)
    if np.any(w < 0) or w.sum() <= 0:
        raise ValueError("models: mix weights must be non-negative and not all zero")
    rng = check_random_state(random_state)
    pick = rng.choice(len(names), size=len(jobs), p=w / w.sum())
    out = jobs.copy()
    out["model"] = [names[i] for i in pick]
    out["comm_fraction"] = [float(models[names[i]][0]) for i in pick]
    out["pattern"] = [models[names[i]][1] for i in pick]
    return out


def synthetic_trace(n_jobs: int, cluster, load: float = 0.8, *, size_mix=None,
                    duration_median: float = 3600.0, duration_sigma: float = 1.0, models=None,
                    random_state=None) -> pd.DataFrame:
    """Poisson job trace with a given offered GPU load.

    Parameters
    ----------
    n_jobs : int
    cluster : LeafSpine or int
        The cluster (or its GPU count) the load refers to.
    load : float
        Offered load ``lambda * E[n_gpus * duration] / N_gpus`` (> 0; above 1 the queue grows).
    size_mix : dict, optional
        GPU count -> probability (default ``causalkit.systems.netsched.traces.DEFAULT_SIZE_MIX``).
    duration_median, duration_sigma : float
        Log-normal durations: ``log D ~ N(log median, sigma^2)``.
    models : dict, optional
        See ``causalkit.systems.netsched.traces.DEFAULT_MODELS``.
    random_state : int or Generator, optional
    """
    n_jobs = check_positive_int(n_jobs, "n_jobs")
    N = _n_gpus_of(cluster)
    if not (isinstance(load, (int, float)) and math.isfinite(load) and load > 0):
        raise ValueError(f"load must be a positive number; got {load!r}")
    if duration_median <= 0 or duration_sigma < 0:
        raise ValueError("duration_median must be > 0 and duration_sigma >= 0")
    mix = {int(k): float(v) for k, v in (DEFAULT_SIZE_MIX if size_mix is None
                                         else size_mix).items() if int(k) <= N}
    if not mix or sum(mix.values()) <= 0:
        raise ValueError(f"size_mix has no size that fits a {N}-GPU cluster")
    sizes = np.array(list(mix))
    p = np.array(list(mix.values()))
    p = p / p.sum()
    rng = check_random_state(random_state)
    n = rng.choice(sizes, size=n_jobs, p=p)
    dur = duration_median * np.exp(duration_sigma * rng.standard_normal(n_jobs))
    mean_work = (sizes * p).sum() * duration_median * math.exp(duration_sigma ** 2 / 2)
    lam = load * N / mean_work
    arrival = np.cumsum(rng.exponential(1.0 / lam, size=n_jobs))
    arrival -= arrival[0]
    jobs = pd.DataFrame({"job_id": np.arange(n_jobs), "arrival": arrival, "n_gpus": n,
                         "duration": dur})
    return assign_models(jobs, models, rng)


def _finish(path, df: pd.DataFrame, round_pow2: bool, models, random_state) -> pd.DataFrame:
    if df.empty:
        raise ValueError(f"{path}: no usable GPU jobs")
    df = df.sort_values("arrival", kind="stable").reset_index(drop=True)
    df["arrival"] -= df["arrival"].iloc[0]
    if round_pow2:
        df["n_gpus"] = (2 ** np.ceil(np.log2(df["n_gpus"].to_numpy(float)))).astype(np.int64)
    return assign_models(df, models, random_state)


def _bad(path, row, what):
    return ValueError(f"{path}: row {row}: {what}")


def load_philly(path, *, round_pow2: bool = False, models=None, random_state=None):
    """Jobs of a Philly ``cluster_job_log`` JSON file (last attempt's GPUs, first start to
    last end as the duration; jobs without a finished attempt or GPUs are skipped)."""
    path = Path(path)
    try:
        records = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON list of jobs")
    rows = []
    for i, rec in enumerate(records, start=1):
        if not isinstance(rec, dict) or "submitted_time" not in rec or "attempts" not in rec:
            raise _bad(path, i, "a job needs 'submitted_time' and 'attempts'")
        attempts = rec["attempts"] or []
        if not isinstance(attempts, list):
            raise _bad(path, i, "'attempts' must be a list")
        try:
            sub = pd.Timestamp(rec["submitted_time"])
            starts = [pd.Timestamp(a["start_time"]) for a in attempts
                      if a.get("start_time") not in (None, "None")]
            ends = [pd.Timestamp(a["end_time"]) for a in attempts
                    if a.get("end_time") not in (None, "None")]
            gpus = sum(len(d.get("gpus", [])) for d in attempts[-1].get("detail", [])) \
                if attempts else 0
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _bad(path, i, f"unreadable times or GPU detail ({exc})") from exc
        if pd.isna(sub):
            raise _bad(path, i, "submitted_time is missing")
        if not starts or not ends or gpus == 0:
            continue
        dur = (max(ends) - min(starts)).total_seconds()
        if dur <= 0:
            continue
        rows.append((rec.get("jobid", i - 1), (sub - _EPOCH).total_seconds(), gpus, dur))
    df = pd.DataFrame(rows, columns=["job_id", "arrival", "n_gpus", "duration"])
    return _finish(path, df, round_pow2, models, random_state)


def _read_csv(path, names=None):
    try:
        return pd.read_csv(path, names=names, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: malformed CSV ({exc})") from exc


def _numeric(path, df, col):
    vals = pd.to_numeric(df[col].replace("", np.nan), errors="coerce")
    bad = np.flatnonzero(vals.isna().to_numpy() & (df[col] != "").to_numpy())
    if bad.size:
        raise _bad(path, bad[0] + 1, f"{col} is not a number: {df[col].iloc[bad[0]]!r}")
    return vals


def load_helios(path, *, states=("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"),
                round_pow2: bool = False, models=None, random_state=None):
    """Jobs of a Helios ``cluster_log.csv`` (GPU jobs in the given final ``states``)."""
    path = Path(path)
    df = _read_csv(path)
    need = ["job_id", "gpu_num", "submit_time", "duration"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    gpu = _numeric(path, df, "gpu_num")
    dur = _numeric(path, df, "duration")
    sub = pd.to_datetime(df["submit_time"], errors="coerce")
    bad = np.flatnonzero(sub.isna().to_numpy())
    if bad.size:
        raise _bad(path, bad[0] + 1, f"submit_time unreadable: {df['submit_time'].iloc[bad[0]]!r}")
    keep = (gpu > 0) & (dur > 0)
    if "state" in df.columns and states is not None:
        keep &= df["state"].isin(states)
    out = pd.DataFrame({"job_id": df["job_id"], "arrival": (sub - sub.min()).dt.total_seconds(),
                        "n_gpus": gpu, "duration": dur})[keep.to_numpy()]
    out["n_gpus"] = out["n_gpus"].astype(np.int64)
    return _finish(path, out, round_pow2, models, random_state)


def load_pai(path, *, status="Terminated", round_pow2: bool = False, models=None,
             random_state=None):
    """Jobs of an Alibaba PAI 2020 ``pai_task_table.csv`` (GPUs summed over a job's tasks:
    ``inst_num * plan_gpu / 100``, rounded up; arrival = first task start)."""
    path = Path(path)
    head = _read_csv(path).columns.tolist()
    has_header = "job_name" in head
    df = _read_csv(path, None if has_header else PAI_TASK_COLUMNS)
    missing = [c for c in PAI_TASK_COLUMNS[:9] if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    inst = _numeric(path, df, "inst_num")
    gpu = _numeric(path, df, "plan_gpu").fillna(0)
    t0 = _numeric(path, df, "start_time")
    t1 = _numeric(path, df, "end_time")
    ok = (gpu > 0) & inst.notna() & t0.notna() & t1.notna() & (t1 > t0)
    if status is not None:
        ok &= df["status"] == status
    tasks = pd.DataFrame({"job_id": df["job_name"], "gpus": inst * gpu / 100.0,
                          "t0": t0, "t1": t1})[ok.to_numpy()]
    jobs = tasks.groupby("job_id", sort=False).agg(gpus=("gpus", "sum"), t0=("t0", "min"),
                                                   t1=("t1", "max")).reset_index()
    out = pd.DataFrame({"job_id": jobs["job_id"], "arrival": jobs["t0"],
                        "n_gpus": np.ceil(jobs["gpus"] - 1e-9).astype(np.int64),
                        "duration": jobs["t1"] - jobs["t0"]})
    return _finish(path, out, round_pow2, models, random_state)
