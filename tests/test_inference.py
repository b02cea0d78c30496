"""Tests of the inference core: Estimate, difference in means, bootstrap, contrasts."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalkit import Estimate, bootstrap
from causalkit.exceptions import BootstrapFailureWarning
from causalkit.inference import contrast, difference_in_means, inverse_variance_pool
from causalkit.simulation import run_study, summarize


def test_estimate_normal_quantities_match_scipy():
    est = Estimate(1.5, 0.5, name="ATE", method="demo")
    lo, hi = est.conf_int(0.1)
    assert lo == pytest.approx(1.5 - stats.norm.ppf(0.95) * 0.5)
    assert hi == pytest.approx(1.5 + stats.norm.ppf(0.95) * 0.5)
    assert est.zstat == pytest.approx(3.0)
    assert est.pvalue == pytest.approx(2 * stats.norm.sf(3.0))


def test_estimate_reports():
    est = Estimate(2.0, 0.25, method="demo", details={"n_borrowed": 12})
    text = est.summary()
    assert "demo" in text and "n_borrowed" in text and "95%" in text
    frame = est.to_frame()
    assert list(frame.index) == ["demo"]
    assert frame.loc["demo", "n_borrowed"] == 12
    assert frame.loc["demo", "ci_lower"] == pytest.approx(est.conf_int()[0])
    assert "<table" in est._repr_html_() and "demo" in est._repr_html_()
    assert "se=0.250" in repr(est)


def _summary_row(est):
    """The cells of the estimate's row in ``summary()`` (the line starting with its name)."""
    line = next(r for r in est.summary().splitlines() if r.startswith(est.name))
    return line[len(est.name):].split()


def test_reports_format_dollars_without_exponents():
    # the AIB row of the NSW/CPS demo: CI [684.9, 3021.8] in dollars
    est = Estimate(1853.4, 596.2, method="AIB", details={"n_borrowed": 4798})
    lo, hi = est.conf_int()
    assert repr(est) == f"Estimate(AIB, ATE=1853, se=596, 95% CI=[{lo:.0f}, {hi:.0f}])"
    assert (round(lo), round(hi)) == (685, 3022)
    coef, se, z, p, ci_lo, ci_hi = _summary_row(est)
    assert (coef, se, ci_lo, ci_hi) == ("1853", "596", "685", "3022")
    assert float(z) == pytest.approx(est.zstat, abs=0.005)
    assert float(p) == pytest.approx(2 * stats.norm.sf(1853.4 / 596.2), abs=0.0005)
    big = Estimate(11960.0, 3100.0)
    for text in (big.summary(), repr(big), big._repr_html_()):
        assert "e+" not in text
    assert "<td>11960</td>" in big._repr_html_()


@pytest.mark.parametrize("value", [0.0251234, -0.31416, 3.0127, 42.1234, 0.00012345])
def test_reports_keep_four_significant_digits_of_small_effects(value):
    est = Estimate(value, abs(value) / 4)
    coef = _summary_row(est)[0]
    significant = coef.replace("-", "").replace(".", "").lstrip("0")
    assert len(significant) == 4, coef
    assert float(coef) == pytest.approx(value, rel=5e-4)


def test_reports_never_cut_row_labels():
    name = "target value difference of the learned rule and treat-all"
    est = Estimate(0.5, 0.1, name=name, method="Doubly robust (target)")
    assert any(row.startswith(name + " ") for row in est.summary().splitlines())
    assert name in est._repr_html_()
    assert est.to_frame().index[0] == "Doubly robust (target)"


def test_null_value_none_drops_the_test():
    est = Estimate(0.61, 0.02, name="target policy value", method="DR", null_value=None)
    assert np.isnan(est.zstat) and np.isnan(est.pvalue)
    assert "P>|z|" not in est.summary() and len(_summary_row(est)) == 4
    assert list(est.to_frame().columns) == ["estimate", "std_error", "ci_lower", "ci_upper"]
    assert "p_value" not in est._repr_html_()
    assert est.copy().null_value is None


def test_null_value_shifts_the_test():
    est = Estimate(1.3, 0.1, null_value=1.0)
    assert est.zstat == pytest.approx(3.0)
    assert est.pvalue == pytest.approx(2 * stats.norm.sf(3.0))
    assert "Null value:" in est.summary()
    assert est.conf_int() == Estimate(1.3, 0.1).conf_int()
    with pytest.raises(ValueError, match="null_value"):
        Estimate(1.0, 1.0, null_value=np.nan)


@pytest.mark.parametrize("kwargs, message", [
    ({"value": np.nan, "std_error": 1.0}, "value"),
    ({"value": 1.0, "std_error": -1.0}, "std_error"),
    ({"value": 1.0, "std_error": np.inf}, "std_error"),
    ({"value": 1.0, "std_error": 1.0, "ci_method": "percentile"}, "replicates"),
    ({"value": 1.0, "std_error": 1.0, "ci_method": "bca"}, "ci_method"),
])
def test_estimate_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Estimate(**kwargs)


def test_conf_int_rejects_bad_alpha():
    with pytest.raises(ValueError, match="alpha"):
        Estimate(1.0, 1.0).conf_int(1.5)


def test_difference_in_means_se_equals_welch_formula():
    rng = np.random.default_rng(3)
    a = np.r_[np.ones(40), np.zeros(70)].astype(int)
    y = rng.normal(size=110) * np.where(a == 1, 2.0, 1.0) + a
    est = difference_in_means(y, a)
    welch = stats.ttest_ind(y[a == 1], y[a == 0], equal_var=False)
    assert est.value == pytest.approx(y[a == 1].mean() - y[a == 0].mean())
    assert est.std_error == pytest.approx(est.value / welch.statistic, rel=1e-12)
    # the influence-function SE differs from the textbook one only by the ddof correction
    from_phi = Estimate.from_influence(est.value, est.influence)
    assert from_phi.std_error == pytest.approx(est.std_error, rel=0.02)


def test_difference_in_means_normal_ci_covers_95_percent():
    def design(rng):
        n = 100
        a = rng.permutation(np.repeat([0, 1], n // 2))
        y = 0.7 * a + rng.exponential(size=n) * (1 + a)  # E[y1 - y0] = 0.7 + 1
        return {"truth": 1.7, "y": y, "a": a}

    results = run_study(design, {"dim": lambda d: difference_in_means(d["y"], d["a"])}, 2000,
                        seed=11, progress=False)
    coverage = summarize(results).loc["dim", "coverage"]
    assert 0.93 <= coverage <= 0.97


def test_difference_in_means_needs_both_arms():
    with pytest.raises(ValueError, match="both arms"):
        difference_in_means(np.ones(5), np.zeros(5))


def _mean(data):
    return float(np.mean(data["y"]))


def test_bootstrap_se_of_mean_matches_closed_form():
    rng = np.random.default_rng(0)
    y = rng.normal(size=400)
    est = bootstrap(_mean, {"y": y}, n_boot=800, random_state=1)
    assert est.value == pytest.approx(y.mean())
    assert est.std_error == pytest.approx(y.std(ddof=1) / np.sqrt(y.size), rel=0.1)
    lo, hi = est.conf_int()
    assert lo < y.mean() < hi
    assert est.replicates.shape == (800,)
    assert est.ci_method == "percentile"


def test_bootstrap_does_not_depend_on_n_jobs():
    y = np.random.default_rng(0).normal(size=100)
    one = bootstrap(_mean, {"y": y}, n_boot=50, random_state=5, n_jobs=1)
    two = bootstrap(_mean, {"y": y}, n_boot=50, random_state=5, n_jobs=2)
    np.testing.assert_array_equal(one.replicates, two.replicates)


def test_bootstrap_strata_keep_their_sizes():
    group = np.r_[np.zeros(30), np.ones(10)]
    sizes = []

    def fit(data):
        sizes.append(int(data["g"].sum()))
        return float(np.mean(data["y"]))

    frame = pd.DataFrame({"g": group, "y": np.arange(40.0)})
    bootstrap(lambda d: fit({"g": d["g"].to_numpy(), "y": d["y"].to_numpy()}), frame, n_boot=20,
              random_state=0, strata=group)
    assert set(sizes) == {10}


def test_bootstrap_drops_failed_replicates_with_warning():
    a = np.r_[np.ones(4), np.zeros(56)].astype(int)
    y = np.random.default_rng(0).normal(size=60)

    def fit(data):
        if data["a"].sum() == 0:
            raise ValueError("one arm")
        return float(data["y"].mean())

    with pytest.warns(BootstrapFailureWarning):
        est = bootstrap(fit, {"a": a, "y": y}, n_boot=200, random_state=0)
    assert est.details["n_boot"] < 200


def test_bootstrap_rejects_bad_input():
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap(_mean, {"y": np.ones(3)}, n_boot=0)
    with pytest.raises(TypeError, match="fit_fn"):
        bootstrap(None, {"y": np.ones(3)})
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap(_mean, {"y": np.ones(3), "z": np.ones(4)})
    with pytest.raises(ValueError, match="strata"):
        bootstrap(_mean, {"y": np.ones(3)}, strata=np.ones(2))


def test_contrast_uses_the_correlation_of_influence_values():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 300)
    y = rng.normal(size=300) + a
    first = difference_in_means(y, a)
    same = contrast(first, first)
    assert same.value == 0 and same.std_error == 0
    with pytest.raises(ValueError, match="influence"):
        contrast(first, Estimate(1.0, 1.0))


def test_inverse_variance_pool_closed_form():
    pooled = inverse_variance_pool([Estimate(1.0, 1.0), Estimate(3.0, 1.0)])
    assert pooled.value == pytest.approx(2.0)
    assert pooled.std_error == pytest.approx(np.sqrt(0.5))
    with pytest.raises(ValueError, match="empty"):
        inverse_variance_pool([])
