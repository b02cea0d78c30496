"""vClos studies on the simulated leaf-spine cluster (causalkit.systems.netsched).

Parts, each a registered study of the experiment engine (all simulated; nothing runs on real
switches or GPUs):

1. ``collision`` (``vclos-collision``): ECMP collision-free probability, Monte Carlo of the
   package's hash vs the closed form S!/((S-k)! S^k), with Wilson-interval coverage.
2. ``testbed`` (``vclos-testbed``): the paper's 32-GPU testbed twin (4 leaves x 8 GPUs x 8
   spines), 2-8 concurrent jobs under first fit + ECMP at 1-8 queue pairs per connection and with
   adaptive routing, best fit + ECMP, vClos placement + ECMP and vClos; the calibration check is
   the slowdown of a job alone on the empty fabric under each ECMP knob.
3. ``large`` (``vclos-large``): 128 GPUs (16 leaves x 8 GPUs x 8 spines), synthetic traces at
   offered loads 0.2-0.9 under first fit + ECMP, best fit + ECMP (1 and 4 queue pairs, adaptive
   routing), vClos placement + ECMP (1 and 4 queue pairs), vClos and OCS-vClos. Every run gets a
   queue-stability verdict (queue-length trend after a warm-up); paired JCT changes are reported
   only where both policies are stable in every repetition.
4. ``fragmentation`` (``vclos-fragmentation``): cross-leaf jobs that never fit one leaf on the
   128-GPU cluster, non-blocking (8 spines) and 2:1 oversubscribed (4 spines): OCS-vClos vs vClos
   vs best fit + adaptive routing.

Usage::

    python simulations/vclos.py                  # full size, into simulations/results/vclos/
    python simulations/vclos.py --quick          # seconds; into simulations/results/vclos/quick/
    python simulations/vclos.py --figures-only   # redraw the figures from the stored summaries

Each study runs into its own folder ``vclos-PART/`` (replications stored as they finish, a rerun
resumes, ``--overwrite`` starts afresh, a ``MANIFEST.json`` per folder). The figures are drawn from
the folders' ``vclos-PART_summary.csv`` tables; the top-level ``MANIFEST.json`` lists them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from causalkit.studies import add_study_arguments, run_named_study, write_manifest  # noqa: E402

HERE = Path(__file__).resolve().parent
PARTS = ("collision", "testbed", "large", "fragmentation")


def summary_path(out: Path, part: str) -> Path:
    """The engine summary of study ``vclos-PART`` under the results folder ``out``."""
    return out / f"vclos-{part}" / f"vclos-{part}_summary.csv"


def plot_collision(df: pd.DataFrame, path: Path) -> None:
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


def plot_testbed(df: pd.DataFrame, path: Path) -> None:
    """Calibration of the ECMP knobs on the testbed twin: share of multi-leaf jobs slowed by
    other jobs, largest loss, and the slowdown of a 32-GPU job alone on the empty fabric."""
    df = df.sort_values("policy")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    x = np.arange(len(df))
    for ax, col, label in ((axes[0], "p_multi_leaf_job_contended",
                            "multi-leaf jobs slowed by other jobs"),
                           (axes[1], "max_throughput_loss", "largest throughput loss"),
                           (axes[2], "alone32_slowdown", "32-GPU job alone: slowdown")):
        ax.bar(x, df[col])
        ax.set_xticks(x, df["policy"], rotation=45, ha="right", fontsize=8)
        ax.set_title(label, fontsize=10)
    axes[2].axhline(1.0, color="k", lw=0.8, ls="--")
    fig.suptitle(f"32-GPU testbed twin, {int(df['trials'].iloc[0])} trials per policy "
                 "(simulated)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_by_load(df: pd.DataFrame, ax_jct, ax_jwt=None) -> None:
    """JCT (and queueing delay) by load per policy; an open marker with a cross where the queue
    grows in some repetition (the mean is then bound by the trace length, not the fabric)."""
    axes = [(ax_jct, "avg_jct_h", 0.0)] + ([(ax_jwt, "avg_jwt_h", 1e-3)] if ax_jwt else [])
    for name, g in df.groupby("scheduler"):
        g = g.sort_values("load")
        bad = g[~g["stable"].astype(bool)]
        for i, (ax, col, shift) in enumerate(axes):
            line = ax.plot(g["load"], g[col] + shift, marker="o",
                           label=name if i == 0 else None)[0]
            ax.plot(bad["load"], bad[col] + shift, "o", mfc="white", color=line.get_color())
            ax.plot(bad["load"], bad[col] + shift, "x", color="k", ms=9)
    ideal = df.groupby("load")["ideal_jct_h"].mean()
    ax_jct.plot(ideal.index, ideal.values, "k--", label="ideal fabric")
    ax_jct.plot([], [], "x", color="k", label="unstable queue")
    ax_jct.set(xlabel="offered GPU load", ylabel="average JCT after warm-up (h)", yscale="log")
    if ax_jwt:
        ax_jwt.set(xlabel="offered GPU load", ylabel="average queueing delay + 0.001 (h)",
                   yscale="log")


def plot_large(df: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    plot_by_load(df, axes[0], axes[1])
    axes[0].set_title(f"{int(df['n_gpus'].iloc[0])}-GPU leaf-spine (simulated): JCT")
    axes[1].set_title("queueing delay")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_fragmentation(df: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (spines, g) in zip(axes, df.groupby("spines", sort=False), strict=True):
        plot_by_load(g, ax)
        ax.set_title(f"{int(g['n_gpus'].iloc[0])} GPUs, {spines} spines: cross-leaf jobs",
                     fontsize=10)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


PLOTS = {"collision": (plot_collision, "collision.png"), "testbed": (plot_testbed, "testbed.png"),
         "large": (plot_large, "large_jct.png"),
         "fragmentation": (plot_fragmentation, "fragmentation.png")}


def figures(out: Path, parts) -> list[str]:
    """Draw the figures of ``parts`` from their summaries under ``out``; returns the files."""
    made = []
    for part in parts:
        plot, name = PLOTS[part]
        plot(pd.read_csv(summary_path(out, part)), out / name)
        made.append(name)
    return made


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_arguments(parser)
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--figures-only", action="store_true",
                        help="draw the figures from the stored summaries, run no study")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = Path(args.out) if args.out else HERE / "results" / "vclos" / (
        "quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    if not args.figures_only:
        for part in args.parts:
            run_named_study(f"vclos-{part}", reps=args.reps, seed=args.seed, n_jobs=args.jobs,
                            backend=args.backend, scheduler=args.scheduler,
                            out=out / f"vclos-{part}", quick=args.quick,
                            overwrite=args.overwrite)
    made = figures(out, args.parts)
    write_manifest(out, study="vclos", parts=list(args.parts),
                   studies=[f"vclos-{p}" for p in args.parts], figures=made,
                   figures_only=args.figures_only, reps=args.reps, seed=args.seed,
                   quick=args.quick, n_jobs=args.jobs,
                   wall_seconds=round(time.perf_counter() - start, 3))
    print(f"vclos: figures {', '.join(made)} in {out}/ (provenance: MANIFEST.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
