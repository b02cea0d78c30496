"""The main job: the NSW job-training trial borrowing external controls.

``causalkit demo`` fits every borrowing estimator of the effect of NSW training on 1978 earnings
and compares each to the experimental benchmark ($1,794), in two analyses:

* NSW/CPS: the whole NSW experiment as the trial, the 15,992 CPS-1 respondents as external
  controls;
* NSW/PSID as in Paper A (Yang, Li & Wu 2025): the 185 treated and 80 of the 260 NSW controls
  (one draw, seed 0) as the trial, the 2,490 PSID-1 respondents as external controls, the full
  experiment as the benchmark (``causalkit simulate borrowing-nsw-psid`` repeats the draw 200
  times).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from causalkit.datasets import NSW_COVARIATES, NSW_EXPERIMENTAL_BENCHMARK, load_nsw_cps
from causalkit.exceptions import CausalkitWarning

__all__ = ["run_demo", "demo_estimates"]

#: Demo rows: label -> short name in :data:`causalkit.borrowing.ESTIMATORS`.
DEMO_ESTIMATORS = {
    "Adaptive borrowing (recommended)": "adaptive",
    "Trial only (AIPW)": "trial",
    "Full borrowing": "full",
    "Calibrated full borrowing": "calibrated-full",
    "Power prior (empirical Bayes)": "power-prior",
    "Robust mixture prior": "robust-mixture",
    "Selective borrowing (adaptive lasso)": "selective",
    "AIB (influence-based)": "aib",
    "ACIB (calibrated influence-based)": "acib",
}


def demo_estimates(data: pd.DataFrame, covariates=NSW_COVARIATES) -> dict:
    """Fit the compared estimators; returns ``{label: Estimate}``.

    Every estimator uses ``covariates``, ``re78`` as outcome, ``treat`` and ``trial``. The
    recommended estimator reports its default interval (the FAB interval, exact whatever the
    external controls' bias: :mod:`causalkit.fab`); the others influence-function standard
    errors (``inference="influence"``; the priors' posterior SD), which treat a selected
    borrowed set as fixed -- their pipeline bootstrap is the honest interval for the selecting
    estimators but takes minutes on 16,000 external controls.
    """
    from causalkit.borrowing import ESTIMATORS

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        for label, name in DEMO_ESTIMATORS.items():
            est = ESTIMATORS[name](random_state=0).fit(data, y="re78", treatment="treat",
                                                       trial="trial", covariates=covariates)
            out[label] = (est.estimate() if name == "adaptive"
                          else est.estimate(inference="influence"))
    return out


def _paper_a_nsw_psid(seed: int = 0) -> pd.DataFrame:
    """One draw of Paper A's NSW/PSID trial (:func:`causalkit.borrowing.studies.nsw_psid_design`)
    as a data frame."""
    from causalkit.borrowing.studies import nsw_psid_design

    d = nsw_psid_design(np.random.default_rng(seed))
    frame = pd.DataFrame(d["X"], columns=NSW_COVARIATES)
    return frame.assign(treat=d["a"], re78=d["y"], trial=d["s"])


ANALYSES = {
    "nsw_cps": ("NSW trial with CPS-1 external controls", load_nsw_cps),
    "nsw_psid": ("Paper A: NSW treated + 80 NSW controls with PSID-1 external controls",
                 _paper_a_nsw_psid),
}


def run_demo(out_dir=".", plot: bool = True, verbose: bool = True) -> pd.DataFrame:
    """Fit every estimator on both analyses (:data:`ANALYSES`), print the comparison tables,
    write one CSV and one PNG per analysis.

    Returns
    -------
    pandas.DataFrame
        One row per analysis and estimator: estimate, std_error, ci_lower, ci_upper,
        n_borrowed, error_vs_benchmark.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {}
    for key, (title, load) in ANALYSES.items():
        data = load()
        estimates = demo_estimates(data)
        table = pd.concat([est.to_frame().set_axis([label]) for label, est in estimates.items()])
        if "n_borrowed" not in table:
            table["n_borrowed"] = np.nan
        table["benchmark"] = NSW_EXPERIMENTAL_BENCHMARK
        table["error_vs_benchmark"] = table["estimate"] - NSW_EXPERIMENTAL_BENCHMARK
        table.index.name = "estimator"
        table.to_csv(out_dir / f"{key}_comparison.csv")
        tables[key] = table
        if verbose:
            n_trial = int(data["trial"].sum())
            print(f"== {title}\ntrial: {n_trial} units ({int(data['treat'].sum())} treated); "
                  f"external controls: {len(data) - n_trial}; covariates: "
                  f"{', '.join(NSW_COVARIATES)}")
            print(f"experimental benchmark: ${NSW_EXPERIMENTAL_BENCHMARK:,.0f}\n")
            cols = ["estimate", "std_error", "ci_lower", "ci_upper", "n_borrowed",
                    "error_vs_benchmark"]
            with pd.option_context("display.width", 140, "display.max_columns", 10):
                print(table[cols].round(0).to_string(), end="\n\n")
        if plot:
            _save_figure(estimates, title, out_dir / f"{key}_comparison.png")
            if verbose:
                print(f"wrote {out_dir / f'{key}_comparison.csv'} and "
                      f"{out_dir / f'{key}_comparison.png'}\n")
    return pd.concat(tables, names=["analysis"])


def _save_figure(estimates: dict, title: str, path: Path) -> None:
    import matplotlib
    import matplotlib.pyplot as plt

    from causalkit.plotting import plot_estimates
    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg"):
        plt.switch_backend("Agg")
    ax = plot_estimates(estimates, reference=NSW_EXPERIMENTAL_BENCHMARK,
                        reference_label="experimental benchmark",
                        xlabel="effect on 1978 earnings ($)")
    ax.set_title(title)
    ax.figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(ax.figure)
