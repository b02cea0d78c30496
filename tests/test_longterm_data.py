"""Input validation of the long-term estimators (monotone pattern, identification, bad input)."""

import numpy as np
import pandas as pd
import pytest

from causalkit.longterm import (
    CompleteCase,
    LinearGaussianDesign,
    MonotoneAIPW,
    NaiveIPW,
    SeqMSM,
    SequentialIPW,
    SequentialRegression,
    check_monotone_data,
)

ESTIMATORS = [SequentialIPW, SequentialRegression, SeqMSM, MonotoneAIPW, CompleteCase, NaiveIPW]


@pytest.fixture(scope="module")
def sample():
    return LinearGaussianDesign(dropout=(0.2, 0.2, 0.2)).sample(np.random.default_rng(3), n=400)


def _args(s):
    return s["X"], s["treatment"], s["short"], s["outcome"]


def _roles(s):
    return dict(X=s["X"], y=s["outcome"], treatment=s["treatment"], short=s["short"])


def test_pattern_derived_from_nan(sample):
    data = check_monotone_data(**_roles(sample))
    assert data.n_stages == 3
    np.testing.assert_array_equal(data.R, sample["observed"])
    assert np.isnan(data.Z[data.R == 0]).all() and np.isfinite(data.Z[data.R == 1]).all()


def test_non_monotone_rows_are_listed(sample):
    short = sample["short"].copy()
    outcome = sample["outcome"].copy()
    rows = np.flatnonzero(np.isnan(short[:, 0]))[:3]
    outcome[rows] = 1.0                      # observed again after dropping out at stage 1
    with pytest.raises(ValueError, match="not monotone") as err:
        check_monotone_data(sample["X"], outcome, sample["treatment"], short=short)
    for r in rows:
        assert str(r) in str(err.value)


def test_everyone_drops_out_at_a_stage_is_not_identified(sample):
    outcome = np.full(400, np.nan)
    for est in (SequentialIPW(), SequentialRegression(), MonotoneAIPW()):
        with pytest.raises(ValueError, match="not identified"):
            est.fit(sample["X"], outcome, sample["treatment"], short=sample["short"])
    outcome = sample["outcome"].copy()
    outcome[sample["treatment"] == 1] = np.nan      # all treated drop out at the last stage
    with pytest.raises(ValueError, match="treatment=1.*not identified"):
        SequentialRegression().fit(sample["X"], outcome, sample["treatment"], short=sample["short"])


def test_stage_without_dropout_is_handled():
    s = LinearGaussianDesign(dropout=(0.0, 0.25, 0.25)).sample(np.random.default_rng(5), n=600)
    assert not np.isnan(s["short"][:, 0]).any()
    for cls in ESTIMATORS:
        est = cls().fit(**_roles(s))
        assert np.isfinite(est.estimate(n_boot=20).value)
    ipw = SequentialIPW().fit(**_roles(s))
    np.testing.assert_array_equal(ipw.continuation_[:, 0], 1.0)


def test_one_arm_empty(sample):
    with pytest.raises(ValueError, match="both arms"):
        SequentialIPW().fit(sample["X"], sample["outcome"], np.zeros(400), short=sample["short"])


def test_nan_in_covariates(sample):
    X = sample["X"].copy()
    X[7, 1] = np.nan
    with pytest.raises(ValueError, match=r"X contains NaN \(rows 7\)"):
        MonotoneAIPW().fit(X, sample["outcome"], sample["treatment"], short=sample["short"])


def test_explicit_observed(sample):
    R = sample["observed"].copy()
    Z = np.column_stack([sample["short"], sample["outcome"]])
    filled = np.nan_to_num(Z, nan=99.0)          # values behind observed == 0 are ignored
    data = check_monotone_data(sample["X"], filled[:, 2], sample["treatment"], short=filled[:, :2],
                               observed=R)
    np.testing.assert_array_equal(data.R, R)
    assert np.isnan(data.Z[R == 0]).all()
    with pytest.raises(ValueError, match="shape"):
        check_monotone_data(sample["X"], filled[:, 2], sample["treatment"], short=filled[:, :2],
                            observed=R[:, :2])
    R_bad = np.ones_like(R)
    with pytest.raises(ValueError, match="NaN values as observed"):
        check_monotone_data(sample["X"], sample["outcome"], sample["treatment"],
                            short=sample["short"], observed=R_bad)


def test_other_bad_input(sample):
    X, a, S, y = _args(sample)
    with pytest.raises(ValueError, match="treatment must be binary"):
        SequentialIPW().fit(X, y, a * 2, short=S)
    with pytest.raises(ValueError, match="y has length"):
        SequentialIPW().fit(X, y[:-1], a, short=S)
    with pytest.raises(ValueError, match="short has"):
        SequentialIPW().fit(X, y, a, short=S[:-1])
    with pytest.raises(ValueError, match="mode"):
        SequentialRegression(mode="bogus").fit(X, y, a, short=S)
    with pytest.raises(ValueError, match="weights"):
        SeqMSM(weights="bogus").fit(X, y, a, short=S)
    with pytest.raises(ValueError, match="propensity_clip"):
        SequentialIPW(propensity_clip=(0.5, 0.1)).fit(X, y, a, short=S)
    with pytest.raises(ValueError, match="cv"):
        MonotoneAIPW(cv=0).fit(X, y, a, short=S)
    est = SequentialRegression().fit(X, y, a, short=S)
    with pytest.raises(ValueError, match="columns"):
        est.effect(X[:, :2])
    with pytest.raises(ValueError, match="inference"):
        est.estimate(inference="magic")


def test_dataframe_input_and_single_stage(sample):
    X = pd.DataFrame(sample["X"], columns=[f"c{j}" for j in range(5)])
    short = pd.DataFrame(sample["short"], columns=["week1", "week2"])
    data = check_monotone_data(X, sample["outcome"], sample["treatment"], short=short)
    assert data.feature_names == ("c0", "c1", "c2", "c3", "c4", "week1", "week2")
    est = MonotoneAIPW(random_state=0).fit(X, sample["outcome"], sample["treatment"])
    assert est.n_stages_ == 1


def test_container_for_the_bootstrap(sample):
    data = check_monotone_data(**_roles(sample))
    assert data.n_rows == 400
    np.testing.assert_array_equal(data.strata, sample["treatment"])
    idx = np.arange(0, 400, 2)
    part = data.take(idx)
    np.testing.assert_array_equal(part.Z, data.Z[idx])         # NaN where not observed
    assert part.feature_names == data.feature_names
    # a resample in which every treated unit at risk drops out is rejected as a fresh fit is
    treated_gone = np.flatnonzero((data.a == 0) | (data.R[:, -1] == 0))
    with pytest.raises(ValueError, match="not identified"):
        data.take(treated_gone)
