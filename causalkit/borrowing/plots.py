"""Diagnostic figures of influence-based borrowing."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_borrowing"]


def plot_borrowing(estimator, axes=None):
    """The two figures to look at first after fitting AIB/ACIB.

    Left: influence scores of the external controls in ranked order (log scale), the borrowed
    ones marked. Right: the estimated MSE path (squared bias, variance and their sum against the
    borrowed-set size) with the selected size.

    Parameters
    ----------
    estimator : fitted InfluenceBorrowing or CalibratedInfluenceBorrowing
    axes : sequence of two matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if not hasattr(estimator, "mse_path_") or estimator.mse_path_ is None:
        raise ValueError("plot needs a fitted InfluenceBorrowing/CalibratedInfluenceBorrowing "
                         "with external controls")
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    else:
        fig = axes[0].figure
    ax_s, ax_m = axes
    scores = estimator.influence_scores_[estimator.order_]
    rank = np.arange(1, scores.size + 1)
    chosen = estimator.borrowed_[estimator.order_]
    positive = np.where(scores > 0, scores, np.nan)
    ax_s.scatter(rank[~chosen], positive[~chosen], s=6, color="0.6", label="not borrowed")
    ax_s.scatter(rank[chosen], positive[chosen], s=6, color="tab:blue",
                 label=f"borrowed ({int(chosen.sum())})")
    ax_s.set_yscale("log")
    ax_s.set_xlabel("external control (ranked by influence score)")
    ax_s.set_ylabel("influence score (smaller = more comparable)")
    ax_s.legend(frameon=False, loc="upper left")
    path = estimator.mse_path_
    ax_m.plot(path["size"], path["mse"], "-o", ms=3, color="k", label="estimated MSE")
    ax_m.plot(path["size"], path["bias2"], "--", color="tab:red", label="squared bias")
    ax_m.plot(path["size"], path["variance"], "--", color="tab:green", label="variance")
    k = estimator.details_["selected_size"]
    ax_m.axvline(k, color="tab:blue", linestyle=":", label=f"selected size {k}")
    ax_m.set_xlabel("number of external controls borrowed")
    ax_m.set_ylabel("estimated MSE of the ATE")
    ax_m.legend(frameon=False)
    fig.suptitle(f"{estimator._label}: influence scores and MSE path")
    fig.tight_layout()
    return fig
