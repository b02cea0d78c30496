"""Statistical properties against known truths (fixed seeds) and the packaged studies.

Default tests are reduced Monte Carlo versions; the ``slow`` ones are study-sized.
"""

from functools import partial

import numpy as np
import pytest

from causalkit.policy import dgps, studies
from causalkit.policy.value import METHODS
from causalkit.simulation import run_study, summarize


def _value_study(spec, reps, n=2000, shift="moderate", policy="optimal", design="estimation"):
    m = dgps.SHIFTS[shift]
    pol = (dgps.optimal_policy if policy == "optimal" else dgps.soft_policy)(design)
    truth = dgps.true_value(design, pol, m)
    design_fn = partial(studies._design, design=design, shift=m, truth=truth, n_source=n,
                        n_target=n)
    estimators = {k: partial(studies._value_estimator, spec=spec, policy=pol, method=k)
                  for k in METHODS}
    return summarize(run_study(design_fn, estimators, reps, seed=11, progress=False))


@pytest.mark.parametrize("spec", ["correct", "outcome_wrong", "weights_wrong"])
def test_dr_unbiased_when_either_nuisance_is_right(spec):
    """outcome_wrong: (propensity, density ratio) right; weights_wrong: outcome right."""
    s = _value_study(spec, reps=60)
    dr = s.loc["dr"]
    assert abs(dr["bias"]) < 2 * dr["mc_se_bias"]
    assert 0.8 < dr["mean_se"] / dr["sd"] < 1.35          # the two-sample SE tracks the MC SD
    # the source-only estimator targets V_S = 1.85, not V_T = 2.95
    assert s.loc["source_only", "bias"] < -1.0
    if spec == "outcome_wrong":
        assert s.loc["direct", "bias"] < -0.4                # direct inherits the wrong outcome
    if spec == "weights_wrong":
        assert s.loc["ipw", "bias"] < -1.0                   # IPW needs the density ratio


def test_dr_fails_when_outcome_and_weights_are_both_wrong():
    s = _value_study("outcome_and_weights_wrong", reps=30)
    assert s.loc["dr", "bias"] < -0.15 and s.loc["dr", "coverage"] < 0.5


def test_target_learner_beats_source_trained_econml_tree_under_strong_shift():
    m = dgps.LEARNING_SHIFTS["strong"]
    optimum = dgps.true_value("learning", None, m)
    regrets = {"ck_tree": [], "econml_tree": []}
    for rep in range(3):
        data = studies._design(np.random.default_rng([5, rep]), design="learning", shift=m,
                               truth=optimum, n_source=3000, n_target=3000)
        for name, make in (("ck_tree", partial(studies._ck_learner, policy="tree",
                                               outcome="poly2")),
                           ("econml_tree", partial(studies._econml, forest=False))):
            out = studies._learner(data, make=make, design="learning", shift=m)
            regrets[name].append(out["regret"])
    assert np.mean(regrets["ck_tree"]) < 0.6 * np.mean(regrets["econml_tree"])


def test_study_runner_writes_resumable_tables(tmp_path):
    out = tmp_path / "econml.csv"
    summary = studies.versus_econml(reps=1, quick=True, out=out)
    assert {"regret", "regret_ratio_vs_econml_tree", "mean_seconds"} <= set(summary.columns)
    assert set(summary.index) == {"ck_tree", "ck_linear", "econml_tree", "econml_forest"}
    assert (summary["regret"] >= -0.01).all()
    assert (tmp_path / "econml-summary.csv").exists() and (tmp_path / "econml-summary.png").exists()
    again = studies.versus_econml(reps=1, quick=True, out=out)  # resumes: nothing recomputed
    assert np.allclose(again["regret"], summary["regret"])
    with pytest.raises(ValueError, match="spec"):
        studies.nuisance_spec("nothing_right")


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["correct", "outcome_wrong", "weights_wrong", "propensity_wrong"])
def test_reference_coverage_and_bias_full(spec):
    s = _value_study(spec, reps=200)
    dr = s.loc["dr"]
    assert abs(dr["bias"]) < 2 * dr["mc_se_bias"]
    if spec == "correct":
        assert 0.92 <= dr["coverage"] <= 0.98
    assert s.loc["source_only", "bias"] < -1.0


@pytest.mark.slow
def test_versus_econml_full(tmp_path):
    summary = studies.versus_econml(reps=40, out=tmp_path / "econml.csv")
    ratio = summary.set_index(["shift"], append=True)["regret_ratio_vs_econml_tree"]
    assert ratio.loc[("ck_tree", "strong")] < 0.7
    assert 0.5 < ratio.loc[("ck_tree", "none")] < 1.5


def test_overlap_grid_study_flags_every_miss(tmp_path):
    summary = studies.overlap_grid(reps=1, quick=True, out=tmp_path / "overlap.csv")
    assert len(summary) == 2 * 2 * len(dgps.OVERLAP_GRID)
    default = summary.loc["default"]
    assert (default["mean_miss_3se_unflagged"] == 0).all()
    assert (default.loc[default["case"] == "8 SD", "mean_flagged"] == 1).all()
    trim = summary.loc["trim"]
    assert (trim.loc[trim["case"] == "8 SD", "n_errors"] == 1).all()   # empty overlap region
    assert (tmp_path / "overlap-summary.csv").exists()
