"""Figures for target-population policy analysis: overlap of the two samples and policy maps."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_overlap", "plot_policy_map", "plot_policy_tree", "plot_study_summary"]


def plot_overlap(value, axes=None):
    """Two panels: out-of-fold domain scores of both samples, and the density-ratio weights.

    Parameters
    ----------
    value : fitted :class:`~causalkit.policy.TargetPolicyValue`
    axes : sequence of two matplotlib Axes, optional

    Returns
    -------
    ndarray of two Axes
        Left: histograms of :math:`\\operatorname{logit}\\hat\\rho` for source and target rows
        (little overlap means target regions the source barely covers). Right: histogram of
        :math:`\\log_{10}\\tilde w` (the unclipped density ratio) on the source rows, titled
        with its ESS and maximum.
    """
    import matplotlib.pyplot as plt

    diag = value.diagnostics(warn=False)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes = np.asarray(axes).ravel()
    if axes.size != 2:
        raise ValueError(f"axes must hold two Axes; got {axes.size}")
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    s, t = logit(value.domain_source_), logit(value.domain_target_)
    bins = np.linspace(min(s.min(), t.min()), max(s.max(), t.max()), 40)
    axes[0].hist(s, bins=bins, alpha=0.55, density=True, label="source", color="tab:blue")
    axes[0].hist(t, bins=bins, alpha=0.55, density=True, label="target", color="tab:orange")
    axes[0].set_xlabel("logit P(source | x), out of fold")
    axes[0].set_title(f"domain classifier AUC = {diag['domain_auc']:.2f}")
    axes[0].legend(frameon=False)
    axes[1].hist(np.log10(np.maximum(value.raw_weights_, 1e-12)), bins=40, color="tab:green",
                 alpha=0.8)
    axes[1].set_xlabel("log10 density ratio w(x) on source rows (unclipped)")
    axes[1].set_title(f"ESS = {diag['ess']:.0f} of {diag['n_source']} "
                      f"({100 * diag['ess_fraction']:.0f}%), max w = {diag['max_weight']:.3g}")
    for ax in axes:
        ax.grid(alpha=0.3)
    return axes


def plot_policy_map(policy, X, *, features=(0, 1), feature_names=None, arms=None, ax=None,
                    title=None):
    """Scatter of two covariates coloured by the arm a deterministic policy assigns.

    Parameters
    ----------
    policy : object with ``predict(X)`` (e.g. a fitted learner), or a callable returning labels
    X : ndarray of shape (n, p)
    features : pair of int
        Columns on the axes.
    feature_names : sequence of str, optional
    arms : sequence, optional
        Arm labels (colour order); defaults to the distinct assigned labels.
    ax : matplotlib Axes, optional
    """
    import matplotlib.pyplot as plt

    X = np.asarray(X, dtype=float)
    labels = np.asarray(policy.predict(X) if hasattr(policy, "predict") else policy(X))
    arms = np.unique(labels) if arms is None else np.asarray(arms)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    i, j = features
    names = feature_names or [f"x{k}" for k in range(X.shape[1])]
    for k, arm in enumerate(arms):
        rows = labels == arm
        ax.scatter(X[rows, i], X[rows, j], s=6, alpha=0.5, color=f"C{k}", label=f"arm {arm}")
    ax.set_xlabel(names[i])
    ax.set_ylabel(names[j])
    ax.legend(frameon=False, markerscale=3)
    if title:
        ax.set_title(title)
    return ax


def plot_policy_tree(tree, feature_names, arm_names, *, ax=None, decimals=3):
    """Draw a policy tree from :func:`causalkit.policy.trees.fit_policy_tree`.

    Split nodes read ``name <= threshold`` (the left branch is where it holds); leaves give the
    recommended arm. Leaves sit on evenly spaced columns, each parent above its children.

    Parameters
    ----------
    tree : dict
    feature_names : sequence of str
    arm_names : sequence
        Label of each arm index.
    ax : matplotlib Axes, optional
    decimals : int
        Digits of the thresholds.

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    box = {"boxstyle": "round", "fc": "white", "ec": "0.4"}

    leaf_depths = []

    def draw(node, depth):
        if "action" in node:
            x = float(len(leaf_depths))
            leaf_depths.append(depth)
            ax.text(x, -depth, f"treat: {arm_names[node['action']]}", ha="center", va="center",
                    bbox={**box, "fc": "#e8f0fe"})
            return x
        x_left = draw(node["left"], depth + 1)
        x_right = draw(node["right"], depth + 1)
        x = 0.5 * (x_left + x_right)
        for child_x, label in ((x_left, "yes"), (x_right, "no")):
            ax.plot([x, child_x], [-depth, -depth - 1], color="0.5", lw=1, zorder=0)
            ax.text(0.5 * (x + child_x), -depth - 0.5, label, ha="center", fontsize=8)
        ax.text(x, -depth, f"{feature_names[node['feature']]} <= "
                f"{round(node['threshold'], decimals)}", ha="center", va="center", bbox=box)
        return x

    draw(tree, 0)
    ax.set_xlim(-0.7, len(leaf_depths) - 0.3)
    ax.set_ylim(-max(leaf_depths) - 0.5, 0.5)
    ax.axis("off")
    return ax


def plot_study_summary(summary):
    """Figure of a study summary from ``causalkit.policy.studies``.

    Value scenarios (rows with a ``spec``): bias with +-2 Monte Carlo SE per estimator and
    scenario, and CI coverage. Learning scenarios: mean target regret (+-2 MC SE) per learner and
    shift. Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    has_spec = "spec" in summary and summary["spec"].notna().any()
    value = summary[summary["spec"].notna()] if has_spec else summary.iloc[:0]
    learn = summary[summary["regret"].notna()] if "regret" in summary else summary.iloc[:0]
    panels = (2 if len(value) else 0) + (1 if len(learn) else 0)
    if panels == 0:
        raise ValueError("summary has neither value nor learning scenarios")
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, max(4, 0.22 * len(value) + 1.5)))
    axes = np.atleast_1d(axes)
    k = 0
    if len(value):
        labels = [f"{s.replace('estimation', 'K2').replace('K23', 'K3')} | {e}"
                  for s, e in zip(value["scenario"], value.index, strict=True)]
        ypos = np.arange(len(value))[::-1]
        colors = [f"C{list(value.index.unique()).index(e)}" for e in value.index]
        axes[0].errorbar(value["bias"], ypos, xerr=2 * value["mc_se_bias"], fmt="none",
                         ecolor="grey")
        axes[0].scatter(value["bias"], ypos, c=colors, s=14, zorder=3)
        axes[0].axvline(0, color="k", lw=0.8)
        axes[0].set_yticks(ypos, labels, fontsize=6)
        axes[0].set_xlabel("bias (+-2 MC SE)")
        axes[1].scatter(value["coverage"], ypos, c=colors, s=14)
        axes[1].axvline(0.95, color="k", lw=0.8)
        axes[1].axvspan(0.92, 0.98, color="tab:green", alpha=0.15)
        axes[1].set_yticks(ypos, [""] * len(ypos))
        axes[1].set_xlabel("95% CI coverage")
        k = 2
    if len(learn):
        ax = axes[k]
        shifts = list(dict.fromkeys(learn["shift"]))
        learners = list(dict.fromkeys(learn.index))
        width = 0.8 / len(learners)
        for i, name in enumerate(learners):
            rows = learn[learn.index == name].set_index("shift").reindex(shifts)
            x = np.arange(len(shifts)) + i * width
            ax.bar(x, rows["regret"], width, yerr=2 * rows["mc_se_bias"], label=name,
                   color=f"C{i}", capsize=2)
        ax.set_xticks(np.arange(len(shifts)) + 0.4 - width / 2, shifts)
        ax.set_xlabel("covariate shift")
        ax.set_ylabel("true target regret (+-2 MC SE)")
        ax.legend(frameon=False, fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
