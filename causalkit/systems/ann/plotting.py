"""Figures: recall/QPS before and after, per-object oracle headroom, recall-QPS curves."""

from __future__ import annotations


def plot_smartann(diagnosis, design=None, ax=None):
    """Two panels: (left) Recall@k vs QPS of the baseline and the design; (right) the oracle
    headroom of each object in causal order, bottlenecks highlighted.

    Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt
    if ax is None:
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    else:
        fig = ax[0].figure
    left, right = ax
    b = diagnosis.baseline
    left.scatter([b["qps"]], [b["recall"]], label="given workflow", color="tab:gray")
    if design is not None:
        left.scatter([design.baseline.qps], [design.baseline.recall], marker="s",
                     color="tab:blue", label=f"baseline, calibrated ({design.baseline.budget})")
        left.scatter([design.design.qps], [design.design.recall], marker="*", s=150,
                     color="tab:red", label=f"auto-design ({design.design.budget})")
    left.set_xscale("log")
    left.set_xlabel("QPS (1 thread)")
    left.set_ylabel("Recall@k")
    left.legend(fontsize=8)
    left.set_title(f"{diagnosis.family}: before / after")
    t = diagnosis.table
    colors = ["tab:red" if f else "tab:gray" for f in t["flagged"]]
    right.barh(t["object"][::-1], t["headroom"][::-1], color=colors[::-1])
    right.set_xlabel("oracle headroom (red: bottleneck)")
    right.set_title("per-object headroom, causal order top-down")
    fig.tight_layout()
    return fig


def plot_curves(curves, ax=None, title=""):
    """Recall@k vs QPS curves from a tidy frame with columns ``design, recall, qps``."""
    import matplotlib.pyplot as plt
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 4))
    else:
        fig = ax.figure
    for name, grp in curves.groupby("design", sort=False):
        grp = grp.sort_values("qps")
        ax.plot(grp["recall"], grp["qps"], marker="o", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("Recall@10")
    ax.set_ylabel("QPS (1 thread)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig
