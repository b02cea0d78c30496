"""Simulation properties of the borrowing estimators (reduced here; full size with --runslow),
the study runner wiring, the CLI and the demo."""

import numpy as np
import pandas as pd
import pytest

from causalkit.borrowing.designs import paper_a_design
from causalkit.borrowing.studies import StudyEstimator, paper_a
from causalkit.simulation import run_study, summarize

ALL = ("trial", "full", "aib", "acib")


def _study(reps, bias, frac=0.3, names=ALL, small=True, seed=11):
    size = dict(n_trial=200, n_treated=150, n_external=400, n_features=4) if small else {}

    def design(rng):
        return paper_a_design(rng, bias=bias, frac_biased=frac, **size)

    ests = {n: StudyEstimator(n, random_state=0) for n in names}
    return summarize(run_study(design, ests, reps, seed=seed, n_jobs=2, progress=False))


def test_strong_bias_reduced():
    s = _study(reps=40, bias=2.0)
    assert s.loc["full", "bias"] < -5 * s.loc["full", "mc_se_bias"]      # clearly biased
    assert s.loc["full", "coverage"] < 0.5
    assert s.loc["aib", "rmse"] <= 1.1 * s.loc["trial", "rmse"]
    assert s.loc["aib", "mean_share_biased"] < 0.15                      # pool: 30% biased


@pytest.mark.slow
def test_acceptance_no_bias_rmse():
    s = _study(reps=300, bias=0.0, small=False)
    assert s.loc["aib", "rmse"] < s.loc["trial", "rmse"]
    assert s.loc["acib", "rmse"] < s.loc["trial", "rmse"]


@pytest.mark.slow
def test_acceptance_strong_bias():
    s = _study(reps=300, bias=2.0, small=False)
    assert s.loc["aib", "rmse"] <= 1.1 * s.loc["trial", "rmse"]
    assert s.loc["full", "bias"] < -5 * s.loc["full", "mc_se_bias"]


def test_paper_a_study_writes_and_resumes(tmp_path):
    out = tmp_path / "paper_a.csv"
    first = paper_a(reps=2, quick=True, out=out)
    assert set(first.index.get_level_values("scenario")) == {"linear-bias0", "linear-bias0.5"}
    for col in ("bias", "sd", "rmse", "coverage", "mean_ci_length", "mean_n_borrowed",
                "mean_share_biased"):
        assert col in first.columns
    assert (tmp_path / "paper_a_summary.csv").exists()
    again = paper_a(reps=2, quick=True, out=out)          # resumes: nothing recomputed
    pd.testing.assert_frame_equal(first.drop(columns="mean_seconds"),
                                  again.drop(columns="mean_seconds"))


def test_interval_study_reports_coverage_and_length_against_trial_only(tmp_path):
    from causalkit.borrowing.studies import adaptive_interval_coverage

    summary = adaptive_interval_coverage(reps=4, quick=True, out=tmp_path / "fab.jsonl")
    assert set(summary.index.get_level_values("estimator")) == {"adaptive",
                                                                "adaptive-conditional", "trial"}
    trial = summary.xs("trial", level="estimator")
    assert np.allclose(trial["length_ratio"], 1.0)
    # the FAB interval is never more than 1.090 times trial-only's (tests/test_fab.py)
    assert (summary.xs("adaptive", level="estimator")["length_ratio"] <= 1.0901).all()
    assert (tmp_path / "fab_summary.csv").exists()


def test_selective_bootstrap_study_reports_both_bootstrap_intervals(tmp_path):
    from causalkit.borrowing.studies import BOOTSTRAP_CELLS, selective_bootstrap_coverage

    summary = selective_bootstrap_coverage(quick=True, out=tmp_path / "sel.jsonl")
    assert list(summary.index.get_level_values("scenario")) == list(BOOTSTRAP_CELLS[:2])
    assert set(summary.index.get_level_values("estimator")) == {"selective"}
    assert summary["n_reps"].eq(4).all() and summary["n_errors"].eq(0).all()
    assert summary[["coverage", "coverage_normal"]].apply(lambda c: c.between(0, 1)).all().all()
    # the percentile interval is the bootstrap's (SE > 0, interval around the estimate)
    assert (summary["mean_se"] > 0).all() and (summary["mean_ci_length"] > 0).all()


def test_cli_borrow(capsys, tmp_path):
    from causalkit.cli import main
    rng = np.random.default_rng(0)
    d = paper_a_design(rng, n_trial=120, n_treated=80, n_external=150, n_features=3)
    frame = pd.DataFrame(d["X"], columns=["u", "v", "w"]).assign(y=d["y"], a=d["a"], s=d["s"])
    path = tmp_path / "hybrid.csv"
    frame.to_csv(path, index=False)
    png = tmp_path / "aib.png"
    code = main(["borrow", "--data", str(path), "--outcome", "y", "--treatment", "a",
                 "--trial", "s", "--estimators", "trial,aib", "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 0 and "AIB" in out and "n_borrowed" in out and png.exists()
    assert main(["borrow", "--data", str(path), "--outcome", "nope"]) == 2
    # the recommended estimator's default interval is reported as what it is
    args = ["borrow", "--data", str(path), "--outcome", "y", "--treatment", "a", "--trial", "s"]
    assert main(args + ["--estimators", "adaptive"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert any(line.startswith("Adaptive borrowing") and " fab " in line for line in table)
    assert main(args + ["--estimators", "trial", "--inference", "fab"]) == 2
    assert "inference must be one of" in capsys.readouterr().err


def test_demo_table(tmp_path):
    from causalkit.demo import DEMO_ESTIMATORS, run_demo
    table = run_demo(out_dir=tmp_path, plot=False, verbose=False)
    assert len(table) == 2 * len(DEMO_ESTIMATORS) and table["n_borrowed"].notna().all()
    cps, psid = table.loc["nsw_cps"], table.loc["nsw_psid"]
    assert list(cps.index)[0] == "Adaptive borrowing (recommended)"
    assert cps.loc["Trial only (AIPW)", "n_borrowed"] == 0
    assert cps.loc["Full borrowing", "n_borrowed"] == 15992
    assert psid.loc["Full borrowing", "n_borrowed"] == 2490
    assert 0 <= psid.loc["Adaptive borrowing (recommended)", "n_borrowed"] <= 2490
    assert (table["std_error"] > 0).all()
    # the recommended estimator reports its pipeline-bootstrap interval, which is not the
    # normal interval around the estimate
    adaptive = cps.loc["Adaptive borrowing (recommended)"]
    assert not np.isclose(adaptive["ci_upper"] - adaptive["estimate"],
                          adaptive["estimate"] - adaptive["ci_lower"])
