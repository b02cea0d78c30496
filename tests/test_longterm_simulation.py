"""Monte Carlo acceptance checks against the closed-form truth (fixed seeds, reduced size)."""

import numpy as np
import pytest
from scipy.special import expit

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


def _score_statistics(design, sample, phi):
    """z statistics of ``mean(phi * score)`` for the drop-out models' scores ``R_{t-1} (R_t -
    lambda_t) h(H_t)`` and the propensity's ``(A - e(X)) h(X)``, for a few ``h``."""
    X, A, R = sample["X"], sample["treatment"], sample["observed"]
    Z = np.nan_to_num(np.column_stack([sample["short"], sample["outcome"]]))
    alpha = design.intercepts()
    scores = []
    for t in range(design.T):
        at_risk = R[:, t - 1] == 1 if t else np.ones(A.size, dtype=bool)
        residual = np.where(at_risk, R[:, t] - expit(alpha[t] + design._stay_index(X, A, Z, t)),
                            0.0)
        scores += [residual * h for h in (1.0, X[:, 0], A, Z[:, t - 1] if t else X[:, 1])]
    residual = A - expit(X @ design.psi)
    scores += [residual * h for h in (1.0, X[:, 0], X[:, 1])]
    products = np.array([phi * s for s in scores])
    return products.mean(axis=1) / (products.std(axis=1) / np.sqrt(A.size))


def test_efficient_influence_is_centred_and_orthogonal_to_the_nuisance_scores():
    """The design's efficient influence function (the efficiency bound behind the long-term
    docs) has mean 0 at the true ATE and is uncorrelated with every score of the drop-out and
    treatment models, which the inverse-weighting influence function is not."""
    design = LinearGaussianDesign(dropout=(0.4, 0.4, 0.4), xi=1.0)
    design.intercepts()
    sample = design.sample(np.random.default_rng(41), n=400_000)
    phi = design.efficient_influence(sample)
    assert abs(phi.mean()) < 4 * phi.std() / np.sqrt(phi.size)
    assert np.max(np.abs(_score_statistics(design, sample, phi))) < 4

    X, A, R = sample["X"], sample["treatment"], sample["observed"]
    Z = np.nan_to_num(np.column_stack([sample["short"], sample["outcome"]]))
    stay = np.prod([expit(a + design._stay_index(X, A, Z, t))
                    for t, a in enumerate(design.intercepts())], axis=0)
    e1 = expit(X @ design.psi)
    ipw = (R[:, -1] * Z[:, -1] * (A / e1 - (1 - A) / (1 - e1)) / stay) - design.ate()
    assert abs(ipw.mean()) < 4 * ipw.std() / np.sqrt(ipw.size)
    assert np.max(np.abs(_score_statistics(design, sample, ipw))) > 8


def test_efficient_variance_matches_the_sample_variance_of_the_influence_function():
    """The integrated-out variance (the efficiency bound the long-term docs cite) equals the
    sample variance of the efficient influence function where the latter is reliable (light
    drop-out): within 4 SE of the batch variances."""
    design = LinearGaussianDesign(dropout=(0.15, 0.15, 0.15), xi=1.0)
    design.intercepts()
    batches = [design.efficient_influence(design.sample(np.random.default_rng([42, b]),
                                                        n=100_000)).var(ddof=1)
               for b in range(8)]
    integrated = design.efficient_variance(np.random.default_rng(43), n_mc=400_000)
    se = np.std(batches, ddof=1) / np.sqrt(len(batches))
    assert abs(integrated - np.mean(batches)) < 4 * se, (integrated, np.mean(batches), se)
    assert se < 0.02 * integrated
