"""vClos study on the simulated leaf-spine cluster (causalkit.systems.netsched).

Parts (all simulated; nothing runs on real switches or GPUs):

1. ``collision``: ECMP collision-free probability, Monte Carlo of the package's hash vs the closed
   form S!/((S-k)! S^k), with Wilson-interval coverage.
2. ``testbed``: 32-GPU testbed twin (4 leaves x 8 GPUs x 8 spines), 2-8 concurrent jobs,
   throughput loss from collisions under first fit + ECMP vs vClos.
3. ``large``: 1,024 GPUs (128 leaves x 8 x 8 spines), 2,000 jobs per trace, offered loads
   0.3-0.9: average JCT and queueing delay of ECMP, best fit, vClos and OCS-vClos, plus the
   no-contention ideal; side by side with the published numbers.

Usage::

    python simulations/vclos.py            # full size, writes simulations/results/vclos/
    python simulations/vclos.py --quick    # seconds; writes simulations/results/vclos/quick/

Replications are stored in ``raw/*.jsonl`` as they finish (the experiment engine); a rerun
resumes, ``--overwrite`` starts afresh, and ``MANIFEST.json`` records the provenance.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.simulation import engine_options, load_results
from causalkit.studies import add_study_arguments, write_manifest
from causalkit.systems.netsched import studies

HERE = Path(__file__).resolve().parent

#: Published numbers ([P] journal abstract, [S] third-party reading notes of the arXiv text).
PAPER = {
    "jct_change_vclos_vs_ecmp_heavy": (-0.676, "P: journal abstract, testbed + trace simulation"),
    "jwt_change_ocs_vclos": (-0.6565, "S: notes on arXiv text; baseline not stated"),
    "jct_ocs_vclos_over_ideal": (0.0338, "S: notes on arXiv text"),
    "testbed_contention_probability": (0.315, "S: notes on arXiv text, 32 x V100"),
    "testbed_slowed_probability": (0.315, "S: same number; the paper's definition is unknown"),
    "testbed_max_throughput_loss": (0.60, "S: notes on arXiv text ('up to 60%')"),
}


def _plot_collision(df, path):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    x = np.arange(len(df))
    ax.bar(x - 0.2, df["closed_form"], 0.4, label="closed form S!/((S-k)! S^k)")
    ax.bar(x + 0.2, df["mc_mean"], 0.4, yerr=1.96 * df["mc_se_bias"], label="ECMP Monte Carlo")
    ax.set_xticks(x, [f"k={k}\nS={s}" for k, s in zip(df["k"], df["spines"], strict=True)])
    ax.set(ylabel="P(no uplink collision)", title="ECMP collision-free probability")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_testbed(raw, path):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, g in raw.groupby("estimator"):
        v = np.sort(g["max_loss"].to_numpy())
        ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=name)
    ax.set(xlabel="largest training-throughput loss in a trial", ylabel="CDF of trials",
           title="32-GPU testbed twin: concurrent jobs (simulated)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_large(df, path):
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, g in df.groupby("scheduler"):
        g = g.sort_values("load")
        axes[0].errorbar(g["load"], g["avg_jct_h"], yerr=1.96 * g["se_avg_jct_h"], marker="o",
                         capsize=3, label=name)
        axes[1].errorbar(g["load"], g["avg_jwt_h"], yerr=1.96 * g["se_avg_jwt_h"], marker="o",
                         capsize=3, label=name)
    ideal = df.groupby("load")["ideal_jct_h"].mean()
    axes[0].plot(ideal.index, ideal.values, "k--", label="ideal fabric")
    axes[0].set(xlabel="offered GPU load", ylabel="average JCT (h)", yscale="log")
    axes[1].set(xlabel="offered GPU load", ylabel="average queueing delay (h)", yscale="log")
    n = int(df["n_gpus"].iloc[0])
    axes[0].set_title(f"{n}-GPU leaf-spine (simulated): JCT")
    axes[1].set_title("queueing delay")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _comparison(large, testbed):
    heavy = large[large["load"] == large["load"].max()].set_index("scheduler")
    tb = testbed.set_index("policy")
    ours = {
        "jct_change_vclos_vs_ecmp_heavy": (heavy.loc["vclos", "jct_vs_ecmp"],
                                           heavy.loc["vclos", "jct_vs_ecmp_se"]),
        "jwt_change_ocs_vclos": (heavy.loc["ocs-vclos", "jwt_vs_ecmp"],
                                 heavy.loc["ocs-vclos", "jwt_vs_ecmp_se"]),
        "jct_ocs_vclos_over_ideal": (heavy.loc["ocs-vclos", "jct_over_ideal"], np.nan),
        "testbed_contention_probability": (tb.loc["ecmp", "p_multi_leaf_job_contended"],
                                           np.nan),
        "testbed_slowed_probability": (tb.loc["ecmp", "p_multi_leaf_job_slowed"], np.nan),
        "testbed_max_throughput_loss": (tb.loc["ecmp", "max_throughput_loss"], np.nan),
    }
    setting = {
        "jct_change_vclos_vs_ecmp_heavy": f"load {large['load'].max():g}, vs ECMP first fit",
        "jwt_change_ocs_vclos": f"load {large['load'].max():g}, vs ECMP first fit",
        "jct_ocs_vclos_over_ideal": f"load {large['load'].max():g}, ideal = no network limits",
        "testbed_contention_probability": "multi-leaf jobs slower than alone (other jobs)",
        "testbed_slowed_probability": "multi-leaf jobs below line rate (any cause, ECMP)",
        "testbed_max_throughput_loss": "largest training-throughput loss, ECMP",
    }
    rows = []
    for key, (paper, source) in PAPER.items():
        val, se = ours[key]
        rows.append({"metric": key, "paper": paper, "paper_source": source, "ours": val,
                     "ours_se": se, "ours_setting": setting[key]})
    load = f"load {large['load'].max():g}"
    extra = [
        {"metric": "jct_change_vclos_vs_bestfit_heavy", "paper": np.nan, "paper_source": "",
         "ours": heavy.loc["vclos", "jct_vs_bestfit"],
         "ours_se": heavy.loc["vclos", "jct_vs_bestfit_se"],
         "ours_setting": f"{load}, vs best-fit consolidation + ECMP"},
        {"metric": "jwt_change_ocs_vclos_vs_vclos", "paper": np.nan, "paper_source": "",
         "ours": heavy.loc["ocs-vclos", "jwt_vs_vclos"],
         "ours_se": heavy.loc["ocs-vclos", "jwt_vs_vclos_se"], "ours_setting": load},
    ]
    return pd.DataFrame(rows + extra)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_arguments(parser)
    parser.add_argument("--parts", nargs="+", default=["collision", "testbed", "large"],
                        choices=["collision", "testbed", "large"])
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = Path(args.out) if args.out else HERE / "results" / "vclos" / (
        "quick" if args.quick else "")
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    kw = dict(seed=args.seed, n_jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
              quick=args.quick)
    pd.set_option("display.width", 100)
    pd.set_option("display.max_columns", 40)
    with engine_options(overwrite=args.overwrite, params={"quick": args.quick}):
        _run_parts(args, out, kw)
    write_manifest(out, study="vclos", parts=args.parts, reps=args.reps, seed=args.seed,
                   quick=args.quick, n_jobs=args.jobs,
                   wall_seconds=round(time.perf_counter() - start, 3))
    print(f"vclos: results in {out}/ (provenance: MANIFEST.json)")
    return 0


def _run_parts(args, out: Path, kw: dict) -> None:
    raw = out / "raw"
    results = {}
    if "collision" in args.parts:
        df = studies.collision(reps=args.reps, out=raw / "collision.jsonl", **kw)
        df.to_csv(out / "collision.csv", index=False)
        _plot_collision(df, out / "collision.png")
        print(df.round(5).to_string(index=False))
    if "testbed" in args.parts:
        df = studies.testbed(out=raw / "testbed.jsonl",
                             reps=args.reps or (None if args.quick else 1000), **kw)
        df.to_csv(out / "testbed.csv", index=False)
        _plot_testbed(load_results(raw / "testbed.jsonl"), out / "testbed.png")
        print(df.round(4).T.to_string())
        results["testbed"] = df
    if "large" in args.parts:
        df = studies.large(reps=args.reps, out=raw / "large.jsonl", **kw)
        df.to_csv(out / "large.csv", index=False)
        _plot_large(df, out / "large_jct.png")
        cols = ["load", "scheduler", "avg_jct_h", "se_avg_jct_h", "avg_jwt_h", "jct_over_ideal",
                "avg_slowdown", "utilization", "fragmentation", "network_blocked", "jct_vs_ecmp",
                "jct_vs_bestfit", "jwt_vs_vclos"]
        print(df[cols].round(4).to_string(index=False))
        results["large"] = df
    if {"testbed", "large"} <= results.keys():
        cmp_ = _comparison(results["large"], results["testbed"])
        cmp_.to_csv(out / "paper_comparison.csv", index=False)
        print(cmp_.round(4).to_string(index=False))


if __name__ == "__main__":
    raise SystemExit(main())
