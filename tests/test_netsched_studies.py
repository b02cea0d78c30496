"""Study helpers against independent references (statsmodels, closed forms)."""

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from causalkit.systems.netsched.studies import paired_change, wilson_interval


@pytest.mark.parametrize("count,n", [(0, 50), (3, 40), (25, 50), (1999, 2000)])
def test_wilson_interval_matches_statsmodels(count, n):
    lo, hi = wilson_interval(count / n, n)
    ref = proportion_confint(count, n, alpha=0.05, method="wilson")
    np.testing.assert_allclose([lo, hi], ref, rtol=1e-9, atol=1e-12)


def test_paired_change_is_exact_for_proportional_pairs_and_covers():
    a = np.array([2.0, 4.0, 6.0])
    pc = paired_change(a, 0.25 * a)
    assert pc["change"] == pytest.approx(-0.75) and pc["se"] == pytest.approx(0.0, abs=1e-12)
    # coverage of the 95% interval for a true ratio of 0.6 (noisy paired replications)
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        base = rng.lognormal(0, 0.3, 10) + 1
        other = 0.6 * base + rng.normal(0, 0.05, 10)
        pc = paired_change(base, other)
        hits += pc["ci_lower"] <= -0.4 <= pc["ci_upper"]
    assert 0.91 <= hits / 400 <= 0.98
    assert np.isnan(paired_change([0.0, 0.0], [1.0, 2.0])["change"])
