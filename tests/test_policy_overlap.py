"""Overlap checks of TargetPolicyValue on the overlap grid of causalkit.policy.dgps.

The grid shifts the target mean of x1 by 0, 1, 2, 4 and 8 SD, or moves 10% / 30% of the target
5 SD beyond the source (partial non-support). The truths are Monte Carlo means of the known
outcome model. The check thresholds were chosen on the "estimation" design with seeds 100-119;
these tests use seeds 0-1 and 1000+ and the "nonlinear" design as well.
"""

import warnings

import numpy as np
import pytest

from causalkit.exceptions import CausalkitWarning, OverlapWarning
from causalkit.policy import TargetPolicyValue, dgps
from causalkit.policy.value import TRIMMED_ESTIMAND

SHIFT_ORDER = ("0 SD", "1 SD", "2 SD", "4 SD", "8 SD")


def _data(design, case, seed, n=2000):
    shift, outside = dgps.OVERLAP_GRID[case]
    return dgps.simulate(design, np.random.default_rng(seed), n_source=n, n_target=n,
                         shift=shift, outside_share=outside)


def _fit(data, **kwargs):
    kwargs.setdefault("random_state", 0)
    return TargetPolicyValue(**kwargs).fit(data["X_source"], data["y"], data["treatment"],
                                           X_target=data["X_target"])


def _grid_case(design, case, seed):
    """(report, |error| / SE, OverlapWarnings raised by the fit) for one grid cell."""
    data = _data(design, case, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = _fit(data, random_state=seed)
    policy = dgps.optimal_policy(design)
    shift, outside = dgps.OVERLAP_GRID[case]
    truth = dgps.true_value(design, policy, shift, outside_share=outside, n_mc=400_000)
    res = est.estimate(policy)
    overlap = [w for w in caught if issubclass(w.category, OverlapWarning)]
    return est.overlap_, abs(res.value - truth) / res.std_error, overlap


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("design", ["estimation", "nonlinear"])
def test_alarm_never_weakens_and_flags_every_miss(design, seed):
    cells = {case: _grid_case(design, case, seed) for case in dgps.OVERLAP_GRID}
    for case, (report, z, caught) in cells.items():
        assert bool(caught) == report["poor_overlap"], case
        if z > 3:                                         # a CI that misses by > 3 SE is flagged
            assert report["poor_overlap"], (case, z)
    for case in ("0 SD", "1 SD"):                         # no alarm without a real problem
        assert not cells[case][2], case
    flags = [cells[c][0]["poor_overlap"] for c in SHIFT_ORDER]
    assert flags == sorted(flags)                         # once raised, it stays raised
    shares = [cells[c][0]["unsupported_share"] for c in SHIFT_ORDER]
    assert shares == sorted(shares) and shares[-1] > 0.99
    # the mean density ratio over the source falls with the share of target mass it covers
    means = [cells[c][0]["mean_weight"] for c in ("2 SD", "4 SD", "8 SD")]
    assert means == sorted(means, reverse=True) and means[-1] < 0.05
    partial = [cells[c][0] for c in ("10% outside", "30% outside")]
    assert all(r["poor_overlap"] for r in partial)
    assert 0.07 < partial[0]["unsupported_share"] < partial[1]["unsupported_share"] < 0.35
    message = str(cells["30% outside"][2][0].message)
    assert "x0 (" in message and "of 2000 target units" in message   # names column and units
    assert list(partial[1]["outside_box"])[0] == "x0"


def test_raise_and_the_no_shift_case():
    with pytest.raises(ValueError, match=r"on_poor_overlap='raise': poor overlap .* x0"):
        _fit(_data("estimation", "4 SD", 3), on_poor_overlap="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error", OverlapWarning)
        est = _fit(_data("estimation", "0 SD", 3), on_poor_overlap="raise")
        untrimmed = _fit(_data("estimation", "0 SD", 3), on_poor_overlap="trim")
    assert est.n_trimmed_target_ == 0 and not est.overlap_["poor_overlap"]
    # nothing trimmed: the influence interval stays the default
    assert untrimmed.n_trimmed_target_ == untrimmed.n_trimmed_source_ == 0
    assert untrimmed.estimate(1).replicates is None
    with pytest.raises(ValueError, match="on_poor_overlap must be one of"):
        _fit(_data("estimation", "0 SD", 3), on_poor_overlap="drop")
    with pytest.raises(ValueError, match="domain_model must be a classifier or one of"):
        _fit(_data("estimation", "0 SD", 3), domain_model="forest")


def test_trim_changes_the_estimand_and_says_so():
    data = _data("nonlinear", "30% outside", 4)
    est = _fit(data, on_poor_overlap="trim")
    # every target unit moved 5 SD out is trimmed and few others; the source loses only the
    # units outside its own 0.1%-99.9% quantile box (about 2 per tail and column: 12)
    assert 560 <= est.n_trimmed_target_ <= 640 and est.n_trimmed_source_ <= 20
    assert est.mu_target_.shape[0] == 2000 - est.n_trimmed_target_
    assert not est.overlap_region(np.array([[8.0, 0.0, 0.0]]))[0]
    assert est.overlap_region(np.zeros((1, 3)))[0]
    # a trimmed fit defaults to the pipeline bootstrap, which refits the region on each resample
    res = est.estimate(1, n_boot=20)
    assert res.ci_method == "percentile" and len(res.replicates) == 20
    assert res.name == TRIMMED_ESTIMAND and res.details["trimmed_target"] == est.n_trimmed_target_
    assert "overlap region" in est.summary(1, n_boot=20)
    assert "trimmed_target" in est.to_frame(1, n_boot=20).columns
    assert est.estimate(1, inference="influence").replicates is None
    with pytest.raises(ValueError, match="0 of 2000 target units lie in the overlap region"):
        _fit(_data("nonlinear", "8 SD", 4), on_poor_overlap="trim")


def _trim_coverage(case, reps, n):
    """Coverage of the trimmed-population value by the influence interval (the bootstrap, a
    trimmed fit's default, is checked at study size in
    ``simulations/policy_trim_bootstrap_check.py``) and mean z over ``reps`` data sets."""
    design = "nonlinear"
    policy = dgps.optimal_policy(design)
    shift, outside = dgps.OVERLAP_GRID[case]
    hits, zs = [], []
    for seed in range(1000, 1000 + reps):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalkitWarning)
            est = _fit(_data(design, case, seed, n=n), on_poor_overlap="trim", random_state=seed)
        res = est.estimate(policy, inference="influence")
        truth = dgps.true_value(design, policy, shift, outside_share=outside,
                                region=est.overlap_region, n_mc=100_000, seed=seed)
        lo, hi = res.conf_int()
        hits.append(lo <= truth <= hi)
        zs.append((res.value - truth) / res.std_error)
    return float(np.mean(hits)), float(np.mean(zs))


def test_trimmed_estimates_cover_the_trimmed_population_value():
    coverage, mean_z = _trim_coverage("30% outside", reps=40, n=1000)
    # 40 reps: P(Binomial(40, 0.95) <= 33) < 0.01
    assert coverage >= 34 / 40 and abs(mean_z) < 0.5


@pytest.mark.slow
@pytest.mark.parametrize("case", ["2 SD", "4 SD", "10% outside", "30% outside"])
def test_trimmed_coverage_full(case):
    coverage, _ = _trim_coverage(case, reps=200, n=2000)
    half = 3 * np.sqrt(0.95 * 0.05 / 200)                  # 3 binomial SE around 0.95
    assert abs(coverage - 0.95) <= half


def test_boosting_domain_model_flags_partial_non_support():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet = _fit(_data("estimation", "0 SD", 5), domain_model="boosting")
    assert not [w for w in caught if issubclass(w.category, OverlapWarning)]
    assert not quiet.overlap_["poor_overlap"]
    with pytest.warns(OverlapWarning, match="outside the source support"):
        loud = _fit(_data("estimation", "10% outside", 5), domain_model="boosting")
    assert loud.overlap_["n_target_above_bound"] > 150     # of the about 200 units moved out


def test_direct_and_ipw_intervals_are_labelled_conditional():
    est = _fit(_data("estimation", "1 SD", 6, n=500))
    for method in ("direct", "ipw"):
        res = est.estimate(1, method)
        assert "SE conditional on the fitted nuisances" in res.method
        assert "conditional on the fitted nuisances" in est.summary(1, method)
        assert est.to_frame(1, method)["SE"].iloc[0] == "conditional on the fitted nuisances"
    dr = est.estimate(1, "dr")
    assert "conditional" not in dr.method and "SE" not in dr.details
    boot = est.estimate(1, "direct", inference="bootstrap", n_boot=20, progress=False)
    assert "conditional" not in boot.method                 # the pipeline bootstrap is not
