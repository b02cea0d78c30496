"""Diagnostic figures for the long-term estimators (matplotlib, imported lazily)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["plot_weights", "plot_ess", "plot_study"]


def _check_weighted(estimator):
    if not hasattr(estimator, "weights_") or not hasattr(estimator, "ess_"):
        raise TypeError("estimator must be a fitted SequentialIPW or MonotoneAIPW "
                        "(it needs weights_ and ess_)")


def plot_weights(estimator, ax=None):
    """Histogram of ``log10`` inverse-probability weights ``1 / (e_A r_t)`` per stage.

    Parameters
    ----------
    estimator : fitted SequentialIPW or MonotoneAIPW
        A fitted :class:`~causalkit.longterm.SequentialIPW` or
        :class:`~causalkit.longterm.MonotoneAIPW`.
    ax : matplotlib Axes, optional
    """
    import matplotlib.pyplot as plt
    _check_weighted(estimator)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5))
    W = estimator.weights_
    bins = np.linspace(0, np.log10(np.nanmax(W)) + 0.05, 40)
    for k in range(W.shape[1]):
        w = W[np.isfinite(W[:, k]), k]
        ax.hist(np.log10(w), bins=bins, histtype="step", linewidth=1.5,
                label=f"stage {k + 1} (n={w.size}, max={w.max():.0f})")
    ax.set_xlabel("log10 weight  1 / (e_A(X) r_t(H_t))")
    ax.set_ylabel("units")
    ax.legend(frameon=False, fontsize=8)
    return ax


def plot_ess(estimator, ax=None):
    """Bar chart of responders and effective sample sizes per stage and arm."""
    import matplotlib.pyplot as plt
    _check_weighted(estimator)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5))
    table = estimator.ess_
    labels = [f"t={r.stage}\nA={r.treatment}" for r in table.itertuples()]
    pos = np.arange(len(table))
    ax.bar(pos - 0.2, table["n_observed"], width=0.4, label="observed", color="0.75")
    ax.bar(pos + 0.2, table["ess"], width=0.4, label="effective sample size", color="tab:blue")
    ax.set_xticks(pos, labels)
    ax.set_ylabel("units")
    ax.legend(frameon=False)
    return ax


def plot_study(summary: pd.DataFrame, metrics=("bias", "rmse", "coverage")):
    """One panel per metric: estimators (rows) by setting (markers), from a study summary
    indexed by ``(setting, estimator)``."""
    import matplotlib.pyplot as plt
    frame = summary.reset_index()
    names = list(dict.fromkeys(frame["estimator"]))
    settings = list(dict.fromkeys(frame["setting"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 0.38 * len(names) + 1.5),
                             sharey=True)
    ypos = {name: i for i, name in enumerate(names[::-1])}
    for ax, metric in zip(np.atleast_1d(axes), metrics, strict=True):
        for j, setting in enumerate(settings):
            part = frame[frame["setting"] == setting]
            y = [ypos[e] + 0.12 * (j - (len(settings) - 1) / 2) for e in part["estimator"]]
            ax.plot(part[metric], y, "o", label=setting, markersize=4)
        if metric == "bias":
            ax.axvline(0, color="k", linewidth=0.8)
        if metric == "coverage":
            ax.axvline(0.95, color="k", linewidth=0.8, linestyle="--")
        ax.set_title(metric)
        ax.grid(axis="x", alpha=0.3)
    first = np.atleast_1d(axes)[0]
    first.set_yticks(list(ypos.values()), list(ypos.keys()))
    first.legend(frameon=False, fontsize=7, loc="best")
    fig.tight_layout()
    return fig
