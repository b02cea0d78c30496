"""Figures shared across subpackages (estimate comparisons); subpackage-specific diagnostic
figures live beside their estimators (e.g. ``causalkit.borrowing`` ``plot()`` methods)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["plot_estimates"]


def plot_estimates(estimates: Mapping, *, reference: float | None = None,
                   reference_label: str = "benchmark", alpha: float = 0.05, ax=None,
                   xlabel: str = "estimate"):
    """Forest plot: one row per estimate with its :math:`1-\\alpha` interval.

    Parameters
    ----------
    estimates : dict of label -> :class:`~causalkit.inference.Estimate`
    reference : float, optional
        A vertical reference line (e.g. an experimental benchmark).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    if not estimates:
        raise ValueError("estimates must not be empty")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.45 * len(estimates) + 1.2))
    labels = list(estimates)
    values = np.array([estimates[k].value for k in labels])
    bounds = np.array([estimates[k].conf_int(alpha) for k in labels])
    ypos = np.arange(len(labels))[::-1]
    ax.errorbar(values, ypos, xerr=[values - bounds[:, 0], bounds[:, 1] - values], fmt="o",
                color="tab:blue", ecolor="tab:blue", capsize=3)
    if reference is not None:
        ax.axvline(reference, color="tab:red", linestyle="--", label=reference_label)
        ax.legend(loc="best", frameon=False)
    ax.set_yticks(ypos, labels)
    ax.set_xlabel(f"{xlabel} ({100 * (1 - alpha):g}% CI)")
    ax.grid(axis="x", alpha=0.3)
    return ax
