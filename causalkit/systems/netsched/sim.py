"""Event-driven, flow-level simulation of a FIFO-scheduled leaf-spine GPU cluster (simulated).

Nothing here drives real switches or GPUs: the fabric is a flow-level model. Each running job is
one max-min entity (:mod:`.maxmin`) whose cross-leaf flows (:mod:`.traffic`) progress in
lock-step at rate ``r``. A job alone at line rate ``C`` finishes in its ``duration``; with a share
``rho = comm_fraction`` of each iteration spent communicating, its progress rate is::

    progress(r) = 1 / ((1 - rho) + rho * C / r)     (isolated-seconds per second)

Rates are piecewise constant: they are recomputed only when a job starts or ends, so the event
count is ``O(#jobs)``. The queue is FIFO (optionally with backfilling); the placement policy is a
scheduler from :mod:`.schedulers`.

Metrics per job: JCT = finish - arrival, queueing delay (JWT) = start - arrival, run time
JRT = finish - start, slowdown = JRT / duration (1 = as fast as alone at line rate). Cluster:
time-weighted GPU utilisation, fragmentation (share of time the queue head would fit by GPU count
but cannot be placed) and its network part ``network_blocked`` (share of time the head would be
placed if no leaf-spine link or OCS port were reserved: network segmentation), Jain's fairness
index ``(sum x)^2 / (n sum x^2)`` over ``x = 1/slowdown`` (Jain, Chiu & Hawe, 1984), the peak
load of every link, and the queue-stability verdict of :mod:`.stability` (a queue-length trend
after a warm-up; averages of unstable runs grow with the trace length).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

from causalkit.systems.netsched.maxmin import max_min_rates
from causalkit.systems.netsched.schedulers import ClusterState, make_scheduler
from causalkit.systems.netsched.stability import queue_trend
from causalkit.systems.netsched.topology import LeafSpine
from causalkit.systems.netsched.traffic import check_pattern, job_flows

__all__ = ["simulate_cluster", "steady_rates", "check_jobs", "Result", "job_load"]


def check_jobs(jobs, cluster: LeafSpine) -> pd.DataFrame:
    """Validate a job table against a cluster; return it sorted by arrival.

    Required columns: ``arrival`` (s), ``n_gpus``, ``duration`` (s, alone at line rate).
    Optional: ``job_id`` (default: row number), ``comm_fraction`` in [0, 1] (default 0.5),
    ``pattern`` (default ``"ring"``). Errors name the offending row.
    """
    if not isinstance(cluster, LeafSpine):
        raise TypeError(f"cluster must be a LeafSpine; got {type(cluster).__name__}")
    if isinstance(jobs, pd.DataFrame):
        df = jobs.copy()
    else:
        try:
            df = pd.DataFrame(list(jobs))
        except TypeError as exc:
            raise TypeError("jobs must be a DataFrame or an iterable of dict rows") from exc
    missing = [c for c in ("arrival", "n_gpus", "duration") if c not in df.columns]
    if missing:
        raise ValueError(f"jobs lacks required column(s) {missing}")
    if len(df) == 0:
        raise ValueError("jobs is empty")
    df = df.reset_index(drop=True)
    if "job_id" not in df.columns:
        df["job_id"] = np.arange(len(df))
    if "comm_fraction" not in df.columns:
        df["comm_fraction"] = 0.5
    if "pattern" not in df.columns:
        df["pattern"] = "ring"
    for col in ("arrival", "n_gpus", "duration", "comm_fraction"):
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = np.flatnonzero(~np.isfinite(vals.to_numpy(dtype=float, na_value=np.nan)))
        if bad.size:
            raise ValueError(f"jobs row {bad[0]}: {col} must be a finite number; "
                             f"got {df[col].iloc[bad[0]]!r}")
        df[col] = vals
    ids = df["job_id"].to_numpy()
    if len(np.unique(ids)) != len(ids):
        raise ValueError("jobs: job_id values must be unique")
    checks = [
        ("arrival", df["arrival"] < 0, "must be >= 0"),
        ("duration", df["duration"] <= 0, "must be > 0"),
        ("comm_fraction", (df["comm_fraction"] < 0) | (df["comm_fraction"] > 1),
         "must be in [0, 1]"),
        ("n_gpus", (df["n_gpus"] < 1) | (df["n_gpus"] != np.round(df["n_gpus"])),
         "must be a positive integer"),
    ]
    for col, mask, what in checks:
        bad = np.flatnonzero(mask.to_numpy())
        if bad.size:
            r = bad[0]
            raise ValueError(f"jobs row {r} (job {ids[r]}): {col} {what}; got {df[col].iloc[r]!r}")
    df["n_gpus"] = df["n_gpus"].astype(np.int64)
    big = np.flatnonzero(df["n_gpus"].to_numpy() > cluster.n_gpus)
    if big.size:
        r = big[0]
        raise ValueError(f"jobs row {r} (job {ids[r]}) asks for {df['n_gpus'].iloc[r]} GPUs; "
                         f"the cluster has {cluster.n_gpus}")
    for r, (pat, n) in enumerate(zip(df["pattern"], df["n_gpus"], strict=True)):
        check_pattern(pat, int(n), job_id=f"{ids[r]} (row {r})")
    return df.sort_values("arrival", kind="stable").reset_index(drop=True)


def job_load(cluster, placement, pattern, routing):
    """Aggregated link loads of a placed job: ``(link_ids, weights, n_flows)``."""
    src, dst, chan, w = job_flows(cluster, placement.gpus, pattern)
    if len(src) == 0 or routing is None:
        return np.zeros(0, np.int64), np.zeros(0), 0
    src, dst, chan, w = routing.split(cluster, src, dst, chan, w)
    sp_, dp_ = routing.ports(cluster, src, dst, chan, placement.job_id, placement)
    links = cluster.path_links(src, dst, sp_, dp_)
    uniq, inv = np.unique(links.ravel(), return_inverse=True)
    weights = np.bincount(inv, weights=np.repeat(w, links.shape[1]))
    return uniq, weights, len(src)


@dataclass
class Result:
    """Outcome of :func:`~causalkit.systems.netsched.simulate_cluster` (a simulated cluster;
    ``simulated`` is always True).

    Attributes
    ----------
    jobs : pandas.DataFrame
        One row per job: inputs plus ``start, finish, jct, jwt, jrt, slowdown, n_leaves,
        min_rate_frac`` (lowest rate / line rate while running; 1 for single-leaf jobs) and
        ``contended`` (its rate ever fell below what it gets alone on its placement).
    link_peak : ndarray
        Peak load (Gbit/s) of every directed link over the run.
    timeline : pandas.DataFrame
        ``time, busy_gpus, queued`` after every event.
    placements : dict
        job_id -> ``causalkit.systems.netsched.schedulers.Placement``.
    """

    cluster: LeafSpine
    scheduler: str
    jobs: pd.DataFrame
    link_peak: np.ndarray
    timeline: pd.DataFrame
    utilization: float
    fragmentation: float
    network_blocked: float = 0.0
    placements: dict = field(repr=False, default_factory=dict)
    n_solves: int = 0
    flows_solved: int = 0
    solve_seconds: float = 0.0
    wall_seconds: float = 0.0
    simulated: bool = True

    @property
    def jain(self) -> float:
        """Jain's fairness index over normalised throughputs ``1 / slowdown``."""
        x = 1.0 / self.jobs["slowdown"].to_numpy()
        return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))

    def stability(self, **options) -> dict:
        """Queue-length trend test (:func:`~causalkit.systems.netsched.queue_trend`;
        ``options``: ``warmup``, ``batches``, ``min_rise``, ``level``)."""
        return queue_trend(self.timeline, self.jobs, **options)

    def summary(self) -> str:
        """The headline metrics of :meth:`to_dict` as text, one per line."""
        return "\n".join(f"{k:<16} {v:.6g}" if isinstance(v, float) else f"{k:<16} {v}"
                         for k, v in self.to_dict().items())

    def to_dict(self) -> dict:
        """Headline metrics as a flat dict (one row of :class:`ClusterExperiment` output)."""
        j = self.jobs
        cap = self.cluster.capacity
        keys = ("stable", "queue_slope_per_h", "queue_slope_ci_lower", "queue_slope_ci_upper",
                "jwt_last_over_first")
        if j["arrival"].max() > j["arrival"].min():
            trend = self.stability()
            trend = {k: trend[k] for k in keys}
        else:   # one batch of simultaneous jobs: no horizon, no trend
            trend = dict.fromkeys(keys, float("nan"))
        return {
            "scheduler": self.scheduler,
            "n_jobs": len(j),
            "avg_jct": float(j["jct"].mean()),
            "p95_jct": float(j["jct"].quantile(0.95)),
            "avg_jwt": float(j["jwt"].mean()),
            "avg_jrt": float(j["jrt"].mean()),
            "avg_slowdown": float(j["slowdown"].mean()),
            "p95_slowdown": float(j["slowdown"].quantile(0.95)),
            "contended_frac": float(j["contended"].mean()),
            "utilization": self.utilization,
            "fragmentation": self.fragmentation,
            "network_blocked": self.network_blocked,
            "jain": self.jain,
            "max_link_util": float((self.link_peak / cap).max()),
            "makespan": float(j["finish"].max()),
            "flows_solved": self.flows_solved,
            "solve_seconds": self.solve_seconds,
            "wall_seconds": self.wall_seconds,
            **trend,
            "simulated": True,
        }

    def plot(self, axes=None):
        """Slowdown CDF, GPU utilisation over time and peak link loads; returns the figure."""
        import matplotlib.pyplot as plt

        if axes is None:
            fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        else:
            fig = axes[0].figure
        sd = np.sort(self.jobs["slowdown"].to_numpy())
        axes[0].step(sd, np.arange(1, len(sd) + 1) / len(sd), where="post")
        axes[0].set(xlabel="slowdown vs alone at line rate", ylabel="CDF of jobs",
                    title=f"{self.scheduler}: job slowdown")
        tl = self.timeline
        axes[1].step(tl["time"] / 3600, tl["busy_gpus"] / self.cluster.n_gpus, where="post")
        axes[1].set(xlabel="time (h)", ylabel="busy GPU share", title="utilisation")
        n = 2 * self.cluster.n_gpus
        axes[2].hist(self.link_peak[n:] / self.cluster.link_gbps, bins=20)
        axes[2].set(xlabel="peak load / capacity", ylabel="leaf-spine links",
                    title="peak link load")
        fig.tight_layout()
        return fig


def steady_rates(cluster: LeafSpine, jobs, scheduler="ecmp", seed: int = 0,
                 **ecmp) -> pd.DataFrame:
    """Place ``jobs`` in arrival (else row) order on an empty cluster and solve their rates.

    A snapshot of all jobs communicating at once (the testbed experiment of concurrent jobs);
    ``arrival`` and ``duration`` may be omitted. Jobs that do not fit get ``placed = False``.
    ``ecmp``: the ECMP knobs ``qps`` and ``adaptive`` of an ECMP-routed policy.

    Returns
    -------
    DataFrame
        ``job_id, n_gpus, placed, n_leaves, rate_frac`` (rate / line rate), ``alone_frac`` (its
        rate alone on the same placement), ``contended`` (slower than alone: other jobs),
        ``slowed`` (below line rate for any reason: ECMP collisions, unbalanced rings, other
        jobs) and ``throughput_frac`` (training
        throughput relative to alone at line rate, ``1 / ((1 - rho) + rho / rate_frac)``).
    """
    jobs = pd.DataFrame(jobs) if not isinstance(jobs, pd.DataFrame) else jobs.copy()
    for col, default in (("arrival", 0.0), ("duration", 1.0)):
        if col not in jobs.columns:
            jobs[col] = default
    jobs = check_jobs(jobs, cluster)
    sched = make_scheduler(scheduler, seed, **ecmp)
    state = ClusterState(cluster)
    capacity = cluster.capacity
    C = float(cluster.link_gbps)
    rows, cols = [], []
    for i, r in enumerate(jobs.itertuples(index=False)):
        p = sched.place(state, i, int(r.n_gpus))
        row = {"job_id": r.job_id, "n_gpus": int(r.n_gpus), "placed": p is not None,
               "n_leaves": 0, "rate_frac": np.nan, "alone_frac": np.nan}
        if p is not None:
            state.commit(p)
            uniq, w, _ = job_load(cluster, p, r.pattern, sched.routing)
            row["n_leaves"] = len(np.unique(cluster.leaf_of(p.gpus)))
            row["alone_frac"] = 1.0
            if uniq.size:
                W1 = sp.csc_matrix((w, uniq, [0, uniq.size]), shape=(cluster.n_links, 1))
                row["alone_frac"] = max_min_rates(W1, capacity)[0][0] / C
            cols.append((len(rows), uniq, w))
        row["rho"] = float(r.comm_fraction)
        rows.append(row)
    net = [c for c in cols if c[1].size]
    out = pd.DataFrame(rows)
    out.loc[[c[0] for c in cols], "rate_frac"] = 1.0
    if net:
        indptr = np.r_[0, np.cumsum([c[1].size for c in net])]
        W = sp.csc_matrix((np.concatenate([c[2] for c in net]),
                           np.concatenate([c[1] for c in net]), indptr),
                          shape=(cluster.n_links, len(net)))
        rates, _ = max_min_rates(W, capacity)
        out.loc[[c[0] for c in net], "rate_frac"] = rates / C
    out["contended"] = out["placed"] & (out["rate_frac"] < out["alone_frac"] * (1 - 1e-9))
    out["slowed"] = out["placed"] & (out["rate_frac"] < 1 - 1e-9)
    out["throughput_frac"] = 1.0 / ((1 - out["rho"]) + out["rho"] / out["rate_frac"])
    return out.drop(columns="rho")


def _fits_without_network(sched, state, n) -> bool:
    """Would ``sched`` place ``n`` GPUs if no link or OCS port were reserved?"""
    free_net = ClusterState(state.cluster)
    free_net.gpu_owner = state.gpu_owner
    return sched.place(free_net, -1, n) is not None


def _feasible_alone(scheduler, cluster, jobs):
    empty = ClusterState(cluster)
    for n in np.unique(jobs["n_gpus"]):
        if scheduler.place(empty, -1, int(n)) is None:
            r = int(np.flatnonzero(jobs["n_gpus"].to_numpy() == n)[0])
            raise ValueError(f"job {jobs['job_id'].iloc[r]} ({n} GPUs) can never be placed by "
                             f"{scheduler.name!r} on this cluster")


def simulate_cluster(cluster: LeafSpine, jobs, scheduler="vclos", seed: int = 0, *,
                     backfill: bool = False, **ecmp) -> Result:
    """Simulate FIFO scheduling of ``jobs`` on ``cluster`` with a placement policy.

    Parameters
    ----------
    cluster : LeafSpine
    jobs : DataFrame or iterable of dict
        See :func:`check_jobs`.
    scheduler : str or scheduler object
        ``"ecmp"``, ``"bestfit"``, ``"vclos-ecmp"``, ``"vclos"``, ``"ocs-vclos"``, ``"ideal"``
        (see ``causalkit.systems.netsched.schedulers``).
    seed : int
        ECMP hash seed.
    backfill : bool
        If True a blocked queue head lets later jobs that fit start first.
    **ecmp
        ECMP knobs ``qps`` and ``adaptive`` of an ECMP-routed policy given by name
        (:class:`~causalkit.systems.netsched.ECMP`).

    Returns
    -------
    Result
    """
    t_wall = time.perf_counter()
    jobs = check_jobs(jobs, cluster)
    sched = make_scheduler(scheduler, seed, **ecmp)
    _feasible_alone(sched, cluster, jobs)
    n = len(jobs)
    arrival = jobs["arrival"].to_numpy(float)
    size = jobs["n_gpus"].to_numpy(np.int64)
    dur = jobs["duration"].to_numpy(float)
    rho = jobs["comm_fraction"].to_numpy(float)
    pattern = jobs["pattern"].to_numpy()
    ids = jobs["job_id"].to_numpy()
    C = float(cluster.link_gbps)
    reconfig = float(getattr(sched, "reconfig_s", 0.0))

    state = ClusterState(cluster)
    rem = np.zeros(n)
    prog = np.zeros(n)
    rate = np.full(n, C)
    alone = np.full(n, C)
    min_rate = np.full(n, C)
    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    n_leaves = np.zeros(n, np.int64)
    loads: dict[int, tuple] = {}
    placements = {}
    running: list[int] = []
    queue: deque[int] = deque()
    link_peak = np.zeros(cluster.n_links)
    capacity = cluster.capacity
    stats = {"solves": 0, "flows": 0, "seconds": 0.0}
    times, busy_log, queue_log = [], [], []
    busy_area = frag_time = net_time = 0.0
    net_blocked = False
    busy = 0
    t = 0.0
    nxt = 0

    def solve_rates():
        net = [j for j in running if loads[j][0].size]
        for j in running:
            if not loads[j][0].size:
                rate[j] = C
        if not net:
            return
        t0 = time.perf_counter()
        cols = [loads[j] for j in net]
        indptr = np.r_[0, np.cumsum([c[0].size for c in cols])]
        W = sp.csc_matrix((np.concatenate([c[1] for c in cols]),
                           np.concatenate([c[0] for c in cols]), indptr),
                          shape=(cluster.n_links, len(net)))
        r, _ = max_min_rates(W, capacity)
        np.maximum(link_peak, W @ r, out=link_peak)
        rate[net] = r
        stats["solves"] += 1
        stats["flows"] += sum(c[2] for c in cols)
        stats["seconds"] += time.perf_counter() - t0

    def progress(j):
        return 1.0 / ((1.0 - rho[j]) + rho[j] * C / rate[j])

    def try_start() -> bool:
        nonlocal busy
        started = False
        i = 0
        while i < len(queue):
            j = queue[i]
            p = sched.place(state, j, int(size[j])) if size[j] <= state.n_free else None
            if p is None:
                if not backfill:
                    break
                i += 1
                continue
            state.commit(p)
            del queue[i]
            placements[ids[j]] = p
            uniq, w, nf = job_load(cluster, p, pattern[j], sched.routing)
            loads[j] = (uniq, w, nf)
            if uniq.size:
                W1 = sp.csc_matrix((w, uniq, [0, uniq.size]), shape=(cluster.n_links, 1))
                alone[j] = max_min_rates(W1, capacity)[0][0]
            n_leaves[j] = len(np.unique(cluster.leaf_of(p.gpus)))
            start[j] = t
            rem[j] = dur[j] + (reconfig if p.circuits else 0.0)
            running.append(j)
            busy += int(size[j])
            started = True
        return started

    while nxt < n or queue or running:
        t_arr = arrival[nxt] if nxt < n else np.inf
        if running:
            ra = np.asarray(running)
            eta = rem[ra] / prog[ra]
            k = int(np.argmin(eta))
            t_done = t + eta[k]
        else:
            t_done = np.inf
        t_next = min(t_arr, t_done)
        if not np.isfinite(t_next):
            raise RuntimeError("queued jobs can never start (scheduler deadlock)")
        dt = t_next - t
        busy_area += busy * dt
        if queue and size[queue[0]] <= cluster.n_gpus - busy:
            frag_time += dt
            net_time += dt if net_blocked else 0.0
        if running:
            rem[ra] -= prog[ra] * dt
            if t_done <= t_arr:
                rem[ra[k]] = 0.0
        t = t_next
        changed = False
        for j in [j for j in running if rem[j] <= 1e-9 * max(dur[j], 1.0)]:
            running.remove(j)
            state.release(placements[ids[j]])
            finish[j] = t
            busy -= int(size[j])
            changed = True
        while nxt < n and arrival[nxt] <= t:
            queue.append(nxt)
            nxt += 1
        changed |= try_start()
        net_blocked = bool(queue) and size[queue[0]] <= state.n_free \
            and _fits_without_network(sched, state, int(size[queue[0]]))
        if changed:
            solve_rates()
            for j in running:
                prog[j] = progress(j)
                min_rate[j] = min(min_rate[j], rate[j])
        times.append(t)
        busy_log.append(busy)
        queue_log.append(len(queue))

    out = jobs.copy()
    out["start"], out["finish"] = start, finish
    out["jct"] = finish - arrival
    out["jwt"] = start - arrival
    out["jrt"] = finish - start
    out["slowdown"] = out["jrt"] / dur
    out["n_leaves"] = n_leaves
    out["min_rate_frac"] = min_rate / C
    out["contended"] = min_rate < alone * (1 - 1e-9)
    makespan = float(np.nanmax(finish))
    return Result(
        cluster=cluster, scheduler=getattr(sched, "name", type(sched).__name__), jobs=out,
        link_peak=link_peak,
        timeline=pd.DataFrame({"time": times, "busy_gpus": busy_log, "queued": queue_log}),
        utilization=float(busy_area / (cluster.n_gpus * makespan)) if makespan > 0 else 0.0,
        fragmentation=float(frag_time / makespan) if makespan > 0 else 0.0,
        network_blocked=float(net_time / makespan) if makespan > 0 else 0.0,
        placements=placements, n_solves=stats["solves"], flows_solved=stats["flows"],
        solve_seconds=stats["seconds"], wall_seconds=time.perf_counter() - t_wall,
    )
