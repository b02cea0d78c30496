"""Simulation studies of the borrowing estimators (registered in :mod:`causalkit.studies`).

* :func:`paper_a`: the design of Yang, Li & Wu (2025) (:func:`~causalkit.borrowing.designs.
  paper_a_design`): linear and nonlinear outcomes, 30% of the external controls biased by
  0 (none), 0.1, 0.3 or 0.5; 500 replications per scenario, influence-function SEs.
* :func:`gao`: the reference design of Gao et al. (2025), every external control shifted by
  :math:`\\omega \\in \\{0.3, 3\\}`; 500 replications, influence-function SEs, estimated trial
  propensity.
* :func:`bootstrap_coverage`: pipeline-bootstrap intervals of AIB and ACIB in the Paper A
  linear design without bias (200 replications x 100 resamples by default).
* :func:`nsw_psid`: Paper A's real-data benchmark: the NSW trial with 80 of its 260 controls
  (drawn anew in each replication) borrowing PSID-1 comparison units, every estimator's error
  against the full experiment's benchmark; 200 draws.
* :func:`adaptive_bootstrap_coverage`: coverage of the recommended estimator's
  pipeline-bootstrap interval on exchangeable and biased grid cells, 200 x 200.
* :func:`selective_bootstrap_coverage`: the same for
  :class:`~causalkit.borrowing.SelectiveBorrowing`, whose default interval it is.
* :func:`adaptive_interval_coverage`: coverage and length of its default (FAB) interval on
  every grid cell, beside the interval that holds the amount borrowed fixed and trial-only's;
  500 replications per cell.
* :func:`design_grid`: operating characteristics of every estimator over the published design
  grid (:data:`GRID_SCENARIOS`), beside the oracle set (unbiased controls only) and the best
  fixed amount of borrowing in hindsight; 500 replications per cell.

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

__all__ = ["paper_a", "gao", "nsw_psid", "nsw_psid_design", "design_grid", "design_grid_core",
           "bootstrap_coverage", "adaptive_bootstrap_coverage", "selective_bootstrap_coverage",
           "adaptive_interval_coverage",
           "best_fixed_borrowing",
           "OracleEstimator", "StudyEstimator", "plot_summary", "CORE_ESTIMATORS",
           "GRID_SCENARIOS", "QUICK_GRID", "BOOTSTRAP_CELLS", "PAPER_A_SCENARIOS",
           "GAO_SCENARIOS"]

PAPER_A_SCENARIOS = {f"{outcome}-bias{bias:g}": {"outcome": outcome, "bias": bias}
                     for outcome in ("linear", "nonlinear") for bias in (0.0, 0.1, 0.3, 0.5)}
GAO_SCENARIOS = {f"omega{omega:g}": {"omega": omega} for omega in (0.3, 3.0)}
_ORDER = ["trial", "full", "calibrated-full", "power-prior", "robust-mixture", "selective",
          "aib", "acib", "adaptive"]
#: Cells of :func:`design_grid`: label -> (design, keyword arguments, trial propensity model).
#: Paper A sizes (400 trial units, 300 treated, 800 external controls) unless stated; biases are
#: in outcome SDs, on a random 30% or 50% of the external controls ("systematic": all of them);
#: binary biases shift the logit by 4 x bias.
GRID_SCENARIOS = {
    "linear-exchangeable": (paper_a_design, {}, "constant"),
    **{f"linear-{law}": (paper_a_design, {"errors": law}, "constant")
       for law in ("t5", "exponential", "lognormal")},
    **{f"linear-bias{b:g}x{f}": (paper_a_design, {"bias": b, "frac_biased": f / 100}, "constant")
       for f in (30, 50) for b in (0.25, 0.5, 1.0, 2.0)},
    "linear-systematic0.5": (paper_a_design, {"bias": 0.5, "frac_biased": 1.0}, "constant"),
    "nonlinear-exchangeable": (paper_a_design, {"outcome": "nonlinear"}, "constant"),
    "nonlinear-bias0.5x30": (paper_a_design, {"outcome": "nonlinear", "bias": 0.5}, "constant"),
    "binary-exchangeable": (paper_a_design, {"outcome": "binary"}, "constant"),
    "binary-bias0.5x30": (paper_a_design, {"outcome": "binary", "bias": 0.5}, "constant"),
    "1to1-exchangeable": (paper_a_design, {"n_treated": 200}, "constant"),
    "1to1-bias0.5x30": (paper_a_design, {"n_treated": 200, "bias": 0.5}, "constant"),
    **{f"gao-omega{w:g}": (gao_design, {"omega": w}, "logistic") for w in (0.0, 0.3, 1.0, 3.0)},
}
#: The cells of ``design_grid(quick=True)`` (CI).
QUICK_GRID = ("linear-exchangeable", "linear-exponential", "linear-bias0.5x30")


class StudyEstimator:
    """Picklable study estimator: fit ``ESTIMATORS[name](**params)``, return its Estimate with
    ``n_borrowed`` and ``share_biased`` in the details. ``random_state`` defaults to 0 so that
    cross-fitting folds and bootstrap resamples are reproducible. With the bootstrap both of its
    intervals are kept by name, whichever the estimator reports by default: the percentile
    interval as the result's (``ci_lower``, ``ci_upper``, ``coverage``) and the normal interval
    with the bootstrap SE in the details (``normal_lower``, ``normal_upper``,
    ``coverage_normal``)."""

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
            out.ci_method = "percentile"
        out.details["n_borrowed"] = n
        out.details["share_biased"] = (float(np.sum(est.borrowed_ * data["biased"]) / n)
                                       if n else np.nan)
        return out


class OracleEstimator:
    """Full borrowing of the unbiased external controls only (known in a simulation): the
    attainable target of any selection rule."""

    def __call__(self, data: dict):
        keep = np.r_[np.ones(int(data["s"].sum()), bool), ~data["biased"]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalkitWarning)
            est = ESTIMATORS["full"](variance_ratio=1.0, random_state=0).fit(
                data["X"][keep], data["y"][keep], data["a"][keep], trial=data["s"][keep])
            out = est.estimate(inference="influence")
        out.details["n_borrowed"] = est.n_borrowed_
        out.details["share_biased"] = 0.0
        return out


def best_fixed_borrowing(results: pd.DataFrame, grid: int = 101) -> pd.Series:
    """The best fixed combination :math:`(1-\\lambda)\\hat\\tau_{trial} + \\lambda\\hat\\tau_{full}`
    in hindsight: the :math:`\\lambda` on an even grid of [0, 1] with the smallest RMSE over the
    replications (a benchmark no data-driven rule can beat on average, since it knows the
    truth), with its bias, SD, RMSE and ``lambda``."""
    wide = results[results["error"] == ""].pivot(index="rep", columns="estimator",
                                                  values="estimate").dropna()
    truth = results.groupby("rep")["truth"].first().loc[wide.index]
    lam = np.linspace(0.0, 1.0, grid)
    est = (1 - lam)[None, :] * wide["trial"].to_numpy()[:, None] \
        + lam[None, :] * wide["full"].to_numpy()[:, None]
    err = est - truth.to_numpy()[:, None]
    rmse = np.sqrt(np.mean(err ** 2, axis=0))
    k = int(np.argmin(rmse))
    return pd.Series({"n_reps": len(wide), "bias": err[:, k].mean(), "sd": est[:, k].std(ddof=1),
                      "rmse": rmse[k], "lambda": lam[k]}, name="best-fixed")


def _run_scenarios(design, scenarios, estimators, reps, seed, n_jobs, backend, scheduler, out,
                   extra_rows=None):
    """Run ``design(**kwargs)`` for every scenario (``design`` may be None when each scenario is
    a ``(design, kwargs, estimators)`` triple) and stack the summaries; ``extra_rows(results)``
    returns further summary rows (a DataFrame indexed by estimator) per scenario."""
    from causalkit.simulation import run_study, summarize

    tables = []
    for label, kwargs in scenarios.items():
        cell_design, cell_estimators = design, estimators
        if design is None:
            cell_design, kwargs, cell_estimators = kwargs
        path = None if out is None else Path(out).with_name(
            f"{Path(out).stem}_{label}{Path(out).suffix or '.csv'}")
        results = run_study(partial(cell_design, **kwargs), cell_estimators, reps, seed,
                            n_jobs=n_jobs, backend=backend, scheduler=scheduler, out=path,
                            progress=False)
        table = summarize(results)
        if extra_rows is not None:
            table = pd.concat([table, extra_rows(results)])
            table.index.name = "estimator"
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


def _over_trial(summary: pd.DataFrame, metric: str, name: str, out) -> pd.DataFrame:
    """``summary`` with column ``name``: ``metric`` over trial-only's in the same scenario
    (rewriting the summary CSV beside ``out``)."""
    trial = summary.xs("trial", level="estimator")[metric]
    summary[name] = summary[metric] / trial.reindex(
        summary.index.get_level_values("scenario")).to_numpy()
    if out is not None:
        summary.to_csv(Path(out).with_name(f"{Path(out).stem}_summary.csv"))
    return summary


def _estimators(propensity="constant"):
    params = {"propensity": propensity}
    out = {name: StudyEstimator(name, **params) for name in _ORDER if name != "power-prior"}
    out["power-prior"] = StudyEstimator("power-prior")     # no propensity: a posterior
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


def nsw_psid_design(rng: np.random.Generator, n_controls: int = 80) -> dict:
    """One draw of Paper A's NSW/PSID construction: the 185 NSW treated units and ``n_controls``
    NSW controls drawn without replacement form the trial, the 2,490 PSID-1 units the external
    controls; the truth is the full experiment's benchmark (:data:`~causalkit.datasets.
    NSW_EXPERIMENTAL_BENCHMARK`, difference in mean 1978 earnings over all 445 NSW units)."""
    from causalkit.datasets import NSW_COVARIATES, NSW_EXPERIMENTAL_BENCHMARK, load_nsw_psid

    frame = load_nsw_psid()
    trial = frame["trial"].to_numpy() == 1
    treated = np.flatnonzero(trial & (frame["treat"].to_numpy() == 1))
    controls = rng.choice(np.flatnonzero(trial & (frame["treat"].to_numpy() == 0)), n_controls,
                          replace=False)
    rows = np.r_[treated, np.sort(controls), np.flatnonzero(~trial)]
    part = frame.iloc[rows]
    return {"X": part[NSW_COVARIATES].to_numpy(float), "y": part["re78"].to_numpy(float),
            "a": part["treat"].to_numpy(int), "s": part["trial"].to_numpy(int),
            "biased": np.zeros(int((~trial).sum()), bool), "truth": NSW_EXPERIMENTAL_BENCHMARK}


def nsw_psid(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
             out=None, quick: bool = False) -> pd.DataFrame:
    """Paper A's NSW/PSID analysis (:func:`nsw_psid_design`), every estimator with
    influence-function SEs, 200 draws of the 80 trial controls (``quick``: 5); ``rmse`` and
    ``bias`` are against the experimental benchmark, ``rmse_ratio`` over trial-only's."""
    reps = reps or (5 if quick else 200)
    summary = _run_scenarios(nsw_psid_design, {"nsw-psid": {}}, _estimators(), reps, seed,
                             n_jobs, backend, scheduler, out)
    return _over_trial(summary, "rmse", "rmse_ratio", out)


#: The estimators of :func:`design_grid_core`: the recommended one, its two ends, the Bayesian
#: dynamic-borrowing baseline and the oracle (the cheap ones: a minute per 100 replications of a
#: cell).
CORE_ESTIMATORS = ("trial", "full", "robust-mixture", "adaptive")


def design_grid(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky", scheduler=None,
                out=None, quick: bool = False, estimators=None) -> pd.DataFrame:
    """Every estimator on every cell of :data:`GRID_SCENARIOS` (influence-function SEs; the
    pipeline-bootstrap coverage is :func:`bootstrap_coverage`'s job), beside ``oracle`` (the
    unbiased controls only) and ``best-fixed`` (:func:`best_fixed_borrowing`). 500 replications
    per cell; ``quick``: the cells of :data:`QUICK_GRID`, 10 replications; ``estimators``: a
    subset of short names (default all). The summary adds ``rmse_ratio`` (RMSE over
    trial-only's in the same cell)."""
    reps = reps or (10 if quick else 500)
    cells = {k: v for k, v in GRID_SCENARIOS.items() if not quick or k in QUICK_GRID}
    scenarios = {}
    for label, (design, kwargs, propensity) in cells.items():
        chosen = _estimators(propensity)
        if estimators is not None:
            chosen = {name: chosen[name] for name in estimators}
        chosen["oracle"] = OracleEstimator()
        scenarios[label] = (design, kwargs, chosen)
    summary = _run_scenarios(None, scenarios, None, reps, seed, n_jobs, backend, scheduler,
                             out, extra_rows=lambda r: best_fixed_borrowing(r).to_frame().T)
    return _over_trial(summary, "rmse", "rmse_ratio", out)


def design_grid_core(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky",
                     scheduler=None, out=None, quick: bool = False) -> pd.DataFrame:
    """:func:`design_grid` restricted to :data:`CORE_ESTIMATORS` (and the oracle and best fixed
    rows): the acceptance table of the recommended estimator, 500 replications per cell."""
    return design_grid(reps, seed, n_jobs, backend, scheduler, out, quick,
                       estimators=CORE_ESTIMATORS)


def bootstrap_coverage(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky",
                       scheduler=None, out=None, quick: bool = False,
                       n_boot: int = 100) -> pd.DataFrame:
    """Pipeline-bootstrap coverage of AIB and ACIB in the Paper A linear design without biased
    controls: 200 replications x ``n_boot`` = 100 resamples by default (a bootstrap fit costs
    ``n_boot`` pipeline fits, so fewer replications than the other studies). The CSV holds
    the percentile interval (``ci_lower``, ``ci_upper``) and the normal interval with the
    bootstrap SE (``normal_lower``, ``normal_upper``; the estimators' default interval); the
    summary adds ``coverage_normal``."""
    reps = reps or (4 if quick else 200)
    n_boot = 10 if quick else n_boot
    estimators = {name: StudyEstimator(name, inference="bootstrap", n_boot=n_boot,
                                       random_state=0) for name in ("aib", "acib")}
    scenarios = {"linear-bias0": PAPER_A_SCENARIOS["linear-bias0"]}
    return _run_scenarios(paper_a_design, scenarios, estimators, reps, seed, n_jobs, backend,
                          scheduler, out)


#: Grid cells of :func:`adaptive_bootstrap_coverage`: exchangeable (normal, skewed, binary) and
#: biased (where the amount borrowed is most uncertain).
BOOTSTRAP_CELLS = ("linear-exchangeable", "linear-exponential", "linear-bias0.5x30",
                   "linear-bias1x30", "binary-exchangeable", "binary-bias0.5x30")


def _bootstrap_cells(names, reps, seed, n_jobs, backend, scheduler, out, quick, n_boot):
    """Pipeline-bootstrap coverage of the estimators ``names`` on the grid cells of
    :data:`BOOTSTRAP_CELLS`: ``reps`` (200) replications x ``n_boot`` resamples per cell
    (``quick``: two cells, 4 replications x 10 resamples); the summary's ``coverage`` is the
    percentile interval's, ``coverage_normal`` the normal interval's (:class:`StudyEstimator`)."""
    reps = reps or (4 if quick else 200)
    n_boot = 10 if quick else n_boot
    cells = BOOTSTRAP_CELLS[:2] if quick else BOOTSTRAP_CELLS
    scenarios = {}
    for label in cells:
        design, kwargs, propensity = GRID_SCENARIOS[label]
        scenarios[label] = (design, kwargs, {
            name: StudyEstimator(name, inference="bootstrap", n_boot=n_boot,
                                 propensity=propensity) for name in names})
    return _run_scenarios(None, scenarios, None, reps, seed, n_jobs, backend, scheduler, out)


def adaptive_bootstrap_coverage(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky",
                                scheduler=None, out=None, quick: bool = False,
                                n_boot: int = 200) -> pd.DataFrame:
    """Coverage of the recommended estimator's pipeline-bootstrap interval (``n_boot`` = 200
    percentile resamples) on the grid cells of :data:`BOOTSTRAP_CELLS`, 200 replications
    each (``quick``: two cells, 4 replications x 10 resamples)."""
    return _bootstrap_cells(("adaptive",), reps, seed, n_jobs, backend, scheduler, out, quick,
                            n_boot)


def selective_bootstrap_coverage(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky",
                                 scheduler=None, out=None, quick: bool = False,
                                 n_boot: int = 200) -> pd.DataFrame:
    """Coverage of :class:`~causalkit.borrowing.SelectiveBorrowing`'s pipeline bootstrap
    (``n_boot`` = 200 resamples) on the grid cells of :data:`BOOTSTRAP_CELLS`, 200 replications
    each (``quick``: two cells, 4 replications x 10 resamples): ``coverage`` is the percentile
    interval's, ``coverage_normal`` that of the normal interval with the bootstrap SE, the
    estimator's default. With the same ``seed`` (2024, as every borrowing study) the data sets
    are those of :func:`adaptive_bootstrap_coverage`."""
    return _bootstrap_cells(("selective",), reps, seed, n_jobs, backend, scheduler, out, quick,
                            n_boot)


def adaptive_interval_coverage(reps=None, seed: int = 2024, n_jobs: int = 1, backend="loky",
                               scheduler=None, out=None, quick: bool = False) -> pd.DataFrame:
    """Coverage and length of the recommended estimator's default interval (the FAB interval,
    :mod:`causalkit.fab`) on every cell of :data:`GRID_SCENARIOS`, beside its interval with the
    amount borrowed held fixed (``adaptive-conditional``, ``inference="influence"``) and
    trial-only's; 500 replications per cell (``quick``: the cells of :data:`QUICK_GRID`, 10).
    The summary adds ``length_ratio``, the mean interval length over trial-only's in the same
    cell."""
    reps = reps or (10 if quick else 500)
    cells = {k: v for k, v in GRID_SCENARIOS.items() if not quick or k in QUICK_GRID}
    scenarios = {}
    for label, (design, kwargs, propensity) in cells.items():
        scenarios[label] = (design, kwargs, {
            "adaptive": StudyEstimator("adaptive", inference="fab", propensity=propensity),
            "adaptive-conditional": StudyEstimator("adaptive", propensity=propensity),
            "trial": StudyEstimator("trial", propensity=propensity)})
    summary = _run_scenarios(None, scenarios, None, reps, seed, n_jobs, backend, scheduler, out)
    return _over_trial(summary, "mean_ci_length", "length_ratio", out)


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
