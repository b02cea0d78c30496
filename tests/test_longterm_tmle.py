"""The longitudinal TMLE: exact properties and sequential double robustness by simulation."""

import warnings

import numpy as np
import pytest
from sklearn.dummy import DummyClassifier, DummyRegressor

from causalkit.exceptions import CausalkitWarning
from causalkit.longterm import LinearGaussianDesign, SequentialRegression, SequentialTMLE

FLAT = DummyClassifier(strategy="prior")
VARIANTS = {"correct": {}, "wrong chain": {"outcome_model": DummyRegressor()},
            "wrong weights": {"propensity_model": FLAT, "selection_model": FLAT}}


@pytest.fixture(scope="module")
def sample():
    return LinearGaussianDesign(dropout=(0.2, 0.3, 0.3)).sample(np.random.default_rng(11),
                                                                n=600)


def _fit(est, s):
    return est.fit(s["X"], s["outcome"], s["treatment"], short=s["short"])


def test_plug_in_solves_the_efficient_influence_equation(sample):
    est = _fit(SequentialTMLE(variance="empirical"), sample)
    assert est.ate_ == pytest.approx(est.influence_.mean(), abs=1e-10)
    np.testing.assert_allclose(est.mu_, est.scores_.mean(axis=0), atol=1e-10)
    assert est.estimate().std_error == pytest.approx(
        est.influence_.std() / np.sqrt(est.influence_.size))


def test_constant_weights_give_iterated_conditional_expectations(sample):
    """With weights constant within an arm the OLS residuals have weighted mean zero, so no
    stage is shifted and the estimator is the (replace-all) sequential regression."""
    est = _fit(SequentialTMLE(propensity_model=FLAT, selection_model=FLAT), sample)
    ice = _fit(SequentialRegression(mode="replace_all"), sample)
    np.testing.assert_allclose(est.fluctuation_, 0.0, atol=1e-10)
    assert est.ate_ == pytest.approx(ice.ate_, abs=1e-10)


def _study(kwargs, reps, seed0, rate=0.4, n=1000):
    design = LinearGaussianDesign(dropout=(rate,) * 3, xi=1.0)
    out = []
    for r in range(reps):
        s = design.sample(np.random.default_rng(seed0 + r), n=n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalkitWarning)
            est = _fit(SequentialTMLE(**kwargs), s).estimate()
        out.append((est.value - s["truth"], est.std_error))
    err, se = np.array(out).T
    mc_se = err.std(ddof=1) / np.sqrt(reps)
    return err.mean(), mc_se, np.mean(np.abs(err) <= 1.959964 * se)


@pytest.mark.parametrize("variant", VARIANTS)
def test_sequential_double_robustness_reduced(variant):
    """Reduced check (60 replications, seeds 8100-8159, 40% drop-out per stage)."""
    bias, mc_se, cover = _study(VARIANTS[variant], 60, 8100)
    assert abs(bias) <= 3 * mc_se
    if variant == "correct":
        assert cover >= 0.85


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_sequential_double_robustness_full(variant):
    """400 replications (seeds 8200-8599), 20% drop-out per stage: bias within 2 MC SE with
    either side wrong; with both right, coverage 0.93-0.97."""
    bias, mc_se, cover = _study(VARIANTS[variant], 400, 8200, rate=0.2)
    assert abs(bias) <= 2 * mc_se
    if variant == "correct":
        assert 0.93 <= cover <= 0.97
