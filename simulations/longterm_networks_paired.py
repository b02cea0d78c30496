"""Paired comparison of BalanceNet variants with the unbalanced networks of the same size in the
IHDP design of ``causalkit.longterm.studies.ihdp`` (747 children, three stages, drop-out driven
by the latest short-term outcome) at 30% and 40% drop-out per stage.

Every variant uses the study networks (``STUDY_NET``: 2 x 32 representation, 1 x 32 heads) with
the same initialisation seed, and replication ``r`` draws the same data set for every variant
(``numpy.random.default_rng([2024, r])``), so the differences are paired. Each (setting,
variant) pair is one resumable :func:`causalkit.simulation.run_study` file,
``results/longterm/longterm-ihdp_dropout<rate>_networks_paired_<slug>.csv``. The table
``longterm-ihdp_networks_paired.csv`` gives, per setting, variant and reference (the
unbalanced net of the study, and the same net with weight decay 1e-2), the mean of
``sqrt(PEHE)`` and of ``|ATE error|`` for the variant and for the reference, their mean paired
difference (variant minus reference; negative = the variant is better) and the Monte Carlo SE
of that difference, ``sd(d) / sqrt(R)``.

Variants (``alpha``: stayers/drop-outs weight, ``alpha_treat``: treated/control weight, both
``alpha`` unless given):

* the penalty weight grid 0.01, 0.03, 0.1, 1 (linear MMD);
* one penalty at a time (treated/control only, stayers/drop-outs only);
* the RBF-MMD and entropic Wasserstein penalties at weight 0.1, the latter also one group pair
  at a time;
* placebos: the Wasserstein penalty (both group pairs) and the linear-MMD stayers/drop-outs
  penalty, weight 0.1, between random groups of the sizes of the real ones (a permutation of
  the group labels within each mini-batch). It constrains the
  representation as the real penalty does but balances nothing, so a gain it shares is not
  a gain from balance;
* the unbalanced net with weight decay 1e-3 and 1e-2 instead of 1e-4 (a plain regulariser);
* the treated/control penalty at the first stage only, whose input is the pre-treatment
  covariates ``H_1 = X`` (the later histories hold short-term outcomes, which the treatment
  moves, so balancing the arms there removes part of the treatment effect from the
  representation);
* the weight chosen per stage by the validation factual loss (``alpha="validation"``): the
  stage network is trained with each weight of the grid (0, 0.01, 0.03, 0.1) (same
  initialisation, same split) and the one with the smallest best validation loss is kept
  (ties go to the smaller weight).

Variants that were clearly no better after a first pass keep fewer replications (``n_reps``
in the table); ``run(reps, names)`` extends any of them.

**Which BalanceNet the committed results come from.** Every committed file was produced at
commit da30d6d by the BalanceNet of that time, which differs from the current one in two
ways: it applied the treated/control penalty at every stage (the current one applies it at
the first stage only), and it gave every stage network the same seed (the current one
derives one per stage, commit 39d6128). The variants "treated/control at stage 1 only" and
"alpha by validation loss" were subclasses defined in this script (``FirstStageTreatmentBalance``
and ``ValidationSelectedAlpha``; the latter put the chosen weight on both penalties at every
stage); both are now options of :class:`~causalkit.longterm.BalanceNet` and the subclasses no
longer exist, and ``RandomGroupPenalty`` moved to :mod:`causalkit.longterm.network_studies`.
The variants "treated/control only" (``PREVIOUS_ONLY``) balanced the arms at every stage and
have no current counterpart besides "treated/control at stage 1 only"; their files are read
for the table but not rerun. Rerunning any variant with the current code therefore needs
``overwrite=True`` (``python ... [reps] --overwrite``): a resume would append replications of
the current BalanceNet to those of the previous one. The comparison with the current
BalanceNet (and SeqMSM, SequentialRegression) is the study ``longterm-balancenet``
(:mod:`causalkit.longterm.network_studies`).

Usage: ``python simulations/longterm_networks_paired.py [reps] [--overwrite]`` (default 60;
without ``--overwrite`` rerunning resumes and only adds the missing replications).
"""

import sys
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from causalkit.longterm import studies
from causalkit.longterm.balancenet import BalanceNet
from causalkit.longterm.dgp import LinearGaussianDesign
from causalkit.longterm.network_studies import RandomGroupPenalty
from causalkit.simulation import load_results, run_study

HERE = Path(__file__).parent / "results" / "longterm"
SEED = 2024
RATES = (0.3, 0.4)
REFERENCE = "Unbalanced net"
#: References of the paired table: the study's unbalanced net and the same net with the
#: stronger weight decay that matches the regularising effect of the penalties.
REFERENCES = (REFERENCE, "Unbalanced net, weight decay 1e-2")
X, A = studies._ihdp_covariates()


def _net(cls, seed, **kwargs):
    torch.set_num_threads(1)
    return cls(random_state=seed, device="cpu", **{**studies.STUDY_NET, **kwargs})


VARIANTS = {
    REFERENCE: (BalanceNet, {"alpha": 0.0}),
    "Unbalanced net, weight decay 1e-3": (BalanceNet, {"alpha": 0.0, "weight_decay": 1e-3}),
    "Unbalanced net, weight decay 1e-2": (BalanceNet, {"alpha": 0.0, "weight_decay": 1e-2}),
    "alpha=0.01": (BalanceNet, {"alpha": 0.01}),
    "alpha=0.03": (BalanceNet, {"alpha": 0.03}),
    "alpha=0.1": (BalanceNet, {"alpha": 0.1}),
    "alpha=1": (BalanceNet, {"alpha": 1.0}),
    "stayers/drop-outs only, 0.1": (BalanceNet, {"alpha": 0.1, "alpha_treat": 0.0}),
    "stayers/drop-outs only, 1": (BalanceNet, {"alpha": 1.0, "alpha_treat": 0.0}),
    "RBF-MMD, 0.1": (BalanceNet, {"alpha": 0.1, "ipm": "mmd_rbf"}),
    "Wasserstein, 0.1": (BalanceNet, {"alpha": 0.1, "ipm": "wasserstein"}),
    "Wasserstein, treated/control only, 0.1": (BalanceNet, {"alpha": 0.0, "alpha_treat": 0.1,
                                                            "ipm": "wasserstein"}),
    "Wasserstein, stayers/drop-outs only, 0.1": (BalanceNet, {"alpha": 0.1, "alpha_treat": 0.0,
                                                              "ipm": "wasserstein"}),
    "Wasserstein placebo (random groups), 0.1": (RandomGroupPenalty, {"alpha": 0.1,
                                                                      "ipm": "wasserstein"}),
    "linear-MMD placebo (random groups), stayers/drop-outs only, 0.1": (
        RandomGroupPenalty, {"alpha": 0.1, "alpha_treat": 0.0}),
    "treated/control at stage 1 only, 0.1": (BalanceNet, {"alpha": 0.0, "alpha_treat": 0.1}),
    "treated/control at stage 1 only, 1": (BalanceNet, {"alpha": 0.0, "alpha_treat": 1.0}),
    "alpha by validation loss": (BalanceNet, {"alpha": "validation"}),
}
#: Committed variants of the previous BalanceNet (treated/control penalty at every stage) that
#: the current one cannot express; read for the table, never rerun.
PREVIOUS_ONLY = ("treated/control only, 0.1", "treated/control only, 1")


def _slug(name: str) -> str:
    keep = "".join(c if c.isalnum() or c == "." else "_" for c in name.lower())
    return "_".join(part for part in keep.split("_") if part)


def _path(rate: float, name: str) -> Path:
    return HERE / f"longterm-ihdp_dropout{int(100 * rate)}_networks_paired_{_slug(name)}.csv"


def _design(rate: float):
    design = LinearGaussianDesign(n_features=X.shape[1], dropout=(rate,) * 3, xi=1.0, seed=21)
    design.intercepts(X, A)
    return partial(studies._fixed, design=design, X=X, treatment=A)


def run(reps: int, names=None, overwrite: bool = False) -> None:
    for rate in RATES:
        dgp = _design(rate)
        for name in names or VARIANTS:
            cls, kwargs = VARIANTS[name]
            fn = partial(studies._run, partial(_net, cls, SEED, **kwargs), with_pehe=True)
            run_study(dgp, {name: fn}, reps, SEED, n_jobs=1, out=_path(rate, name),
                      overwrite=overwrite, progress=False)


def paired_table() -> pd.DataFrame:
    """Paired differences of every variant against each of ``REFERENCES`` (over the
    replications both have)."""
    rows, names = [], (*VARIANTS, *PREVIOUS_ONLY)
    for rate in RATES:
        frames = [load_results(_path(rate, name)) for name in names
                  if _path(rate, name).exists()]
        raw = pd.concat(frames)
        raw["abs_error"] = (raw["estimate"] - raw["truth"]).abs()
        for metric in ("pehe", "abs_error"):
            wide = raw.pivot_table(index="rep", columns="estimator", values=metric)
            for reference in [r for r in REFERENCES if r in wide.columns]:
                for name in [n for n in names if n in wide.columns and n != reference]:
                    d = (wide[name] - wide[reference]).dropna()
                    rows.append({"setting": f"dropout{int(100 * rate)}", "metric": metric,
                                 "estimator": name, "reference": reference, "n_reps": d.size,
                                 "mean_estimator": wide.loc[d.index, name].mean(),
                                 "mean_reference": wide.loc[d.index, reference].mean(),
                                 "mean_difference": d.mean(),
                                 "mc_se_difference": d.std(ddof=1) / np.sqrt(d.size)})
    table = pd.DataFrame(rows)
    table.to_csv(HERE / "longterm-ihdp_networks_paired.csv", index=False)
    return table


def main():
    args = [a for a in sys.argv[1:] if a != "--overwrite"]
    run(int(args[0]) if args else 60, overwrite="--overwrite" in sys.argv[1:])
    print(paired_table().round(4).to_string())


if __name__ == "__main__":
    main()
