"""Simulation studies of the long-term estimators (registered in :mod:`causalkit.studies`).

* ``linear_gaussian``: X ~ N(0, I_5), n = 1000, three stages, closed-form ATE = 3, drop-out
  driven by the latest short-term outcome (xi = 1) at 10/20/30/40% per stage, 400
  replications (at 200 the MC SE is too coarse to tell a bias of
  0.02 from noise); a complete-data T-learner on the same draws as a reference; at every rate
  also the bootstrap interval (100 resamples) of SeqMSM, its default, on half of the
  replications;
* ``ihdp``: the 747 IHDP children (25 covariates, real treatment), the same outcome chain and
  drop-out at 15% and 30% per stage, 200 replications; truth = mean tau(X_i); SeqMSM's
  default bootstrap interval on half of the replications;
* ``jobs``: NSW (445 units) plus the 812 CPS controls on the common support (8 covariates,
  observational), the same chain at 20% and 35% per stage, 200 replications;
* ``weights``: which inverse weights by default -- maximum-likelihood logistic fitted in
  sample (the default), cross-fitted, and stage-wise balancing weights
  (:class:`~causalkit.longterm.BalancingLogit`) -- in MonotoneAIPW, SequentialTMLE and the
  Hajek SequentialIPW, on the linear design (40% drop-out) and IHDP (15% and 30%),
  200 replications, on draws that the other studies do not use.

Every study runs :func:`causalkit.simulation.run_study` (incremental, resumable) and returns its
:func:`~causalkit.simulation.summarize` table with a ``setting`` column; when ``out`` is given
the summary (``<out stem>_summary.csv``), a figure (``<out stem>.png``) and per setting a compact
replication table (``<out stem>_<setting>_estimates.csv``) are written beside it.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["linear_gaussian", "ihdp", "jobs", "weights", "linear_estimators",
           "weight_estimators"]


# -- estimators -------------------------------------------------------------------------------
def _run(make, data, with_pehe=False, inference="influence"):
    est = make().fit(data["X"], data["outcome"], data["treatment"], short=data["short"])
    if inference == "bootstrap":
        res = est.estimate(inference="bootstrap", n_boot=100, random_state=int(data["seed"]))
    else:
        res = est.estimate(inference=inference)
    if not with_pehe:
        return res
    lo, hi = res.conf_int()
    pehe = float(np.sqrt(np.mean((est.effect(data["X"]) - data["tau"]) ** 2)))
    return {"estimate": res.value, "std_error": res.std_error, "ci_lower": lo, "ci_upper": hi,
            "pehe": pehe}


def _factories(seed: int = 0) -> dict:
    from sklearn.dummy import DummyClassifier, DummyRegressor

    from causalkit.longterm import (
        CompleteCase,
        MonotoneAIPW,
        NaiveIPW,
        SeqMSM,
        SequentialIPW,
        SequentialRegression,
        SequentialTMLE,
    )
    flat = DummyClassifier(strategy="prior")
    wrong_chain = {"outcome_model": DummyRegressor()}
    wrong_weights = {"propensity_model": flat, "selection_model": flat}
    return {
        "SequentialIPW": SequentialIPW,
        "SequentialIPW (Hajek)": partial(SequentialIPW, normalize=True),
        "SequentialIPW (estimated weights)": partial(SequentialIPW,
                                                     variance="estimated_weights"),
        "SequentialIPW (Hajek, estimated weights)": partial(
            SequentialIPW, normalize=True, variance="estimated_weights"),
        "SequentialRegression": SequentialRegression,
        "SeqMSM": SeqMSM,
        "MonotoneAIPW": partial(MonotoneAIPW, random_state=seed),
        "MonotoneAIPW (normalized)": partial(MonotoneAIPW, normalize=True, random_state=seed),
        "MonotoneAIPW (cv=5)": partial(MonotoneAIPW, cv=5, random_state=seed),
        "MonotoneAIPW (wrong outcome chain)": partial(MonotoneAIPW, **wrong_chain,
                                                      random_state=seed),
        "MonotoneAIPW (wrong weights)": partial(MonotoneAIPW, **wrong_weights,
                                                random_state=seed),
        "SequentialTMLE": SequentialTMLE,
        "SequentialTMLE (wrong outcome chain)": partial(SequentialTMLE, **wrong_chain),
        "SequentialTMLE (wrong weights)": partial(SequentialTMLE, **wrong_weights),
        "SequentialRegression (wrong chain)": partial(SequentialRegression, **wrong_chain),
        "SequentialIPW (wrong weights)": partial(SequentialIPW, **wrong_weights),
        "CompleteCase": partial(CompleteCase, random_state=seed),
        "NaiveIPW": NaiveIPW,
    }


def linear_estimators(with_pehe: bool = False, seed: int = 0) -> dict:
    """``{name: fn(data)}`` for every non-neural estimator (linear/logistic nuisances) plus the
    deliberately misspecified variants used to show double robustness; all with the
    influence-function (or sandwich) standard error, the fast one, whatever the estimator's
    default inference (the bootstrap defaults are checked on fewer replications, see
    ``bootstrap_estimators``).

    ``MonotoneAIPW (cv=5)`` is the cross-fitted form: with parametric nuisance models its
    out-of-fold inverse weights are noisier and too large on average (Jensen's inequality on
    ``1 / lambda_hat``), which is why the default fits them in-sample."""
    return {name: partial(_run, make, with_pehe=with_pehe)
            for name, make in _factories(seed).items()}


def _complete_data_t_learner(data):
    """Reference without drop-out: the T-learner (OLS per arm) on the complete potential
    outcomes of the sample, ``Y = A Y(1) + (1 - A) Y(0)``. Its error is the part of every
    estimator's error that drop-out does not cause (all estimators share the draw)."""
    from causalkit.longterm import SequentialRegression
    y = np.where(data["treatment"] == 1, data["y1"], data["y0"])
    return SequentialRegression().fit(data["X"], y, data["treatment"]).estimate()


def weight_estimators(seed: int = 0, with_pehe: bool = False) -> dict:
    """``{name: fn(data)}``: MonotoneAIPW, SequentialTMLE and the Hajek SequentialIPW with the
    default in-sample maximum-likelihood weights and with stage-wise balancing weights
    (``selection_model=BalancingLogit()``), MonotoneAIPW also cross-fitted (``cv=5``) and each
    AIPW with a wrong (constant) outcome chain, where only the weights protect it;
    SequentialRegression as the reference for the spread."""
    from sklearn.dummy import DummyRegressor

    from causalkit.longterm import (
        BalancingLogit,
        MonotoneAIPW,
        SequentialIPW,
        SequentialRegression,
        SequentialTMLE,
    )
    balancing = {"selection_model": BalancingLogit()}
    wrong_chain = {"outcome_model": DummyRegressor()}
    factories = {
        "SequentialRegression": SequentialRegression,
        "MonotoneAIPW": partial(MonotoneAIPW, random_state=seed),
        "MonotoneAIPW (balancing weights)": partial(MonotoneAIPW, **balancing,
                                                    random_state=seed),
        "MonotoneAIPW (cv=5)": partial(MonotoneAIPW, cv=5, random_state=seed),
        "MonotoneAIPW (wrong outcome chain)": partial(MonotoneAIPW, **wrong_chain,
                                                      random_state=seed),
        "MonotoneAIPW (balancing weights, wrong outcome chain)": partial(
            MonotoneAIPW, **balancing, **wrong_chain, random_state=seed),
        "SequentialTMLE": SequentialTMLE,
        "SequentialTMLE (balancing weights)": partial(SequentialTMLE, **balancing),
        "SequentialIPW (Hajek)": partial(SequentialIPW, normalize=True),
        "SequentialIPW (Hajek, balancing weights)": partial(SequentialIPW, normalize=True,
                                                            **balancing),
    }
    return {name: partial(_run, make, with_pehe=with_pehe) for name, make in factories.items()}


#: Estimators whose bootstrap intervals the linear and IHDP studies check (on half of the
#: replications): those whose default inference is the bootstrap.
BOOTSTRAPPED = ("SeqMSM",)


def bootstrap_estimators(seed: int = 0, names=BOOTSTRAPPED) -> dict:
    """The named estimators of :func:`linear_estimators` with bootstrap intervals (100
    resamples, every nuisance refitted on each)."""
    factories = _factories(seed)
    return {f"{name} (bootstrap)": partial(_run, factories[name], inference="bootstrap")
            for name in names}


#: Network size used in the studies (modest, for a shared 2-core machine).
STUDY_NET = {"representation": (32, 32), "head": (32,), "batch_size": 128, "lr": 3e-3,
             "max_epochs": 100, "patience": 10}


# -- designs ----------------------------------------------------------------------------------
def _synthetic(rng, design, n):
    return {**design.sample(rng, n=n), "seed": int(rng.integers(2 ** 31 - 1))}


def _fixed(rng, design, X, treatment):
    return {**design.sample(rng, X=X, treatment=treatment),
            "seed": int(rng.integers(2 ** 31 - 1))}


def _ihdp_covariates():
    from causalkit.datasets import IHDP_COVARIATES, load_ihdp
    frame = load_ihdp(standardize=True)
    return frame[IHDP_COVARIATES].to_numpy(float), frame["treat"].to_numpy(int)


def _jobs_covariates(min_propensity: float = 0.02):
    """NSW units plus the CPS controls on the common support: a logistic propensity of NSW
    treatment fitted on all 16,437 units must be at least ``min_propensity`` (812 CPS units at
    0.02), so that the JOBS-like design has overlap (Crump et al. 2009, *Biometrika* 96(1))."""
    from sklearn.linear_model import LogisticRegression

    from causalkit.datasets import NSW_COVARIATES, load_nsw_cps
    frame = load_nsw_cps()
    X = frame[NSW_COVARIATES].to_numpy(float)
    X[:, 6:8] = np.log1p(X[:, 6:8])          # re74, re75 on the log scale
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    A = frame["treat"].to_numpy(int)
    e = LogisticRegression(C=1e4, solver="newton-cholesky").fit(X, A).predict_proba(X)[:, 1]
    keep = (frame["trial"].to_numpy() == 1) | (e >= min_propensity)
    X = X[keep]
    return (X - X.mean(axis=0)) / X.std(axis=0), A[keep]


# -- runner -----------------------------------------------------------------------------------
def _path(out, tag):
    """The results store of setting ``tag`` beside ``out`` (with ``out``'s suffix)."""
    if out is None:
        return None
    return _beside(out, f"{tag}{Path(out).suffix or '.csv'}")


def _beside(out, name: str) -> Path:
    """A file beside the results file ``out``: ``<stem>_<name>`` in its folder."""
    out = Path(out)
    return out.with_name(f"{out.stem}_{name}")


def _compact(res: pd.DataFrame) -> pd.DataFrame:
    """Replication table without the diagnostics column, rounded to 6 significant digits
    (small enough to keep beside the summary when the resumable raw table is not)."""
    cols = [c for c in ("rep", "estimator", "estimate", "std_error", "covered", "pehe",
                        "seconds") if c in res.columns]
    out = res[cols].copy()
    for c in cols[2:]:
        out[c] = out[c].map(lambda v: float(f"{v:.6g}"))
    return out.sort_values(["estimator", "rep"])


def _study(settings, reps, seed, n_jobs, backend, scheduler, out, figure_metric="bias"):
    from causalkit.simulation import run_study, summarize
    tables, raw = [], []
    for tag, design, estimators, n_reps in settings:
        res = run_study(design, estimators, n_reps, seed, n_jobs=n_jobs, backend=backend,
                        scheduler=scheduler, out=_path(out, tag), progress=False)
        summary = summarize(res)
        summary.insert(0, "setting", tag)
        if out is not None:
            _compact(res).to_csv(_beside(out, f"{tag}_estimates.csv"), index=False)
        tables.append(summary)
        raw.append(res.assign(setting=tag))
    table = pd.concat(tables).reset_index().set_index(["setting", "estimator"])
    if out is not None:
        table.to_csv(_beside(out, "summary.csv"))
        out = Path(out)
        from causalkit.longterm.plots import plot_study
        fig = plot_study(table)
        fig.savefig(out.with_suffix(".png"), dpi=110, bbox_inches="tight")
    return table


def linear_gaussian(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
                    quick=False) -> pd.DataFrame:
    """Linear-Gaussian design with closed-form truth at 10-40% drop-out per stage."""
    from causalkit.longterm.dgp import LinearGaussianDesign
    reps = reps or (20 if quick else 400)
    rates = (0.2,) if quick else (0.1, 0.2, 0.3, 0.4)
    settings = []
    for rate in rates:
        design = LinearGaussianDesign(dropout=(rate, rate, rate), xi=1.0)
        design.intercepts()
        dgp = partial(_synthetic, design=design, n=1000)
        estimators = {**linear_estimators(seed=seed),
                      "Complete-data T-learner (reference)": _complete_data_t_learner}
        settings.append((f"dropout{int(100 * rate)}", dgp, estimators, reps))
        settings.append((f"dropout{int(100 * rate)}_bootstrap", dgp,
                         bootstrap_estimators(seed=seed, names=BOOTSTRAPPED),
                         2 if quick else max(2, reps // 2)))
    return _study(settings, reps, seed, n_jobs, backend, scheduler, out)


def ihdp(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
         quick=False) -> pd.DataFrame:
    """Semi-synthetic IHDP (747 units, 3 stages) at 15% and 30% drop-out per stage. The
    networks (BalanceNet against unbalanced and placebo-penalised networks, SeqMSM and
    SequentialRegression) are compared in the study ``longterm-balancenet``."""
    from causalkit.longterm.dgp import LinearGaussianDesign
    X, A = _ihdp_covariates()
    reps = reps or (3 if quick else 200)
    settings = []
    for rate in ((0.3,) if quick else (0.15, 0.3)):
        design = LinearGaussianDesign(n_features=X.shape[1], dropout=(rate,) * 3, xi=1.0,
                                      seed=21)
        design.intercepts(X, A)
        dgp = partial(_fixed, design=design, X=X, treatment=A)
        settings.append((f"dropout{int(100 * rate)}", dgp,
                         linear_estimators(with_pehe=True, seed=seed), reps))
        settings.append((f"dropout{int(100 * rate)}_bootstrap", dgp,
                         bootstrap_estimators(seed=seed, names=BOOTSTRAPPED),
                         2 if quick else max(2, reps // 2)))
    return _study(settings, reps, seed, n_jobs, backend, scheduler, out)


def jobs(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
         quick=False) -> pd.DataFrame:
    """JOBS-like design: NSW plus the CPS controls on the common support (1,257 units),
    3 stages, 20% and 35% drop-out."""
    from causalkit.longterm.dgp import LinearGaussianDesign
    X, A = _jobs_covariates()
    reps = reps or (3 if quick else 200)
    settings = []
    for rate in ((0.2,) if quick else (0.2, 0.35)):
        design = LinearGaussianDesign(n_features=X.shape[1], dropout=(rate,) * 3, xi=1.0,
                                      propensity_scale=0.0, seed=31)
        design.intercepts(X, A)
        settings.append((f"dropout{int(100 * rate)}",
                         partial(_fixed, design=design, X=X, treatment=A),
                         linear_estimators(with_pehe=True, seed=seed), reps))
    return _study(settings, reps, seed, n_jobs, backend, scheduler, out)


#: Offset of the weights study's base seed: its draws are not those of the studies that check
#: the defaults it chooses (``default_rng([seed + offset, rep])``).
WEIGHTS_SEED_OFFSET = 100_000


def weights(reps=None, seed=2024, n_jobs=1, backend="loky", scheduler=None, out=None,
            quick=False) -> pd.DataFrame:
    """Choice of the default inverse weights: in-sample maximum likelihood, cross-fitted, or
    stage-wise balancing (linear design at 40%, IHDP at 15% and 30% drop-out per stage)."""
    from causalkit.longterm.dgp import LinearGaussianDesign
    reps = reps or (3 if quick else 200)
    linear = LinearGaussianDesign(dropout=(0.4,) * 3, xi=1.0)
    linear.intercepts()
    settings = [("linear_dropout40", partial(_synthetic, design=linear, n=1000),
                 weight_estimators(seed=seed), reps)]
    X, A = _ihdp_covariates()
    for rate in (() if quick else (0.15, 0.3)):
        design = LinearGaussianDesign(n_features=X.shape[1], dropout=(rate,) * 3, xi=1.0,
                                      seed=21)
        design.intercepts(X, A)
        settings.append((f"ihdp_dropout{int(100 * rate)}",
                         partial(_fixed, design=design, X=X, treatment=A),
                         weight_estimators(seed=seed), reps))
    return _study(settings, reps, seed + WEIGHTS_SEED_OFFSET, n_jobs, backend, scheduler, out)
