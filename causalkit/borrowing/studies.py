"""Simulation studies of the borrowing estimators (registered in :mod:`causalkit.studies`).

* :func:`paper_a`: the design of Yang, Li & Wu (2025) (:func:`~causalkit.borrowing.designs.
  paper_a_design`): linear and nonlinear outcomes, 30% of the external controls biased by
  0 (none), 0.1, 0.3 or 0.5; 500 replications per scenario, influence-function SEs.
* :func:`gao`: the reference design of Gao et al. (2025), every external control shifted by
  :math:`\\omega \\in \\{0.3, 3\\}`; 500 replications, influence-function SEs, estimated trial
  propensity.
* :func:`bootstrap_coverage`: pipeline-bootstrap intervals of AIB and ACIB in the Paper A
  linear design without bias (60 replications x 50 resamples by default).

Metrics per estimator (from :func:`causalkit.simulation.summarize`): bias, SD, RMSE, mean SE,
coverage of the 95% interval, mean interval length, plus ``mean_n_borrowed`` and
``mean_share_biased`` (share of the borrowed controls that were biased; replications that
borrow none are skipped).
"""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.borrowing import ESTIMATORS
from causalkit.borrowing.designs import gao_design, paper_a_design
from causalkit.exceptions import CausalkitWarning

__all__ = ["paper_a", "gao", "bootstrap_coverage", "plot_summary", "StudyEstimator",
           "PAPER_A_SCENARIOS",
           "GAO_SCENARIOS"]

PAPER_A_SCENARIOS = {f"{outcome}-bias{bias:g}": {"outcome": outcome, "bias": bias}
                     for outcome in ("linear", "nonlinear") for bias in (0.0, 0.1, 0.3, 0.5)}
GAO_SCENARIOS = {f"omega{omega:g}": {"omega": omega} for omega in (0.3, 3.0)}
_ORDER = ["trial", "full", "calibrated-full", "power-prior", "selective", "aib", "acib"]


class StudyEstimator:
    """Picklable study estimator: fit ``ESTIMATORS[name](**params)``, return its Estimate with
    ``n_borrowed`` and ``share_biased`` in the details. ``random_state`` defaults to 0 so that
    cross-fitting folds and bootstrap resamples are reproducible."""

    def __init__(self, name: str, inference: str = "influence", n_boot: int = 100, **params):
        params.setdefault("random_state", 0)
        self.name, self.inference, self.n_boot, self.params = name, inference, n_boot, params

    def __call__(self, data: dict):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalkitWarning)
            est = ESTIMATORS[self.name](**self.params).fit(data["X"], data["y"], data["a"],
                                                           trial=data["s"])
            out = est.estimate(inference=self.inference, n_boot=self.n_boot)
        n = est.n_borrowed_
        if out.replicates is not None:
            out.details["normal_lower"], out.details["normal_upper"] = out.conf_int(
                method="normal")
        out.details["n_borrowed"] = n
        out.details["share_biased"] = (float(np.sum(est.borrowed_ & data["biased"]) / n)
                                       if n else np.nan)
        return out


def _run_scenarios(design, scenarios, estimators, reps, seed, n_jobs, backend, scheduler, out):
    from causalkit.simulation import run_study, summarize

    tables = []
    for label, kwargs in scenarios.items():
        path = None if out is None else Path(out).with_name(
            f"{Path(out).stem}_{label}{Path(out).suffix or '.csv'}")
        results = run_study(partial(design, **kwargs), estimators, reps, seed, n_jobs=n_jobs,
                            backend=backend, scheduler=scheduler, out=path, progress=False)
        table = summarize(results)
        if "normal_lower" in results:
            hit = ((results["normal_lower"] <= results["truth"])
                   & (results["truth"] <= results["normal_upper"]))
            table["coverage_normal"] = hit.groupby(results["estimator"]).mean()
        table.insert(0, "scenario", label)
        tables.append(table.reset_index())
    summary = pd.concat(tables, ignore_index=True).set_index(["scenario", "estimator"])
    if out is not None:
        summary.to_csv(Path(out).with_name(f"{Path(out).stem}_summary.csv"))
    return summary


def _estimators(propensity="constant"):
    params = {"propensity": propensity}
    out = {name: StudyEstimator(name, **params) for name in _ORDER if name != "power-prior"}
    out["power-prior"] = StudyEstimator("power-prior")
    return {name: out[name] for name in _ORDER}


def paper_a(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
            out=None, quick: bool = False) -> pd.DataFrame:
    """Paper A design, 8 scenarios x 7 estimators (influence-function SE); returns the summary.

    ``out`` names the replication CSV; one file per scenario is written beside it
    (``<stem>_<scenario>.csv``, resumable) plus ``<stem>_summary.csv``. ``quick``: 2 scenarios,
    20 replications.
    """
    reps = reps or (20 if quick else 500)
    scenarios = PAPER_A_SCENARIOS
    if quick:
        scenarios = {k: scenarios[k] for k in ("linear-bias0", "linear-bias0.5")}
    return _run_scenarios(paper_a_design, scenarios, _estimators(), reps, seed, n_jobs, backend,
                          scheduler, out)


def gao(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None, out=None,
        quick: bool = False) -> pd.DataFrame:
    """Gao et al. reference design (:math:`\\omega = 0.3, 3`), 7 estimators, logistic trial
    propensity (treatment depends on covariates there); returns the summary."""
    reps = reps or (20 if quick else 500)
    return _run_scenarios(gao_design, GAO_SCENARIOS, _estimators("logistic"), reps, seed,
                          n_jobs, backend, scheduler, out)


def bootstrap_coverage(reps=None, seed: int = 7, n_jobs: int = 1, backend="loky",
                       scheduler=None, out=None, quick: bool = False,
                       n_boot: int = 100) -> pd.DataFrame:
    """Pipeline-bootstrap coverage of AIB and ACIB in the Paper A linear design without biased
    controls: 200 replications x ``n_boot`` = 100 resamples by default (a bootstrap fit costs
    ``n_boot`` pipeline fits, so fewer replications than the other studies). The CSV holds
    the percentile interval (``ci_lower``, ``ci_upper``) and the normal interval with the
    bootstrap SE (``normal_lower``, ``normal_upper``); the summary adds
    ``coverage_normal``."""
    reps = reps or (4 if quick else 200)
    n_boot = 10 if quick else n_boot
    estimators = {name: StudyEstimator(name, inference="bootstrap", n_boot=n_boot,
                                       random_state=0) for name in ("aib", "acib")}
    scenarios = {"linear-bias0": PAPER_A_SCENARIOS["linear-bias0"]}
    return _run_scenarios(paper_a_design, scenarios, estimators, reps, seed, n_jobs, backend,
                          scheduler, out)


def plot_summary(summary: pd.DataFrame, metric: str = "rmse", ax=None):
    """Metric against scenario for every estimator (one line each)."""
    import matplotlib.pyplot as plt

    table = summary[metric].unstack("estimator")
    table = table[[c for c in _ORDER if c in table.columns]]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4))
    for name in table.columns:
        ax.plot(range(len(table)), table[name], "-o", ms=4, label=name)
    ax.set_xticks(range(len(table)), table.index, rotation=30, ha="right")
    ax.set_ylabel(metric)
    ax.legend(frameon=False, ncol=2, fontsize=8)
    ax.grid(alpha=0.3)
    return ax
