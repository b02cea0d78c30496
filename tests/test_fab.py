"""FAB intervals (causalkit.fab): exact coverage whatever the indirect estimate's bias, shorter
when it is right, bounded when it is wrong, against the closed forms of the normal model."""

import numpy as np
import pytest
from scipy import stats

from causalkit.fab import FAB_W_FLOOR, FABInterval
from causalkit.inference import Estimate

Z = stats.norm.ppf(0.975)


def _draws(bias, seed, reps=4000, ratio=0.7):
    """Direct y ~ N(0, 1) and an independent indirect v ~ N(bias, ratio^2): the borrowing
    problem's pair when full borrowing's SE is ``ratio`` of trial-only's (seeds 7300-7399)."""
    rng = np.random.default_rng(seed)
    var_v = ratio ** 2 / (1 - ratio ** 2)
    y = rng.normal(size=reps)
    v = bias + rng.normal(scale=np.sqrt(var_v), size=reps)
    return np.column_stack(FABInterval(y, 1.0, v, var_v).conf_int(0.05)), var_v


@pytest.mark.parametrize("bias, seed", [(0.0, 7300), (2.0, 7301), (20.0, 7302)])
def test_coverage_is_exact_for_any_bias(bias, seed):
    ends, _ = _draws(bias, seed)
    covered = np.mean((ends[:, 0] < 0) & (ends[:, 1] > 0))
    assert abs(covered - 0.95) < 3 * np.sqrt(0.95 * 0.05 / len(ends))


def test_shorter_when_right_and_bounded_when_wrong():
    usual = 2 * Z
    right, _ = _draws(0.0, 7303)
    wrong, _ = _draws(50.0, 7304)
    assert np.mean(right[:, 1] - right[:, 0]) < 0.92 * usual
    # far from v the split sits at its floor on both ends: the fixed-split length
    fixed = stats.norm.ppf(1 - 0.05 * FAB_W_FLOOR) + stats.norm.ppf(1 - 0.05 * (1 - FAB_W_FLOOR))
    assert np.allclose(wrong[:, 1] - wrong[:, 0], fixed, rtol=1e-6)
    assert fixed / usual == pytest.approx(1.090, abs=5e-4)
    # and no interval is longer, at any bias
    between, _ = _draws(2.0, 7305)
    for ends in (right, between):
        assert np.all(ends[:, 1] - ends[:, 0] <= fixed + 1e-9)


def test_array_inputs_give_the_scalar_intervals():
    y, v = np.array([0.3, -1.2, 2.0]), np.array([0.1, 0.9, -3.0])
    lower, upper = FABInterval(y, 0.8, v, 0.5).conf_int(0.1)
    for i in range(3):
        assert FABInterval(y[i], 0.8, v[i], 0.5).conf_int(0.1) == (lower[i], upper[i])


def test_without_indirect_information_it_is_the_usual_interval_and_p_value():
    fab = FABInterval(1.3, 0.4, np.nan, np.inf)
    assert fab.conf_int(0.1) == pytest.approx((1.3 - 0.4 * stats.norm.ppf(0.95),
                                               1.3 + 0.4 * stats.norm.ppf(0.95)), abs=1e-9)
    assert fab.pvalue(0.0) == pytest.approx(2 * stats.norm.sf(1.3 / 0.4), rel=1e-6)


def test_p_value_is_the_level_at_which_the_interval_reaches_the_null():
    fab = FABInterval(0.9, 0.5, 0.6, 0.3)
    p = fab.pvalue(0.0)
    assert 0 < p < 1
    lo, _ = fab.conf_int(p)
    assert lo == pytest.approx(0.0, abs=1e-6)
    est = Estimate(0.8, 0.45, ci_method="fab", interval=fab)
    assert est.pvalue == p and est.zstat == pytest.approx(stats.norm.isf(p / 2))
    assert est.conf_int() == fab.conf_int(0.05)


def test_interval_is_equivariant():
    a, b = FABInterval(1.0, 0.5, 0.4, 0.2), FABInterval(3.0 + 2.0, 1.0, 3.0 + 0.8, 0.8)
    lo, hi = a.conf_int()
    assert b.conf_int() == pytest.approx((3.0 + 2 * lo, 3.0 + 2 * hi), abs=1e-8)


@pytest.mark.parametrize("kwargs, match", [
    ({"direct_se": -1.0}, "direct_se"), ({"direct": np.nan}, "direct"),
    ({"indirect_var": 0.0}, "indirect_var"), ({"indirect": np.nan}, "indirect"),
    ({"w_floor": 0.0}, "w_floor"), ({"w_floor": 0.6}, "w_floor")])
def test_bad_arguments_are_named(kwargs, match):
    args = {"direct": 1.0, "direct_se": 0.5, "indirect": 0.8, "indirect_var": 0.3, **kwargs}
    with pytest.raises(ValueError, match=match):
        FABInterval(**args)


def test_estimate_needs_the_interval_for_fab():
    with pytest.raises(ValueError, match="interval"):
        Estimate(1.0, 0.5, ci_method="fab")


@pytest.mark.parametrize("theta", [-1.5, -0.3, 0.0, 0.4, 2.0])
def test_split_minimises_the_prior_predictive_acceptance(theta):
    """The closed-form split against a numerical minimisation of the probability that the
    test of ``theta`` accepts when y ~ N(v, sigma^2 + tau^2) (the prior predictive)."""
    from scipy.optimize import minimize_scalar

    sigma, v, tau2, alpha = 1.0, 0.2, 0.6, 0.05
    fab = FABInterval(0.0, sigma, v, tau2, w_floor=1e-9)
    q_lo, _ = fab._quantiles(np.float64(theta), alpha)
    split = stats.norm.cdf(q_lo) / alpha
    scale = np.sqrt(sigma ** 2 + tau2)

    def accept(w):
        lo = theta + sigma * stats.norm.ppf(alpha * w)
        hi = theta + sigma * stats.norm.isf(alpha * (1 - w))
        return stats.norm.cdf((hi - v) / scale) - stats.norm.cdf((lo - v) / scale)

    best = minimize_scalar(accept, bounds=(1e-9, 1 - 1e-9), method="bounded",
                           options={"xatol": 1e-10})
    assert split == pytest.approx(best.x, abs=2e-3)
