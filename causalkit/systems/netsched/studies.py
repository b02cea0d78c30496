"""Simulation studies of the vClos driver (all on the simulated cluster), run with
:func:`causalkit.simulation.run_study` (incremental result files, resume).

``collision``
    ECMP collision probability: Monte Carlo over the package's ECMP hash vs the closed form
    ``S!/((S-k)! S^k)``; every replication gives an estimate with a Wilson 95% interval, so the
    summary reports bias and interval coverage.
``testbed``
    A 32-GPU testbed twin (4 leaves x 8 GPUs x 8 spines): 2-8 concurrent jobs all communicating
    at once, placed and routed by every policy of :data:`TESTBED_POLICIES` (first fit + ECMP at
    1-8 queue pairs per connection and with adaptive routing, best fit + ECMP, vClos placement +
    ECMP, vClos); per trial the mean training-throughput loss, the share of multi-leaf jobs
    slowed below line rate or by other jobs, the largest loss, and the calibration check: the
    rate slowdown of a 16- and a 32-GPU job alone on the empty fabric under the same routing.
``large``
    A 128-GPU cluster (16 leaves x 8 GPUs x 8 spines, jobs of at most a quarter of it) running
    synthetic traces at several offered loads under every policy of :data:`LARGE_POLICIES`.
    Every run gets the queue-stability verdict of :mod:`.stability`; JCT and queueing delay are
    averaged over the jobs arriving after the warm-up, and a paired change between two policies
    is reported only where both are stable in every repetition. ``truth`` is the ideal fabric's
    average JCT (no network constraints), so ``bias`` is the excess over the no-contention ideal.
``fragmentation``
    Cross-leaf jobs that do not fit one leaf (12 and 24 GPUs among 4-GPU jobs) on the 128-GPU
    cluster: where vClos must find the *same* free spines on every leaf it uses and OCS-vClos only
    needs free ports, with the share of time the queue head is blocked by the network alone.

Each study function has the signature of :mod:`causalkit.studies`
(``reps, seed, n_jobs, backend, scheduler, out, quick``), returns its summary table and, given
``out``, writes it beside the results as ``<out stem>_summary.csv``.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.systems.netsched.routing import collision_free_probability, ecmp_collision_trials
from causalkit.systems.netsched.sim import simulate_cluster, steady_rates
from causalkit.systems.netsched.stability import post_warmup
from causalkit.systems.netsched.topology import LeafSpine
from causalkit.systems.netsched.traces import DEFAULT_SIZE_MIX, assign_models, synthetic_trace

__all__ = ["COLLISION_CASES", "TESTBED_POLICIES", "LARGE_POLICIES", "collision", "testbed",
           "large", "fragmentation", "paired_change", "wilson_interval"]

#: (flows k, uplinks S) of the collision study.
COLLISION_CASES = ((2, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 32))
#: Share of the arrival horizon discarded as warm-up in the large and fragmentation studies.
WARMUP = 0.25
#: label -> (scheduler, ECMP knobs) of the testbed-twin study.
TESTBED_POLICIES = {
    "ecmp": ("ecmp", {}), "ecmp-qps2": ("ecmp", {"qps": 2}), "ecmp-qps4": ("ecmp", {"qps": 4}),
    "ecmp-qps8": ("ecmp", {"qps": 8}), "ecmp-adaptive": ("ecmp", {"adaptive": True}),
    "bestfit": ("bestfit", {}), "vclos-ecmp": ("vclos-ecmp", {}), "vclos": ("vclos", {}),
}
#: label -> (scheduler, ECMP knobs) of the large study; ``bestfit`` is the main baseline.
LARGE_POLICIES = {
    "ecmp": ("ecmp", {}), "bestfit": ("bestfit", {}), "bestfit-qps4": ("bestfit", {"qps": 4}),
    "bestfit-adaptive": ("bestfit", {"adaptive": True}), "vclos-ecmp": ("vclos-ecmp", {}),
    "vclos-ecmp-qps4": ("vclos-ecmp", {"qps": 4}), "vclos": ("vclos", {}),
    "ocs-vclos": ("ocs-vclos", {}),
}
#: Baselines every large-study policy is compared with (paired, stable loads only).
BASELINES = ("ecmp", "bestfit", "bestfit-qps4", "bestfit-adaptive", "vclos-ecmp",
             "vclos-ecmp-qps4", "vclos")


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


def _with_summary(table, out):
    """Write the summary table beside the results file (``<out stem>_summary.csv``)."""
    if out is not None:
        table.to_csv(_part(out, "summary").with_suffix(".csv"), index=False)
    return table


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
    return _with_summary(pd.DataFrame(rows), out)


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


def _alone_slowdown(cluster, n, policy, options, seed):
    out = steady_rates(cluster, [{"n_gpus": n}], policy, seed=seed, **options)
    return float(1.0 / out["rate_frac"].iloc[0])


def _twin_estimate(data, policy, options):
    out = steady_rates(data["cluster"], data["jobs"], policy, seed=data["seed"], **options)
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
            "jobs": float(len(out)),
            "alone16_slowdown": _alone_slowdown(data["cluster"], 16, policy, options,
                                                data["seed"]),
            "alone32_slowdown": _alone_slowdown(data["cluster"], 32, policy, options,
                                                data["seed"])}


def testbed(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
            quick=False) -> pd.DataFrame:
    """Collision slowdown on the 32-GPU testbed twin: ECMP knobs, best fit, vClos (calibration)."""
    reps = reps or (10 if quick else 300)
    res = _run(_twin_design, {label: partial(_twin_estimate, policy=p, options=o)
                              for label, (p, o) in TESTBED_POLICIES.items()},
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
                     "placed_frac": g["placed_frac"].mean(),
                     "alone16_slowdown": g["alone16_slowdown"].mean(),
                     "se_alone16_slowdown": g["alone16_slowdown"].std(ddof=1)
                     / math.sqrt(len(g)),
                     "alone32_slowdown": g["alone32_slowdown"].mean(),
                     "se_alone32_slowdown": g["alone32_slowdown"].std(ddof=1)
                     / math.sqrt(len(g))})
    return _with_summary(pd.DataFrame(rows), out)


# large simulation ------------------------------------------------------------------------------
def _quarter_mix(cluster):
    """The default size mix cut at a quarter of the cluster (the 1,024-GPU mix tops at 256)."""
    return {k: v for k, v in DEFAULT_SIZE_MIX.items() if k <= cluster.n_gpus // 4}


def _window_metrics(res, warmup):
    """Averages over the jobs arriving after the warm-up, plus the stability verdict."""
    j = post_warmup(res.jobs, warmup)
    trend = res.stability(warmup=warmup)
    return {"avg_jct": float(j["jct"].mean()), "avg_jwt": float(j["jwt"].mean()),
            "avg_slowdown": float(j["slowdown"].mean()),
            "stable": float(trend["stable"]), "queue_slope_per_h": trend["queue_slope_per_h"],
            "queue_slope_ci_lower": trend["queue_slope_ci_lower"],
            "queue_slope_ci_upper": trend["queue_slope_ci_upper"],
            "jwt_last_over_first": trend["jwt_last_over_first"]}


def _large_design(rng, cluster, n_jobs, load, size_mix=None, warmup=WARMUP):
    jobs = synthetic_trace(n_jobs, cluster, load, random_state=rng,
                           size_mix=size_mix or _quarter_mix(cluster))
    ideal = _window_metrics(simulate_cluster(cluster, jobs, "ideal"), warmup)
    seed = int(rng.integers(2**31))
    offered = (jobs["n_gpus"] * jobs["duration"]).sum() / (cluster.n_gpus * jobs["arrival"].max())
    return {"truth": ideal["avg_jct"], "jobs": jobs, "cluster": cluster, "seed": seed,
            "ideal_jwt": ideal["avg_jwt"], "ideal_stable": ideal["stable"],
            "offered_load": float(offered), "warmup": warmup}


def _large_estimate(data, policy, options):
    c = data["cluster"].with_ocs(policy == "ocs-vclos")
    res = simulate_cluster(c, data["jobs"], policy, seed=data["seed"], **options)
    s = res.to_dict()
    w = _window_metrics(res, data["warmup"])
    keep = ("p95_jct", "utilization", "fragmentation", "network_blocked", "jain",
            "contended_frac", "makespan", "wall_seconds", "flows_solved")
    return {"estimate": w.pop("avg_jct"), **w, **{k: float(s[k]) for k in keep},
            "ideal_jwt": data["ideal_jwt"], "ideal_stable": data["ideal_stable"],
            "offered_load": data["offered_load"]}


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
    """Average JCT and queueing delay across loads on 128 GPUs, stable loads only (64 in quick)."""
    if quick:
        cluster, n, loads, reps = LeafSpine(8, 8, 8), 60, loads or (0.3, 0.9), reps or 2
    else:
        cluster, n, loads, reps = LeafSpine(16, 8, 8), 400, \
            loads or (0.2, 0.3, 0.4, 0.5, 0.7, 0.9), reps or 4
    frames = []
    for load in loads:
        res = _run(partial(_large_design, cluster=cluster, n_jobs=n, load=load),
                   {label: partial(_large_estimate, policy=p, options=o)
                    for label, (p, o) in LARGE_POLICIES.items()},
                   reps, seed, n_jobs, backend, scheduler, _part(out, f"load{load:g}"))
        frames.append(res.assign(load=load))
    return _with_summary(large_summary(pd.concat(frames, ignore_index=True), cluster.n_gpus, n),
                         out)


def _mean_se(x):
    x = np.asarray(x, float)
    return x.mean(), (x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else float("nan"))


def large_summary(res: pd.DataFrame, n_gpus: int, n_jobs: int,
                  baselines=BASELINES) -> pd.DataFrame:
    """Per (load, policy): post-warm-up means with SEs, the stability verdicts and the paired
    changes against every baseline (``jct_vs_B``, ``jwt_vs_B`` and their ``_se``; hyphens of
    ``B`` become underscores), left NaN where either policy is unstable in some repetition."""
    rows = []
    for load, g in res.groupby("load", sort=True):
        wide = {name: gg.sort_values("rep") for name, gg in g.groupby("estimator")}
        stable = {name: bool(gg["stable"].all()) for name, gg in wide.items()}
        for name, gg in wide.items():
            jct, jct_se = _mean_se(gg["estimate"] / 3600)
            jwt, jwt_se = _mean_se(gg["avg_jwt"] / 3600)
            row = {"load": load, "scheduler": name, "reps": len(gg), "n_gpus": n_gpus,
                   "n_jobs": n_jobs, "stable": stable[name],
                   "stable_reps": int(gg["stable"].sum()),
                   "status": "stable" if stable[name] else "unstable",
                   "queue_slope_per_h": gg["queue_slope_per_h"].mean(),
                   "queue_slope_ci_lower_min": gg["queue_slope_ci_lower"].min(),
                   "jwt_last_over_first": gg["jwt_last_over_first"].mean(),
                   "avg_jct_h": jct, "se_avg_jct_h": jct_se,
                   "avg_jwt_h": jwt, "se_avg_jwt_h": jwt_se,
                   "ideal_jct_h": gg["truth"].mean() / 3600,
                   "ideal_jwt_h": gg["ideal_jwt"].mean() / 3600,
                   "ideal_stable": bool(gg["ideal_stable"].all()),
                   "jct_over_ideal": (gg["estimate"] / gg["truth"]).mean() - 1,
                   "realised_offered_load": gg["offered_load"].mean(),
                   "avg_slowdown": gg["avg_slowdown"].mean(),
                   "utilization": gg["utilization"].mean(),
                   "fragmentation": gg["fragmentation"].mean(),
                   "network_blocked": gg["network_blocked"].mean(),
                   "jain": gg["jain"].mean(),
                   "contended_frac": gg["contended_frac"].mean(),
                   "sim_seconds": gg["wall_seconds"].mean()}
            for base in baselines:
                if base not in wide or base == name:
                    continue
                both = stable[base] and stable[name]
                for metric, col in (("jct", "estimate"), ("jwt", "avg_jwt")):
                    pc = paired_change(wide[base][col].to_numpy(), gg[col].to_numpy())
                    key = f"{metric}_vs_{base.replace('-', '_')}"
                    row[key] = pc["change"] if both else float("nan")
                    row[f"{key}_se"] = pc["se"] if both else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


# fragmentation ---------------------------------------------------------------------------------
#: Job sizes of the fragmentation scenario: 10-, 12- and 20-GPU jobs never fit one 8-GPU leaf,
#: and none but 6 and 12 split evenly over spine-aligned power-of-two groups.
FRAGMENTATION_MIX = {6: 0.3, 10: 0.3, 12: 0.2, 20: 0.2}
FRAGMENTATION_POLICIES = {"bestfit-adaptive": ("bestfit", {"adaptive": True}),
                          "vclos": ("vclos", {}), "ocs-vclos": ("ocs-vclos", {})}


def fragmentation(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
                  quick=False, loads=None) -> pd.DataFrame:
    """Cross-leaf jobs on 128 GPUs, non-blocking (8 spines) and 2:1 (4 spines): OCS vs vClos."""
    if quick:
        leaves, n, loads, reps = 8, 60, loads or (0.6,), reps or 2
    else:
        leaves, n, loads, reps = 16, 300, loads or (0.4, 0.6), reps or 3
    tables = []
    for spines in (8, 4):
        cluster = LeafSpine(leaves, spines, 8)
        frames = []
        for load in loads:
            res = _run(partial(_large_design, cluster=cluster, n_jobs=n, load=load,
                               size_mix=FRAGMENTATION_MIX),
                       {label: partial(_large_estimate, policy=p, options=o)
                        for label, (p, o) in FRAGMENTATION_POLICIES.items()},
                       reps, seed, n_jobs, backend, scheduler,
                       _part(out, f"S{spines}_load{load:g}"))
            frames.append(res.assign(load=load))
        table = large_summary(pd.concat(frames, ignore_index=True), cluster.n_gpus, n,
                              baselines=("bestfit-adaptive", "vclos"))
        tables.append(table.assign(spines=spines))
    return _with_summary(pd.concat(tables, ignore_index=True), out)
