"""ECMP hashing and the collision closed form."""

import numpy as np
import pytest

from causalkit.systems.netsched import ECMP, collision_free_probability, ecmp_collision_trials


@pytest.mark.parametrize("k,s,expected", [(2, 2, 0.5), (4, 4, 0.09375), (4, 8, 0.41015625),
                                          (8, 8, 40320 / 8**8), (9, 8, 0.0)])
def test_closed_form_values(k, s, expected):
    assert collision_free_probability(k, s) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("k,s", [(2, 2), (4, 4), (4, 8), (8, 16), (16, 32)])
def test_monte_carlo_matches_closed_form_within_3_se(k, s):
    mc = ecmp_collision_trials(k, s, trials=20000, random_state=7)
    p = collision_free_probability(k, s)
    se = np.sqrt(p * (1 - p) / mc["trials"])      # SE under the closed form
    assert abs(mc["p_free"] - p) < 3 * se


def test_ecmp_is_deterministic_and_roughly_uniform():
    e = ECMP(seed=3)
    src = np.arange(40000)
    a = e.spines(8, src, src + 1, 0, 1)
    np.testing.assert_array_equal(a, ECMP(seed=3).spines(8, src, src + 1, 0, 1))
    assert not np.array_equal(a, ECMP(seed=4).spines(8, src, src + 1, 0, 1))
    counts = np.bincount(a, minlength=8)
    chi2 = ((counts - 5000) ** 2 / 5000).sum()
    assert chi2 < 24.3           # chi-square(7) 0.999 quantile


def test_bad_arguments():
    with pytest.raises(ValueError, match="k"):
        collision_free_probability(0, 4)
    with pytest.raises(ValueError, match="trials"):
        ecmp_collision_trials(2, 4, trials=0)
