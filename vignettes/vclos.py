# %% [markdown]
# # vClos: isolated virtual Clos networks for multi-tenant GPU clusters
#
# In a leaf-spine GPU cluster shared by many training jobs, ECMP hashes each flow onto an uplink
# independently of the other jobs, so flows of different jobs collide, and a ring collective runs
# at the speed of its slowest flow. vClos (Zhao et al., Computer Networks 2025; arXiv
# 2308.05692) gives every job an exclusive *virtual Clos*, a set of leaves and spines with
# source routing by local GPU index, and OCS-vClos builds the same per job with optical circuit
# switches. The paper's question: how much shorter are job completion times (JCT) when the
# network is isolated per job instead of shared under ECMP?
#
# `causalkit.systems.netsched` is a **simulated** cluster: a flow-level, event-driven model with
# max-min fair rates. No switch or GPU is driven; every number here comes from the model.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from causalkit.simulation import load_results
from causalkit.systems.netsched import (
    LeafSpine,
    collision_free_probability,
    ecmp_collision_trials,
    simulate_cluster,
    synthetic_trace,
)
from causalkit.systems.papers import paper_comparison, results_dir

QUICK = os.environ.get("CAUSALKIT_QUICK") == "1"
N_JOBS = 150 if QUICK else 300
RESULTS = results_dir("vclos")
pd.set_option("display.max_colwidth", None)
pd.set_option("display.width", 120)

# %% [markdown]
# ## Why ECMP collides
#
# With k flows hashed independently onto S uplinks, the chance that no two share one is
# S! / ((S - k)! S^k). The driver's ECMP hash reproduces it by Monte Carlo:

# %%
for k, spines in ((2, 2), (4, 8), (8, 8), (8, 16)):
    mc = ecmp_collision_trials(k, spines, 20_000, random_state=0)
    print(f"k = {k:2d} flows on S = {spines:2d} uplinks: closed form "
          f"{collision_free_probability(k, spines):.4f}, Monte Carlo {mc['p_free']:.4f}")

# %% [markdown]
# ## The driver at quick size
#
# A 128-GPU cluster (16 leaves of 8 GPUs, 8 spines) runs one synthetic trace of jobs at an
# offered load of 0.7 under four schedulers: first fit + ECMP, best-fit consolidation + ECMP,
# vClos, and OCS-vClos (with an optical layer between leaves and spines). "Slowdown" is a job's
# running time over its running time alone at line rate.

# %%
cluster = LeafSpine(leaves=16, spines=8, gpus_per_leaf=8)
jobs = synthetic_trace(N_JOBS, cluster, load=0.7, random_state=0)
runs = {name: simulate_cluster(cluster.with_ocs(name == "ocs-vclos"), jobs, name, seed=0)
        for name in ("ecmp", "bestfit", "vclos", "ocs-vclos")}
quick = pd.DataFrame([r.to_dict() for r in runs.values()]).set_index("scheduler")
quick[["avg_jct", "avg_jwt"]] /= 3600
quick[["n_jobs", "avg_jct", "avg_jwt", "avg_slowdown", "contended_frac", "utilization",
       "wall_seconds"]].round(3).rename(columns={"avg_jct": "avg_jct_h", "avg_jwt": "avg_jwt_h"})

# %% [markdown]
# The ECMP run in detail: the slowdown of each job, the share of busy GPUs over time and the
# peak load of every leaf-spine link (`Result.plot`).

# %%
runs["ecmp"].plot()
plt.show()

# %%
fig, ax = plt.subplots(figsize=(6, 3.6))
for name, res in runs.items():
    sd = np.sort(res.jobs["slowdown"].to_numpy())
    ax.step(sd, np.arange(1, len(sd) + 1) / len(sd), where="post", label=name)
ax.set(xscale="log", xlabel="slowdown vs alone at line rate", ylabel="CDF of jobs",
       title=f"{N_JOBS} jobs, 128 GPUs, load 0.7 (simulated)")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The committed study
#
# `simulations/vclos.py` (studies `vclos-collision`, `vclos-testbed`, `vclos-large`) ran the
# collision check, a 32-GPU testbed twin with 2 to 8 concurrent jobs, and a 1,024-GPU cluster
# with thousands of jobs per trace at offered loads from 0.1 to 0.9. The figures below are drawn
# from its result files.

# %%
collision = pd.read_csv(RESULTS / "collision.csv")
testbed_raw = load_results(RESULTS / "raw" / "testbed.jsonl")
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
x = np.arange(len(collision))
axes[0].bar(x - 0.2, collision["closed_form"], 0.4, label="closed form")
axes[0].bar(x + 0.2, collision["mc_mean"], 0.4, label="ECMP Monte Carlo")
axes[0].set_xticks(x, [f"k={k}\nS={s}" for k, s in zip(collision["k"], collision["spines"],
                                                       strict=True)])
axes[0].set(ylabel="P(no uplink collision)", title="ECMP collision-free probability")
axes[0].legend(fontsize=8)
for name, g in testbed_raw.groupby("estimator"):
    v = np.sort(g["max_loss"].to_numpy())
    axes[1].step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=name)
axes[1].set(xlabel="largest training-throughput loss in a trial", ylabel="CDF of trials",
            title=f"32-GPU testbed twin, {testbed_raw['rep'].nunique()} trials (simulated)")
axes[1].legend()
fig.tight_layout()
plt.show()

# %%
large = pd.read_csv(RESULTS / "large.csv")
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for name, g in large.groupby("scheduler"):
    g = g.sort_values("load")
    axes[0].errorbar(g["load"], g["avg_jct_h"], yerr=1.96 * g["se_avg_jct_h"], marker="o",
                     capsize=3, label=name)
    axes[1].errorbar(g["load"], g["avg_jwt_h"] + 1e-3, yerr=1.96 * g["se_avg_jwt_h"],
                     marker="o", capsize=3, label=name)
ideal = large.groupby("load")["ideal_jct_h"].mean()
axes[0].plot(ideal.index, ideal.values, "k--", label="ideal fabric")
axes[0].set(xlabel="offered GPU load", ylabel="average JCT (h)", yscale="log",
            title=f"{int(large['n_gpus'].iloc[0]):,}-GPU leaf-spine (simulated): JCT")
axes[1].set(xlabel="offered GPU load", ylabel="average queueing delay + 0.001 (h)",
            yscale="log", title="queueing delay")
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()
large[["load", "scheduler", "avg_jct_h", "avg_jwt_h", "jct_over_ideal", "jct_vs_ecmp",
       "jct_vs_bestfit"]].round(3)

# %% [markdown]
# ## Against the paper
#
# The paper's numbers come from the project's research note (`shift_vclos.md`): `P` is the
# journal abstract, `S` third-party reading notes of the arXiv text. Our numbers are read from
# `simulations/results/vclos/` by `causalkit.systems.papers.paper_comparison`.

# %%
table = paper_comparison("vclos")
table.drop(columns="ours")

# %% [markdown]
# What the table does and does not show:
#
# * **The headline JCT cut is not reproduced as a like-for-like number.** Our cut against
#   first fit + ECMP at the heaviest load is larger than the paper's, and issue 21 found why:
#   at that load the ECMP queue is not stable (its queueing delay keeps growing over the trace),
#   so the cut depends on how many jobs the trace has. It is an artifact of an overloaded queue,
#   not a property of the fabric.
# * **The ECMP baseline is not the strongest one.** It pairs ECMP routing with first-fit
#   placement, so routing and placement are confounded; best-fit consolidation + ECMP (the
#   row marked "closer") is the fairer comparison, and it is still run at a load where ECMP
#   queues grow. Under the ECMP model a job alone on an empty fabric already runs slower than
#   at line rate (one flow per channel, progress at the slowest flow).
# * **OCS-vClos is not better than vClos here**: equal at light load and slightly worse at
#   the heaviest (last row), which is unexplained.
# * The testbed-twin rows measure our model's ECMP collisions; the paper's definition of its
#   contention rate is unknown, so only the row "slowed by other jobs" is comparable in spirit.
#
# Everything is simulated: the numbers say what the flow-level model predicts for a
# leaf-spine fabric, not what a switch did.
