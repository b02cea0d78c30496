"""BalanceNet against its unbalanced network, a placebo penalty, SeqMSM and SequentialRegression
(registered in :mod:`causalkit.studies` as ``longterm-balancenet``).

The comparison the BalanceNet paper makes (Yang, Guo, Han & Wu 2025, arXiv:2504.19527:
balance as the remedy for the variance of SeqMSM), on the semi-synthetic designs of
:mod:`causalkit.longterm.studies`: IHDP (747 children, 25 covariates, real treatment) at 30%
drop-out per stage and JOBS (NSW plus the CPS controls on the common support, 1,257 units, 8
covariates) at 35%, three stages, drop-out driven by the latest short-term outcome. Every
estimator sees the same draws (replication ``r`` draws ``numpy.random.default_rng([seed, r])``),
so differences between estimators are paired:

* ``BalanceNet``: the default (stayers/drop-outs penalty at every stage, treated/control penalty
  at the first stage, weight chosen per stage from ``(0, 0.01, 0.03, 0.1)`` by the validation
  loss);
* ``Unbalanced net``: the same networks with ``alpha = 0``;
* ``Placebo penalty``: :class:`RandomGroupPenalty`, the same penalties and weight choice between
  random groups of the sizes of the real ones;
* ``SeqMSM`` and ``SequentialRegression`` with their linear defaults.

The networks are the small ``STUDY_NET`` of :mod:`causalkit.longterm.studies` (2 x 32
representation, 1 x 32 heads, at most 100 epochs), one torch thread, the same seed in every
replication. The study compares point estimates (bias, SD, RMSE) and ``sqrt(PEHE)``; it
computes no intervals (the networks' inference is the bootstrap, too slow here).

Written next to ``out`` (``<stem>_<setting>.jsonl`` are the resumable stores):

* ``<stem>_summary.csv``: per setting and estimator the engine summary plus the Monte Carlo
  SEs of the SD (``sd / sqrt(2 (R - 1))``, normal approximation), of the RMSE (delta method,
  ``sd(e^2) / (2 RMSE sqrt(R))``) and of the mean ``sqrt(PEHE)``, and the mean chosen weight
  per stage (``mean_alpha_stage<k>``);
* ``<stem>_paired.csv``: per setting the paired differences (estimator minus reference) of the
  squared ATE error and of ``sqrt(PEHE)`` against the unbalanced net and against the placebo,
  with their MC SEs ``sd(d) / sqrt(R)``;
* ``<stem>_<setting>_estimates.csv`` and ``<stem>.png`` (bias, RMSE, ``sqrt(PEHE)``).

The committed run (100 replications per design; ``causalkit simulate longterm-balancenet --out
simulations/results/longterm-balancenet``, 43 minutes with one worker on a shared
2-core machine) is summarised in the :class:`~causalkit.longterm.BalanceNet` docstring.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from causalkit.longterm import studies
from causalkit.longterm.balancenet import BalanceNet

__all__ = ["RandomGroupPenalty", "balancenet_comparison", "network_comparison_estimators"]

#: name of the reference network every paired difference is taken against (and the placebo)
UNBALANCED = "Unbalanced net"
PLACEBO = "Placebo penalty"


class RandomGroupPenalty(BalanceNet):
    """Placebo BalanceNet: each penalty compares a random split of the mini-batch with the
    sizes of the real groups (a permutation of the group labels), so it constrains the
    representation as the real penalty does but balances nothing the regression is confounded
    by. A gain it shares with :class:`BalanceNet` is not a gain from balance.

    The permutations come from a torch generator seeded with ``random_state`` (an int, as the
    outcome chain gives each stage), restarted for every weight of the validation grid.
    """

    def _train(self, *args, **kwargs):
        self._placebo_generator = torch.Generator().manual_seed(int(self.random_state))
        return BalanceNet._train(self, *args, **kwargs)

    def _penalty(self, rep, group, weight):
        perm = torch.randperm(group.numel(), generator=self._placebo_generator)
        return BalanceNet._penalty(self, rep, group[perm.to(group.device)], weight)


def _network(cls, seed, **kwargs):
    torch.set_num_threads(1)
    return cls(random_state=seed, device="cpu", **{**studies.STUDY_NET, **kwargs})


def _fit(make, data):
    """Point estimate, ``sqrt(PEHE)`` and, for the networks, the chosen weight per stage."""
    est = make().fit(data["X"], data["outcome"], data["treatment"], short=data["short"])
    out = {"estimate": est.ate_,
           "pehe": float(np.sqrt(np.mean((est.effect(data["X"]) - data["tau"]) ** 2)))}
    out.update({f"alpha_stage{k + 1}": a
                for k, a in enumerate(getattr(est, "alpha_chosen_", ()))})
    return out


def network_comparison_estimators(seed: int = 0) -> dict:
    """``{name: fn(data)}``: BalanceNet (defaults), the unbalanced net, the placebo penalty
    (all with ``STUDY_NET``) and the linear SeqMSM and SequentialRegression."""
    from causalkit.longterm import SeqMSM, SequentialRegression
    return {
        "BalanceNet": partial(_fit, partial(_network, BalanceNet, seed)),
        UNBALANCED: partial(_fit, partial(_network, BalanceNet, seed, alpha=0.0)),
        PLACEBO: partial(_fit, partial(_network, RandomGroupPenalty, seed)),
        "SeqMSM": partial(_fit, SeqMSM),
        "SequentialRegression": partial(_fit, SequentialRegression),
    }


def _designs(quick: bool):
    from causalkit.longterm.dgp import LinearGaussianDesign
    X, A = studies._ihdp_covariates()
    ihdp = LinearGaussianDesign(n_features=X.shape[1], dropout=(0.3,) * 3, xi=1.0, seed=21)
    ihdp.intercepts(X, A)
    out = [("ihdp_dropout30", partial(studies._fixed, design=ihdp, X=X, treatment=A))]
    if not quick:
        X, A = studies._jobs_covariates()
        jobs = LinearGaussianDesign(n_features=X.shape[1], dropout=(0.35,) * 3, xi=1.0,
                                    propensity_scale=0.0, seed=31)
        jobs.intercepts(X, A)
        out.append(("jobs_dropout35", partial(studies._fixed, design=jobs, X=X, treatment=A)))
    return out


def _mc_summary(res: pd.DataFrame) -> pd.DataFrame:
    """The engine summary plus the MC SEs of SD, RMSE and mean ``sqrt(PEHE)``."""
    from causalkit.simulation import summarize
    table = summarize(res)
    ok = res[res["error"] == ""]
    err2 = (ok["estimate"] - ok["truth"]) ** 2
    by = ok.assign(err2=err2).groupby("estimator", sort=False)
    n = table["n_reps"]
    table["mc_se_sd"] = table["sd"] / np.sqrt(2 * (n - 1))
    table["mc_se_rmse"] = by["err2"].std() / (2 * table["rmse"] * np.sqrt(n))
    table["mc_se_pehe"] = by["pehe"].std() / np.sqrt(n)
    return table


def _paired(res: pd.DataFrame) -> pd.DataFrame:
    """Paired differences (estimator minus reference) of the squared ATE error and of
    ``sqrt(PEHE)``, over the replications both have."""
    res = res[res["error"] == ""].assign(sq_error=(res["estimate"] - res["truth"]) ** 2)
    rows = []
    for metric in ("sq_error", "pehe"):
        wide = res.pivot_table(index="rep", columns="estimator", values=metric)
        for reference in [r for r in (UNBALANCED, PLACEBO) if r in wide.columns]:
            for name in [c for c in wide.columns if c != reference]:
                d = (wide[name] - wide[reference]).dropna()
                rows.append({"metric": metric, "estimator": name, "reference": reference,
                             "n_reps": d.size, "mean_estimator": wide.loc[d.index, name].mean(),
                             "mean_reference": wide.loc[d.index, reference].mean(),
                             "mean_difference": d.mean(),
                             "mc_se_difference": d.std(ddof=1) / np.sqrt(d.size)})
    return pd.DataFrame(rows)


def balancenet_comparison(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None,
                          out=None, quick=False) -> pd.DataFrame:
    """BalanceNet vs unbalanced net, placebo penalty, SeqMSM, SequentialRegression (IHDP 30%,
    JOBS 35% drop-out; paired draws)."""
    from causalkit.simulation import run_study
    reps = reps or (2 if quick else 100)
    out = None if out is None else Path(out)
    tables, paired = [], []
    for tag, design in _designs(quick):
        res = run_study(design, network_comparison_estimators(seed), reps, seed, n_jobs=n_jobs,
                        backend=backend, scheduler=scheduler, out=studies._path(out, tag),
                        progress=False)
        tables.append(_mc_summary(res).reset_index().assign(setting=tag))
        paired.append(_paired(res).assign(setting=tag))
        if out is not None:
            studies._compact(res).to_csv(studies._beside(out, f"{tag}_estimates.csv"), index=False)
    table = pd.concat(tables).set_index(["setting", "estimator"])
    pairs = pd.concat(paired).set_index(["setting", "metric", "estimator", "reference"])
    if out is not None:
        table.to_csv(studies._beside(out, "summary.csv"))
        pairs.to_csv(studies._beside(out, "paired.csv"))
        from causalkit.longterm.plots import plot_study
        fig = plot_study(table, metrics=("bias", "rmse", "mean_pehe"))
        fig.savefig(out.with_suffix(".png"), dpi=110, bbox_inches="tight")
    return table
