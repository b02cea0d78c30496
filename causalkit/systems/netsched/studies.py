"""Simulation studies of the vClos driver (all on the simulated cluster), run with
:func:`causalkit.simulation.run_study` (incremental result files, resume).

``collision``
    ECMP collision probability: Monte Carlo over the package's ECMP hash vs the closed form
    ``S!/((S-k)! S^k)``; every replication gives an estimate with a Wilson 95% interval, so the
    summary reports bias and interval coverage.
``testbed``
    A 32-GPU testbed twin (4 leaves x 8 GPUs x 8 spines): 2-8 concurrent jobs placed first-fit
    with ECMP, or by vClos, all communicating at once; per trial the mean training-throughput
    loss, the share of multi-leaf jobs slowed below line rate and the largest loss.
``large``
    A 1,024-GPU cluster (128 leaves x 8 GPUs x 8 spines) running thousands of synthetic jobs at
    several offered loads: average JCT / queueing delay of ECMP, best fit, vClos and OCS-vClos.
    ``truth`` is the average JCT of the ideal fabric (no network constraints), so ``bias`` is the
    excess JCT over the no-contention optimum.

Each study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``) and returns its summary table.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.systems.netsched.routing import collision_free_probability, ecmp_collision_trials
from causalkit.systems.netsched.sim import simulate_cluster, steady_rates
from causalkit.systems.netsched.topology import LeafSpine
from causalkit.systems.netsched.traces import assign_models, synthetic_trace

__all__ = ["COLLISION_CASES", "collision", "testbed", "large", "paired_change",
           "wilson_interval"]

#: (flows k, uplinks S) of the collision study.
COLLISION_CASES = ((2, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 32))
LARGE_SCHEDULERS = ("ecmp", "bestfit", "vclos", "ocs-vclos")


def wilson_interval(p: float, n: int, z: float = 1.959963984540054):
    """Wilson score interval of a binomial proportion (Wilson, JASA 1927)."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return centre - half, centre + half


def _part(out, tag):
    if out is None:
        return None
    out = Path(out)
    return out.with_name(f"{out.stem}_{tag}{out.suffix or '.csv'}")


def _run(design, estimators, reps, seed, n_jobs, backend, scheduler, out):
    from causalkit.simulation import run_study
    return run_study(design, estimators, reps, seed, n_jobs=n_jobs, backend=backend,
                     scheduler=scheduler, out=out, progress=False)


# collision -------------------------------------------------------------------------------------
def _collision_design(rng, k, spines):
    return {"truth": collision_free_probability(k, spines), "k": k, "spines": spines,
            "seed": int(rng.integers(2**31))}


def _collision_estimate(data, trials):
    mc = ecmp_collision_trials(data["k"], data["spines"], trials, data["seed"])
    lo, hi = wilson_interval(mc["p_free"], trials)
    return {"estimate": mc["p_free"], "std_error": mc["se"], "ci_lower": lo, "ci_upper": hi,
            "mean_max_load": mc["mean_max_load"]}


def collision(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
              quick=False) -> pd.DataFrame:
    """ECMP collision-free probability: Monte Carlo vs closed form, with interval coverage."""
    from causalkit.simulation import summarize
    reps = reps or (20 if quick else 200)
    trials = 2000 if quick else 20000
    rows = []
    for k, s in COLLISION_CASES:
        res = _run(partial(_collision_design, k=k, spines=s),
                   {"ecmp_mc": partial(_collision_estimate, trials=trials)},
                   reps, seed, n_jobs, backend, scheduler, _part(out, f"k{k}_S{s}"))
        summ = summarize(res).reset_index(drop=True).iloc[0]
        rows.append({"k": k, "spines": s, "closed_form": collision_free_probability(k, s),
                     "mc_mean": summ["mean_estimate"], "bias": summ["bias"],
                     "mc_se_bias": summ["mc_se_bias"], "coverage": summ["coverage"],
                     "mean_max_load": res["mean_max_load"].mean(), "reps": reps,
                     "trials_per_rep": trials})
    return pd.DataFrame(rows)


# testbed twin ----------------------------------------------------------------------------------
TWIN = LeafSpine(leaves=4, spines=8, gpus_per_leaf=8)


def _twin_design(rng, cluster=TWIN):
    k = int(rng.integers(2, 9))
    sizes, total = [], 0
    for _ in range(64):
        n = int(rng.choice([2, 4, 8, 16], p=[0.2, 0.3, 0.3, 0.2]))
        if total + n <= cluster.n_gpus:
            sizes.append(n)
            total += n
        if len(sizes) == k:
            break
    jobs = assign_models(pd.DataFrame({"job_id": np.arange(len(sizes)), "n_gpus": sizes}),
                         random_state=rng)
    return {"truth": 0.0, "jobs": jobs, "seed": int(rng.integers(2**31)), "cluster": cluster}


def _twin_estimate(data, policy):
    out = steady_rates(data["cluster"], data["jobs"], policy, seed=data["seed"])
    placed = out[out["placed"]]
    multi = placed[placed["n_leaves"] > 1]
    loss = 1 - placed["throughput_frac"]
    return {"estimate": float(loss.mean()),
            "max_loss": float(loss.max()),
            "max_rate_loss": float(1 - placed["rate_frac"].min()),
            "slowed_frac": float(multi["slowed"].mean()) if len(multi) else 0.0,
            "contended_frac": float(multi["contended"].mean()) if len(multi) else 0.0,
            "any_slowed": float(placed["slowed"].any()),
            "multi_leaf_jobs": float(len(multi)),
            "placed_frac": float(out["placed"].mean()),
            "jobs": float(len(out))}


def testbed(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
            quick=False) -> pd.DataFrame:
    """Collision slowdown on the 32-GPU testbed twin: ECMP (first fit) vs vClos."""
    reps = reps or (30 if quick else 2000)
    res = _run(_twin_design, {p: partial(_twin_estimate, policy=p) for p in ("ecmp", "vclos")},
               reps, seed, n_jobs, backend, scheduler, out)
    rows = []
    for name, g in res.groupby("estimator", sort=True):
        rows.append({"policy": name, "trials": len(g),
                     "mean_throughput_loss": g["estimate"].mean(),
                     "se_mean_throughput_loss": g["estimate"].std(ddof=1) / math.sqrt(len(g)),
                     "p_multi_leaf_job_slowed": (g["slowed_frac"] * g["multi_leaf_jobs"]).sum()
                     / max(g["multi_leaf_jobs"].sum(), 1),
                     "p_multi_leaf_job_contended": (g["contended_frac"] * g["multi_leaf_jobs"]
                                                    ).sum() / max(g["multi_leaf_jobs"].sum(), 1),
                     "p_trial_any_slowed": g["any_slowed"].mean(),
                     "max_throughput_loss": g["max_loss"].max(),
                     "p95_trial_max_loss": g["max_loss"].quantile(0.95),
                     "max_rate_loss": g["max_rate_loss"].max(),
                     "placed_frac": g["placed_frac"].mean()})
    return pd.DataFrame(rows)


# large simulation ------------------------------------------------------------------------------
def _large_design(rng, cluster, n_jobs, load):
    jobs = synthetic_trace(n_jobs, cluster, load, random_state=rng)
    ideal = simulate_cluster(cluster, jobs, "ideal")
    seed = int(rng.integers(2**31))
    offered = (jobs["n_gpus"] * jobs["duration"]).sum() / (cluster.n_gpus * jobs["arrival"].max())
    return {"truth": float(ideal.jobs["jct"].mean()), "jobs": jobs, "cluster": cluster,
            "seed": seed, "ideal_jwt": float(ideal.jobs["jwt"].mean()),
            "offered_load": float(offered)}


def _large_estimate(data, policy):
    c = data["cluster"].with_ocs(policy == "ocs-vclos")
    s = simulate_cluster(c, data["jobs"], policy, seed=data["seed"]).to_dict()
    keep = ("avg_jwt", "p95_jct", "avg_slowdown", "utilization", "fragmentation",
            "network_blocked", "jain",
            "contended_frac", "makespan", "wall_seconds", "flows_solved")
    return {"estimate": s["avg_jct"], **{k: float(s[k]) for k in keep},
            "ideal_jwt": data["ideal_jwt"], "offered_load": data["offered_load"]}


def paired_change(a, b) -> dict:
    """Relative change of the mean, ``mean(b) / mean(a) - 1``, over paired replications.

    Delta-method SE of a ratio of paired means: with ``R = mean(b) / mean(a)`` and
    ``d_i = b_i - R a_i``, ``SE(R) = sd(d) / (sqrt(n) mean(a))``; 95% t interval (n - 1 df).
    """
    from scipy import stats
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = len(a)
    if n == 0 or a.mean() <= 0:
        nan = float("nan")
        return {"change": nan, "se": nan, "ci_lower": nan, "ci_upper": nan, "reps": n}
    ratio = b.mean() / a.mean()
    se = (b - ratio * a).std(ddof=1) / (math.sqrt(n) * a.mean()) if n > 1 else float("nan")
    q = stats.t.ppf(0.975, n - 1) if n > 1 else float("nan")
    return {"change": float(ratio - 1), "se": float(se), "ci_lower": float(ratio - 1 - q * se),
            "ci_upper": float(ratio - 1 + q * se), "reps": n}


def large(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
          quick=False, loads=None) -> pd.DataFrame:
    """Average JCT and queueing delay across loads on the 1,024-GPU cluster (or 128 in quick)."""
    if quick:
        cluster, n, loads, reps = LeafSpine(16, 8, 8), 150, loads or (0.5, 0.9), reps or 2
    else:
        cluster, n, loads, reps = LeafSpine(128, 8, 8), 2000, \
            loads or (0.1, 0.3, 0.5, 0.7, 0.9), reps or 5
    frames = []
    for load in loads:
        res = _run(partial(_large_design, cluster=cluster, n_jobs=n, load=load),
                   {p: partial(_large_estimate, policy=p) for p in LARGE_SCHEDULERS},
                   reps, seed, n_jobs, backend, scheduler, _part(out, f"load{load:g}"))
        frames.append(res.assign(load=load))
    return large_summary(pd.concat(frames, ignore_index=True), cluster.n_gpus, n)


def large_summary(res: pd.DataFrame, n_gpus: int, n_jobs: int) -> pd.DataFrame:
    """Per (load, scheduler): mean metrics with SEs and paired changes vs ECMP and vClos."""
    rows = []
    for load, g in res.groupby("load", sort=True):
        wide = {name: gg.sort_values("rep") for name, gg in g.groupby("estimator")}
        for name, gg in wide.items():
            r = len(gg)
            row = {"load": load, "scheduler": name, "reps": r, "n_gpus": n_gpus,
                   "n_jobs": n_jobs,
                   "avg_jct_h": gg["estimate"].mean() / 3600,
                   "se_avg_jct_h": gg["estimate"].std(ddof=1) / math.sqrt(r) / 3600,
                   "avg_jwt_h": gg["avg_jwt"].mean() / 3600,
                   "se_avg_jwt_h": gg["avg_jwt"].std(ddof=1) / math.sqrt(r) / 3600,
                   "ideal_jct_h": gg["truth"].mean() / 3600,
                   "ideal_jwt_h": gg["ideal_jwt"].mean() / 3600,
                   "jct_over_ideal": (gg["estimate"] / gg["truth"]).mean() - 1,
                   "realised_offered_load": gg["offered_load"].mean(),
                   "avg_slowdown": gg["avg_slowdown"].mean(),
                   "utilization": gg["utilization"].mean(),
                   "fragmentation": gg["fragmentation"].mean(),
                   "network_blocked": gg["network_blocked"].mean(),
                   "jain": gg["jain"].mean(),
                   "contended_frac": gg["contended_frac"].mean(),
                   "sim_seconds": gg["wall_seconds"].mean()}
            for base in ("ecmp", "bestfit", "vclos"):
                if base in wide and base != name:
                    for metric, col in (("jct", "estimate"), ("jwt", "avg_jwt")):
                        pc = paired_change(wide[base][col].to_numpy(), gg[col].to_numpy())
                        row[f"{metric}_vs_{base}"] = pc["change"]
                        row[f"{metric}_vs_{base}_se"] = pc["se"]
            rows.append(row)
    return pd.DataFrame(rows)
