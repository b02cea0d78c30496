"""Borrowing on the estimator core: front end, seeds, aliased columns, small arms, units."""

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.linalg import qr
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold

from causalkit._linalg import aliased_covariates, independent_columns
from causalkit.borrowing import (
    CalibratedFullBorrowing,
    CalibratedInfluenceBorrowing,
    InfluenceBorrowing,
    LinearOutcomeModel,
    LogisticOutcomeModel,
    PowerPriorBorrowing,
    SelectiveBorrowing,
    TrialOnly,
    influence_scores,
)
from causalkit.borrowing.designs import paper_a_design
from causalkit.datasets import NSW_COVARIATES, load_nsw_cps
from causalkit.exceptions import CausalkitWarning, RankDeficientWarning, SmallSampleWarning


def small(seed=0, **kw):
    d = paper_a_design(np.random.default_rng(seed), n_trial=200, n_treated=150,
                       n_external=300, n_features=4, **kw)
    return d["X"], d["y"], d["a"], d["s"]


@pytest.fixture(scope="module")
def nsw():
    return load_nsw_cps()


def nsw_subsample(nsw, seed, n_controls=60, controls=None):
    """NSW treated, ``n_controls`` random trial controls (from ``controls`` if given), CPS."""
    pool = controls if controls is not None else np.flatnonzero((nsw.trial == 1)
                                                                & (nsw.treat == 0))
    picked = np.random.default_rng(seed).choice(pool, n_controls, replace=False)
    rows = np.r_[np.flatnonzero((nsw.trial == 1) & (nsw.treat == 1)), picked,
                 np.flatnonzero(nsw.trial == 0)]
    return nsw.iloc[np.sort(rows)].copy()


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        return fn(*args, **kwargs)


# ----------------------------------------------------------------------------- front end
def test_dataframe_front_end_equals_arrays(nsw):
    cols = ["age", "educ", "re75"]
    df = nsw.sample(frac=1.0, random_state=0)          # shuffled index
    by_name = TrialOnly().fit(df, y="re78", treatment="treat", trial="trial", covariates=cols)
    arrays = TrialOnly().fit(df[cols].to_numpy(), df["re78"].to_numpy(), df["treat"].to_numpy(),
                             trial=df["trial"].to_numpy())
    assert by_name.estimate().value == arrays.estimate().value
    assert list(by_name.feature_names_in_) == cols
    # pandas roles are aligned on X's index, not matched by position
    perm = np.random.default_rng(1).permutation(len(df))
    shuffled = TrialOnly().fit(df[cols], df["re78"].iloc[perm], df["treat"].iloc[perm],
                               trial=df["trial"].iloc[perm])
    assert shuffled.estimate().value == by_name.estimate().value
    with pytest.raises(ValueError, match="y and X have different indexes"):
        y = df["re78"].copy()
        y.index = y.index + 10 ** 6
        TrialOnly().fit(df[cols], y, df["treat"], trial=df["trial"])


def test_old_positional_order_is_rejected():
    X, y, a, s = small()
    with pytest.raises(TypeError, match="trial="):
        TrialOnly().fit(X, y, a, s)
    with pytest.raises(ValueError, match="trial is required"):
        TrialOnly().fit(X, y, a)


def test_one_interval_vocabulary_and_not_fitted():
    X, y, a, s = small()
    with pytest.raises(NotFittedError):
        TrialOnly().estimate()
    est = TrialOnly().fit(X, y, a, trial=s)
    with pytest.raises(ValueError, match="inference"):
        est.estimate(inference="analytic")
    boot = est.estimate(inference="bootstrap", n_boot=10)
    assert est.estimate(inference="bootstrap", n_boot=10).replicates.tolist() == \
        boot.replicates.tolist()
    # the bootstrap resamples trial arms and external controls separately
    np.testing.assert_array_equal(est.data_.strata, 2 * est.data_.s + est.data_.a)


# ----------------------------------------------------------------------------- seeds
def test_calibration_folds_come_from_the_estimator_seed():
    X, y, a, s = small(bias=0.5)
    first = quiet(CalibratedFullBorrowing(random_state=3).fit, X, y, a, trial=s)
    again = quiet(CalibratedFullBorrowing(random_state=3).fit, X, y, a, trial=s)
    other = quiet(CalibratedFullBorrowing(random_state=4).fit, X, y, a, trial=s)
    for (_, te1), (_, te2) in zip(first.folds_, again.folds_, strict=True):
        np.testing.assert_array_equal(te1, te2)
    assert any(not np.array_equal(te1, te2) for (_, te1), (_, te2)
               in zip(first.folds_, other.folds_, strict=True))
    # folds are rows of the caller's data: pooled controls (trial controls and externals),
    # each once in a test fold, stratified by source
    tested = np.sort(np.concatenate([te for _, te in first.folds_]))
    np.testing.assert_array_equal(tested, np.flatnonzero(a == 0))
    for _, te in first.folds_:
        assert 0.2 < np.mean(s[te] == 0) / np.mean(s[a == 0] == 0) < 1.8
    assert len(first.calibration_model_.fold_models_["outcome"]) == 5
    # a splitter or precomputed folds work too
    splitter = quiet(CalibratedInfluenceBorrowing(cv=KFold(4, shuffle=True, random_state=0),
                                                  random_state=0).fit, X, y, a, trial=s)
    assert len(splitter.folds_) == 4


def test_ensemble_outcome_model_is_seeded_from_random_state():
    X, y, a, s = small()
    fits = [quiet(InfluenceBorrowing(outcome_model=RandomForestRegressor(n_estimators=10),
                                     random_state=5).fit, X, y, a, trial=s) for _ in range(2)]
    values = [f.estimate(inference="influence").value for f in fits]
    assert values[0] == values[1]
    assert fits[0].outcome_models_["control"].random_state is not None
    assert type(fits[0].score_model_) is LinearOutcomeModel    # scores stay parametric


# ----------------------------------------------------------------------------- aliased columns
def test_independent_columns_is_the_sequential_rank_rule():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    Z = np.column_stack([np.ones(30), X[:, 0], X[:, 1], X[:, 0] - 2 * X[:, 1], X[:, 2],
                         np.zeros(30), 3.0 + X[:, 2], X[:, 3]])
    kept = []
    for j in range(Z.shape[1]):                 # keep j iff it raises the rank (reference)
        if np.linalg.matrix_rank(Z[:, kept + [j]]) > len(kept):
            kept.append(j)
    np.testing.assert_array_equal(independent_columns(Z), kept)
    assert list(independent_columns(Z)) == [0, 1, 2, 4, 7]
    wide = rng.normal(size=(3, 6))                # more columns than rows
    assert list(independent_columns(wide)) == [0, 1, 2]


@pytest.mark.parametrize("gap", [1e-1, 1e-3, 1e-5, 1e-6, 1e-8, 1e-10])
def test_independent_columns_keeps_the_qr_answer_around_the_gram_shortcut(gap):
    # the last column is another plus ``gap`` times noise: its QR pivot ratio is about ``gap``
    # (far above the tolerance, near the shortcut's margin, above and below the tolerance); the
    # answer must be the QR rule's, column by column, at every distance
    rng = np.random.default_rng(11)
    X = rng.normal(size=(5000, 3))
    Z = np.column_stack([np.ones(5000), X, X[:, 1] + gap * rng.normal(size=5000)])
    kept = list(range(4))
    for j in range(4, Z.shape[1]):
        R = qr(Z[:, kept + [j]], mode="economic")[1]
        if abs(R[-1, -1]) > 1e-7 * np.linalg.norm(Z[:, j]):
            kept.append(j)
    assert list(independent_columns(Z)) == kept
    assert (4 in kept) == (gap > 1e-7)
    assert list(aliased_covariates(Z[:, 1:])) == ([] if 4 in kept else [3])


@pytest.mark.parametrize("model", [LinearOutcomeModel(), LogisticOutcomeModel(ridge=0.0)])
def test_outcome_models_drop_aliased_columns_like_statsmodels(model):
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(80, 3)), columns=["u", "v", "w"])
    X["u_plus_v"] = X["u"] + X["v"]
    X["flag"] = 0.0                                     # constant: aliased with the intercept
    eta = 0.3 + X["u"] - 0.5 * X["w"]
    binary = isinstance(model, LogisticOutcomeModel)
    y = (rng.random(80) < 1 / (1 + np.exp(-eta))).astype(float) if binary else \
        eta + rng.normal(size=80)
    with pytest.warns(RankDeficientWarning, match=r"\['u_plus_v', 'flag'\]"):
        fitted = model.fit(X, y)
    reduced = sm.add_constant(X[["u", "v", "w"]])
    ref = (sm.Logit(y, reduced).fit(disp=0, tol=1e-12) if binary
           else sm.OLS(y, reduced).fit())
    # statsmodels converges further than fit_logistic's Newton-decrement stop (1e-8)
    np.testing.assert_allclose(fitted.predict(X), ref.predict(reduced),
                               rtol=1e-5 if binary else 1e-9)
    np.testing.assert_array_equal(fitted.coef_[3:], 0.0)
    plain = type(model)(**model.get_params()).fit(X[["u", "v", "w"]], y)
    np.testing.assert_allclose(fitted.predict(X), plain.predict(X[["u", "v", "w"]]), rtol=1e-12)
    # the influence scores are those of the model on the identified columns
    Xe = pd.DataFrame(rng.normal(size=(10, 3)), columns=["u", "v", "w"])
    Xe["u_plus_v"], Xe["flag"] = Xe["u"] + Xe["v"], 1.0
    ye = (rng.random(10) < 0.5).astype(float) if binary else rng.normal(size=10)
    np.testing.assert_allclose(
        influence_scores(fitted, X.to_numpy(), y, Xe.to_numpy(), ye),
        influence_scores(plain, X[["u", "v", "w"]].to_numpy(), y, Xe[["u", "v", "w"]].to_numpy(),
                         ye), rtol=1e-7)


def test_nsw_dummies_summing_to_the_intercept(nsw):
    """60 NSW trial controls plus a dummy that completes black + hisp to one: AIB crashed with
    LinAlgError (singular Hessian); it now drops the aliased column, as lm does, and gives the
    fit without it."""
    sub = nsw_subsample(nsw, seed=1)
    sub["not_black_nor_hisp"] = 1 - sub["black"] - sub["hisp"]
    cols = NSW_COVARIATES + ["not_black_nor_hisp"]
    with pytest.warns(RankDeficientWarning, match="not_black_nor_hisp"):
        est = InfluenceBorrowing(random_state=0).fit(sub, y="re78", treatment="treat",
                                                     trial="trial", covariates=cols)
    ref = quiet(InfluenceBorrowing(random_state=0).fit, sub, y="re78", treatment="treat",
                trial="trial", covariates=NSW_COVARIATES)
    assert est.estimate(inference="influence").value == ref.estimate(inference="influence").value
    assert list(est.feature_names_in_) == cols


def test_nsw_dummy_constant_among_trial_controls(nsw):
    """Trial controls without Hispanic men: ``hisp`` is aliased with the intercept in the
    trial-control model. Before, its near-singular Hessian gave meaningless influence scores
    (AIB $1,487 here); now ``hisp`` is dropped from that fit, with a warning, and the scores
    are those of least squares without it."""
    controls = np.flatnonzero((nsw.trial == 1) & (nsw.treat == 0) & (nsw.hisp == 0))
    sub = nsw_subsample(nsw, seed=0, controls=controls)
    with pytest.warns(RankDeficientWarning, match="hisp"):
        est = InfluenceBorrowing(random_state=0).fit(sub, y="re78", treatment="treat",
                                                     trial="trial", covariates=NSW_COVARIATES)
    data = est.data_
    ctrl = np.flatnonzero(data.controls)
    others = [j for j, name in enumerate(data.names) if name != "hisp"]
    Xc = data.X[ctrl][:, others]
    ols = sm.OLS(data.y[ctrl], sm.add_constant(Xc)).fit()
    np.testing.assert_allclose(est.score_model_.predict(data.X[ctrl]), ols.fittedvalues,
                               rtol=1e-9)
    reference = influence_scores(LinearOutcomeModel().fit(Xc, data.y[ctrl]), Xc, data.y[ctrl],
                                 data.X[data.n_trial:][:, others], data.y[data.n_trial:])
    np.testing.assert_allclose(est.influence_scores_, reference, rtol=1e-8)
    assert np.isfinite(est.estimate(inference="influence").std_error)


def test_power_prior_with_aliased_control_column():
    X, y, a, s = small(seed=2)
    X = np.column_stack([X, np.where((s == 1) & (a == 0), 0.0, X[:, 0] > 0)])   # x4
    with pytest.warns(RankDeficientWarning, match="x4"):
        pp = PowerPriorBorrowing(a0=0.0).fit(X, y, a, trial=s)
    Z = sm.add_constant(pp.data_.X)
    nT, at = pp.data_.n_trial, pp.data_.a[:pp.n_trial_]
    Zt, yt = Z[:nT], pp.data_.y[:nT]
    b1 = sm.OLS(yt[at == 1], Zt[at == 1]).fit().params
    b0 = sm.OLS(yt[at == 0], Zt[at == 0][:, :5]).fit().params           # without x4
    assert pp.estimate().value == pytest.approx(np.mean(Zt @ b1 - Zt[:, :5] @ b0), rel=1e-9)
    assert pp.coef_control_[5] == 0.0


# ----------------------------------------------------------------------------- small trials
def test_trial_arm_of_one_is_an_error():
    """A trial of one treated and one control unit fitted silently (TrialOnly SE from 2
    units); each arm now needs two."""
    X, y, a, s = small()
    s2 = np.where(np.arange(s.size) < 2, 1, 0)
    a2 = np.where(np.arange(s.size) == 0, 1, 0)
    with pytest.raises(ValueError, match="treatment: each trial arm"):
        TrialOnly().fit(X, y, a2, trial=s2)


def test_small_arm_warns():
    X, y, a, s = small()
    keep = np.r_[np.flatnonzero((s == 1) & (a == 1)),
                 np.flatnonzero((s == 1) & (a == 0))[:4], np.flatnonzero(s == 0)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = InfluenceBorrowing(random_state=0).fit(X[keep], y[keep], a[keep], trial=s[keep])
    messages = {w.category: str(w.message) for w in caught}
    assert "4 units, fewer than the 5 parameters" in messages[SmallSampleWarning]
    assert "['x3'] are aliased on the 4 fitting rows" in messages[RankDeficientWarning]
    assert np.isfinite(est.estimate(inference="influence").value)


# ----------------------------------------------------------------------------- units
def test_selective_borrowing_does_not_depend_on_outcome_units(nsw):
    """Its threshold was in outcome units: 69 / 1,269 / 3,384 CPS controls borrowed with 1978
    earnings in cents / dollars / thousands. It is now in residual SDs."""
    fits = {}
    for unit, factor in (("cents", 100.0), ("dollars", 1.0), ("thousands", 1e-3)):
        frame = nsw.assign(re78=nsw["re78"] * factor)
        est = quiet(SelectiveBorrowing(random_state=0).fit, frame, y="re78", treatment="treat",
                    trial="trial", covariates=NSW_COVARIATES)
        fits[unit] = (factor, est)
    borrowed = {unit: est.n_borrowed_ for unit, (_, est) in fits.items()}
    assert len(set(borrowed.values())) == 1, borrowed
    ref = fits["dollars"][1].estimate(inference="influence")
    for factor, est in fits.values():
        res = est.estimate(inference="influence")
        assert res.value == pytest.approx(factor * ref.value, rel=1e-8)
        assert res.std_error == pytest.approx(factor * ref.std_error, rel=1e-8)
        assert est.residual_sd_ == pytest.approx(factor * fits["dollars"][1].residual_sd_,
                                                 rel=1e-10)


def test_covariate_constant_in_the_trial():
    """A dummy that is 0 for every trial unit is aliased in every trial fit (dropped with a
    warning) and separates the trial from the external controls that have it (the ridge of the
    trial-participation model keeps that fit finite)."""
    X, y, a, s = small(seed=4)
    flag = np.where(s == 1, 0.0, np.arange(s.size) % 2)
    with pytest.warns(RankDeficientWarning, match="x4"):
        est = InfluenceBorrowing(random_state=0).fit(np.column_stack([X, flag]), y, a, trial=s)
    res = est.estimate(inference="influence")
    assert np.isfinite(res.value) and np.isfinite(res.std_error)
    assert est.score_model_.coef_[4] == 0.0
