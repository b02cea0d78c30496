"""Monte Carlo acceptance checks against the closed-form truth (fixed seeds, reduced size)."""

import pytest

from causalkit.longterm import LinearGaussianDesign
from causalkit.longterm.studies import linear_estimators, weight_estimators
from causalkit.simulation import run_study, summarize

# Both sides of each doubly robust estimator are checked: the default in-sample weights with
# a wrong (constant) outcome chain, and a correct chain with wrong (constant) weights.
CORRECT = ["SequentialIPW", "SequentialIPW (Hajek)", "SequentialRegression", "SeqMSM",
           "MonotoneAIPW", "MonotoneAIPW (wrong outcome chain)", "MonotoneAIPW (wrong weights)",
           "SequentialTMLE", "SequentialTMLE (wrong outcome chain)",
           "SequentialTMLE (wrong weights)"]
BIASED = ["CompleteCase", "NaiveIPW", "SequentialRegression (wrong chain)",
          "SequentialIPW (wrong weights)"]


def _summary(reps, n, seed):
    design = LinearGaussianDesign(dropout=(0.25, 0.25, 0.25), xi=1.0)
    design.intercepts()
    checked = {name: est for name, est in linear_estimators(seed=1).items()
               if name in CORRECT + BIASED}   # each estimator is seeded on its own
    res = run_study(lambda rng: design.sample(rng, n=n), checked, reps, seed, n_jobs=2,
                    progress=False)
    assert (res["error"] == "").all(), res.loc[res["error"] != "", "error"].tolist()
    return summarize(res).assign(
        robust_sd=res.groupby("estimator")["estimate"].apply(
            lambda v: (v.quantile(0.75) - v.quantile(0.25)) / 1.349))


@pytest.fixture(scope="module")
def summary():
    return _summary(reps=80, n=800, seed=11)


def test_consistent_estimators_recover_the_truth(summary):
    for name in CORRECT:
        row = summary.loc[name]
        assert row["truth"] == 3.0
        assert abs(row["bias"]) < 2 * row["mc_se_bias"], (name, row["bias"], row["mc_se_bias"])


def test_baselines_and_misspecified_single_robust_estimators_are_biased(summary):
    for name in BIASED:
        row = summary.loc[name]
        assert abs(row["bias"]) > 5 * row["mc_se_bias"], (name, row["bias"], row["mc_se_bias"])


def test_aipw_standard_error_matches_sampling_spread(summary):
    """The influence-function SE tracks the spread of the estimates (measured by the IQR, since
    inverse weights give the sampling distribution a few far-out replications) and the
    interval covers."""
    row = summary.loc["MonotoneAIPW"]
    print(row[["mean_se", "sd", "robust_sd", "coverage"]])
    assert 0.8 < row["mean_se"] / row["robust_sd"] < 1.25
    assert 0.88 <= row["coverage"] <= 1.0


@pytest.fixture(scope="module")
def full_size():
    return _summary(reps=500, n=1000, seed=12)


# The ratio (Hajek) sequential IPW is biased downwards in finite samples when the weights are
# heavy: -0.042 (3.2 MC SE) here; its median error is negative too.
HAJEK_BIAS = pytest.mark.xfail(strict=True, reason="finite-sample bias of the ratio form "
                                                   "under heavy weights")


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=HAJEK_BIAS) if "Hajek" in n else n
                                  for n in CORRECT])
def test_full_size_consistent_estimators(full_size, name):
    row = full_size.loc[name]
    assert abs(row["bias"]) < 2 * row["mc_se_bias"], (name, row["bias"], row["mc_se_bias"])


@pytest.mark.slow
def test_full_size_biased_estimators_and_coverage(full_size):
    for name in BIASED:
        row = full_size.loc[name]
        assert abs(row["bias"]) > 5 * row["mc_se_bias"], name
    assert 0.92 <= full_size.loc["MonotoneAIPW", "coverage"] <= 0.98


def test_balancing_weights_leave_the_weighting_estimators_unbiased():
    """Stage-wise balancing weights (``BalancingLogit``, the weights study's alternative to
    maximum likelihood) are consistent for a correctly specified logistic selection model, so
    every estimator using them recovers the truth, MonotoneAIPW also with a wrong chain."""
    design = LinearGaussianDesign(dropout=(0.25, 0.25, 0.25), xi=1.0)
    design.intercepts()
    estimators = {name: fn for name, fn in weight_estimators(seed=1).items()
                  if "balancing" in name}
    assert len(estimators) == 4
    res = run_study(lambda rng: design.sample(rng, n=800), estimators, 60, 13, n_jobs=2,
                    progress=False)
    assert (res["error"] == "").all(), res.loc[res["error"] != "", "error"].tolist()
    for name, row in summarize(res).iterrows():
        assert abs(row["bias"]) < 2 * row["mc_se_bias"], (name, row["bias"], row["mc_se_bias"])
