"""The policy estimators on the estimator core: argument order, DataFrame front end, seeds,
the two-sample bootstraps, units, reports and input errors."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold

from causalkit.exceptions import CausalkitWarning, RankDeficientWarning
from causalkit.inference import bootstrap
from causalkit.policy import TargetPolicyLearner, TargetPolicyValue, dgps

COLS = ["age", "dose", "score"]


def _data(seed=0, n_source=400, n_target=300):
    return dgps.simulate("estimation", np.random.default_rng(seed), n_source=n_source,
                         n_target=n_target, shift=dgps.SHIFTS["moderate"])


def _arrays(d):
    return (d["X_source"], d["y"], d["treatment"]), {"X_target": d["X_target"]}


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        return fn(*args, **kwargs)


def _first_feature_rule(X):
    return (np.asarray(X, dtype=float)[:, 0] > 0).astype(int)


@pytest.fixture(scope="module")
def data():
    return _data()


# ------------------------------------------------------------------- seeds (regressions)
@pytest.mark.parametrize("policy", ["tree", "mlp"])
def test_learner_random_state_fixes_value_and_policy(data, policy):
    """TargetPolicyLearner(random_state=0) with its default value estimator used to give a
    different value_ and policy on every fit (the default TargetPolicyValue got no seed)."""
    args, kw = _arrays(data)
    fits = [TargetPolicyLearner(policy=policy, max_iter=40, random_state=0).fit(*args, **kw)
            for _ in range(2)]
    assert fits[0].value_.value == fits[1].value_.value
    assert fits[0].value_.std_error == fits[1].value_.std_error
    np.testing.assert_array_equal(fits[0].value_estimator_.source_folds_,
                                  fits[1].value_estimator_.source_folds_)
    np.testing.assert_array_equal(fits[0].predict_proba(data["X_target"]),
                                  fits[1].predict_proba(data["X_target"]))
    other = TargetPolicyLearner(policy=policy, max_iter=40, random_state=1).fit(*args, **kw)
    assert not np.array_equal(other.value_estimator_.source_folds_,
                              fits[0].value_estimator_.source_folds_)


def test_unseeded_nuisance_models_are_seeded_from_random_state(data):
    """A random forest without its own random_state is seeded from the estimator's, so two fits
    agree exactly; a different random_state changes the numbers."""
    args, kw = _arrays(data)

    def fit(seed):
        est = TargetPolicyValue(RandomForestRegressor(n_estimators=10, max_depth=3),
                                RandomForestClassifier(n_estimators=10, max_depth=3), cv=2,
                                random_state=seed)
        return _quiet(est.fit, *args, **kw).estimate(_first_feature_rule)

    assert fit(0).value == fit(0).value
    assert fit(0).value != fit(1).value


def test_value_fit_is_the_same_on_any_number_of_threads(data):
    """n_jobs fits the cross-fitting folds side by side: every fitted array, fold model and
    estimate equals the one-thread fit's."""
    args, kw = _arrays(data)
    one, two = (TargetPolicyValue(cv=3, n_jobs=n_jobs, random_state=0).fit(*args, **kw)
                for n_jobs in (1, 2))
    for name in ("mu_source_", "mu_target_", "propensity_", "weights_", "raw_weights_target_",
                 "domain_target_", "residual_weights_", "source_folds_", "target_folds_"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name), err_msg=name)
    for a, b in zip(one.domain_models_, two.domain_models_, strict=True):
        np.testing.assert_array_equal(a[-1].coef_, b[-1].coef_)
    e1, e2 = one.estimate(_first_feature_rule), two.estimate(_first_feature_rule)
    assert (e1.value, e1.std_error) == (e2.value, e2.std_error)


def test_learner_gives_its_threads_to_an_unset_value_and_replicates_refit_on_one(data,
                                                                                 monkeypatch):
    """The learner's n_jobs reaches a value estimator whose n_jobs is unset (a set one is
    kept); a bootstrap replicate refits with n_jobs=1, its own jobs spread the replicates."""
    args, kw = _arrays(data)
    learner = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", n_jobs=2,
                                  random_state=0).fit(*args, **kw)
    assert learner.value_estimator_.n_jobs == 2 and learner.value.n_jobs is None
    kept = TargetPolicyLearner(TargetPolicyValue(cv=2, n_jobs=1), policy="tree", n_jobs=2,
                               random_state=0).fit(*args, **kw)
    assert kept.value_estimator_.n_jobs == 1
    seen = []
    fit_data = TargetPolicyValue._fit_data

    def record(self, container):
        seen.append(self.n_jobs)
        return fit_data(self, container)

    monkeypatch.setattr(TargetPolicyValue, "_fit_data", record)
    _quiet(learner.estimate, n_boot=3, random_state=0)
    assert seen == [1, 1, 1]


# ------------------------------------------------------------------- plots (regression)
def test_value_plot_returns_the_overlap_figure(data):
    """TargetPolicyValue.plot() used to raise (plot_overlap got ``ax=``)."""
    est = TargetPolicyValue(cv=3, random_state=0).fit(*_arrays(data)[0], **_arrays(data)[1])
    fig = est.plot()
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    auc = est.diagnostics(warn=False)["domain_auc"]
    assert f"AUC = {auc:.2f}" in fig.axes[0].get_title()


def test_learner_plot_and_reports(data):
    args, kw = _arrays(data)
    learner = TargetPolicyLearner(policy="tree", depth=1, random_state=0).fit(*args, **kw)
    fig = learner.plot(n_boot=20, progress=False)
    assert isinstance(fig, Figure)
    lo, hi = learner.estimate(n_boot=20).conf_int()      # the title shows the default interval
    assert f"{learner.value_.value:.3g} [{lo:.3g}, {hi:.3g}]" in fig.axes[0].get_title()
    table = learner.to_frame()
    assert table["estimate"].iloc[0] == learner.value_.value
    assert "learned policy value" in learner.summary()
    assert learner.estimate().value == learner.value_.value
    assert learner.estimate() is not learner.value_          # a copy: alpha etc. set freely


def test_value_reports_without_a_policy_list_every_arm(data):
    est = TargetPolicyValue(cv=3, random_state=0).fit(*_arrays(data)[0], **_arrays(data)[1])
    table = est.to_frame()
    assert list(table.index) == ["arm 0 for all", "arm 1 for all"]
    for arm in (0, 1):
        assert table["estimate"].iloc[arm] == est.estimate(arm).value
    assert "target value of arm 1 for all" in est.summary()
    assert est.to_frame(_first_feature_rule)["estimate"].iloc[0] == est.estimate(
        _first_feature_rule).value


def test_not_fitted_errors(data):
    with pytest.raises(NotFittedError):
        TargetPolicyValue().estimate(1)
    with pytest.raises(NotFittedError):
        TargetPolicyValue().plot()
    with pytest.raises(NotFittedError):
        TargetPolicyLearner().estimate()
    with pytest.raises(NotFittedError):
        TargetPolicyLearner().plot()
    with pytest.raises(NotFittedError):
        TargetPolicyLearner().predict(data["X_target"])
    with pytest.raises(NotFittedError):
        TargetPolicyLearner().policy_value()


# ------------------------------------------------------------------- argument order
def test_old_argument_order_is_rejected(data):
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    for cls in (TargetPolicyValue, TargetPolicyLearner):
        with pytest.raises(TypeError, match=r"X_target= by keyword; got 4 positional"):
            cls().fit(Xs, a, y, Xt)
        # the former order with X_target by keyword: y and treatment swapped
        with pytest.raises(ValueError, match=r"treatment must be a small set of arm labels.*"
                                             r"y and treatment swapped"):
            cls().fit(Xs, a, y, X_target=Xt)


# ------------------------------------------------------------------- DataFrame front end
def test_dataframe_front_end_matches_arrays(data):
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    source = pd.DataFrame(Xs, columns=COLS).assign(outcome=y, arm=a, row_id=np.arange(len(y)))
    # the target holds the covariates in another order, plus a column that is not one
    target = pd.DataFrame(Xt, columns=COLS)[["score", "age", "dose"]].assign(site=1.0)
    by_name = TargetPolicyValue(cv=3, random_state=0).fit(
        source, y="outcome", treatment="arm", X_target=target, covariates=COLS)
    by_array = TargetPolicyValue(cv=3, random_state=0).fit(Xs, y, a, X_target=Xt)
    assert list(by_name.feature_names_in_) == COLS
    np.testing.assert_array_equal(by_name.X_target_, Xt)
    # policies see DataFrames with the covariate names
    named = by_name.estimate(lambda X: (X["age"] > 0).astype(int))
    positional = by_array.estimate(_first_feature_rule)
    assert named.value == positional.value and named.std_error == positional.std_error
    learner = TargetPolicyLearner(TargetPolicyValue(cv=3), policy="tree", depth=1,
                                  random_state=0)
    learned = learner.fit(source, y="outcome", treatment="arm", X_target=target,
                          covariates=COLS)
    assert "age" in learned.plot().axes[0].get_xlabel()
    np.testing.assert_array_equal(learned.predict(pd.DataFrame(Xt, columns=COLS)),
                                  learned.predict(Xt))
    with pytest.raises(ValueError, match="differ from the fitted covariates"):
        learned.predict(pd.DataFrame(Xt, columns=["dose", "age", "score"]))


def test_series_roles_are_aligned_on_the_index(data):
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    X = pd.DataFrame(Xs, columns=COLS, index=np.arange(len(y)) + 100)
    perm = np.random.default_rng(3).permutation(len(y))
    y_s = pd.Series(y, index=X.index).iloc[perm]
    a_s = pd.Series(a, index=X.index).iloc[perm]
    shuffled = TargetPolicyValue(cv=3, random_state=0).fit(X, y_s, a_s, X_target=Xt)
    aligned = TargetPolicyValue(cv=3, random_state=0).fit(X, y, a, X_target=Xt)
    assert shuffled.estimate(1).value == aligned.estimate(1).value
    with pytest.raises(ValueError, match="y and X have different indexes"):
        TargetPolicyValue(cv=3).fit(X, pd.Series(y), a, X_target=Xt)


def test_booleans_and_lists_are_accepted(data):
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    ref = TargetPolicyValue(cv=3, random_state=0).fit(Xs, y, a, X_target=Xt).estimate(1)
    for args in ((Xs, y, a.astype(bool), Xt), (Xs.tolist(), y.tolist(), a.tolist(),
                                               Xt.tolist())):
        est = TargetPolicyValue(cv=3, random_state=0).fit(*args[:3], X_target=args[3])
        assert est.estimate(1).value == ref.value


# ------------------------------------------------------------------- bootstrap
def test_bootstrap_resamples_within_sample_and_arm(data):
    """The container's strata make the core bootstrap a two-sample bootstrap that keeps n_S,
    n_T and every arm's size; take() splits the stacked rows back into the two samples."""
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    est = TargetPolicyValue(cv=3, random_state=0).fit(Xs, y, a, X_target=Xt)
    container = est.data_
    assert container.n_rows == len(y) + len(Xt)
    sizes = []

    def record(resample):
        sizes.append((resample.n_source, resample.Xt.shape[0], int(resample.a.sum())))
        assert set(map(tuple, resample.Xt)) <= set(map(tuple, Xt))     # target rows stay
        assert set(map(tuple, resample.Xs)) <= set(map(tuple, Xs))     # source rows stay
        return 0.0

    bootstrap(record, container, n_boot=5, random_state=0, strata=container.strata, point=0.0)
    assert sizes == [(len(y), len(Xt), int(a.sum()))] * 5


def test_value_bootstrap_agrees_with_the_influence_interval():
    """Both estimate the sampling SD of the same estimator (the Monte Carlo error of a
    60-replicate SD is about 9%); the bootstrap is cached per policy and method."""
    d = _data(seed=4, n_source=400, n_target=400)
    est = TargetPolicyValue(cv=3, random_state=0).fit(d["X_source"], d["y"], d["treatment"],
                                                      X_target=d["X_target"])
    influence = est.estimate(_first_feature_rule)
    boot = _quiet(est.estimate, _first_feature_rule, inference="bootstrap", n_boot=60)
    assert boot.value == influence.value and boot.replicates.size == 60
    assert 0.75 < boot.std_error / influence.std_error < 1.33
    lo, hi = boot.conf_int()
    assert lo < influence.value < hi and boot.ci_method == "percentile"
    again = est.estimate(_first_feature_rule, inference="bootstrap", n_boot=60)
    np.testing.assert_array_equal(again.replicates, boot.replicates)         # from the cache
    other = _quiet(est.estimate, 1, inference="bootstrap", n_boot=10)
    assert other.value == est.estimate(1).value
    ipw = _quiet(est.estimate, 1, "ipw", inference="bootstrap", n_boot=10)
    assert ipw.value == est.estimate(1, "ipw").value and ipw.method.startswith("IPW")
    copy = pickle.loads(pickle.dumps(est))       # the cache (keyed by a lambda) is not pickled
    assert copy.estimate(_first_feature_rule).value == influence.value


class _Lookup:
    """A policy given as a table: each row of ``X`` takes the probabilities stored for it."""

    def __init__(self, X, P):
        rows = np.asarray(X, dtype=float)
        self.table = {row.tobytes(): p for row, p in zip(rows, P, strict=True)}

    def __call__(self, X):
        return np.array([self.table[row.tobytes()] for row in np.asarray(X, dtype=float)])


@pytest.mark.parametrize("trim", [False, True])
def test_learner_bootstrap_refits_the_value_with_the_fold_policies_fixed(trim):
    """The learner's default interval: each replicate is the value estimator refitted on the
    resample, evaluating the held-out assignment (fold policies fixed). Checked against the
    value estimator's own pipeline bootstrap of that assignment written as a policy of X."""
    d = dgps.simulate("learning", np.random.default_rng(3), n_source=400, n_target=400,
                      shift=dgps.LEARNING_SHIFTS["strong"])
    args, kw = _arrays(d)
    value = TargetPolicyValue(cv=2, on_poor_overlap="trim" if trim else "warn")
    learner = _quiet(TargetPolicyLearner(value, policy="tree", depth=2, random_state=0).fit,
                     *args, **kw)
    fitted = learner.value_estimator_
    assert (fitted.n_trimmed_target_ > 0) == trim
    assert learner.held_out_.shape == (800, 2)
    if trim:   # rows trimmed before learning take the mean of the fold policies
        dropped = np.setdiff1d(np.arange(800), fitted.score_units_)
        X = np.vstack([d["X_source"], d["X_target"]])[dropped]
        expected = np.mean([learner._deploy(m, X) for m in learner.fold_models_], axis=0)
        np.testing.assert_array_equal(learner.held_out_[dropped], expected)
    seed = np.random.SeedSequence(7)
    boot = _quiet(learner.estimate, n_boot=8, random_state=seed)
    assert boot.value == learner.value_.value and boot.ci_method == "normal"
    # a policy value has no null of 0 to test: no p-value, bootstrap or influence
    assert boot.null_value is None and learner.value_.null_value is None
    assert np.isnan(_quiet(learner.estimate, inference="influence").pvalue)
    assert np.unique(boot.replicates).size == 8 and boot.std_error > 0
    lookup = _Lookup(np.vstack([d["X_source"], d["X_target"]]), learner.held_out_)
    reference = _quiet(fitted.estimate, lookup, inference="bootstrap", n_boot=8,
                       random_state=seed)
    assert reference.value == pytest.approx(learner.value_.value, rel=1e-12)
    np.testing.assert_allclose(boot.replicates, reference.replicates, rtol=1e-12)
    twin = _quiet(TargetPolicyLearner(value, policy="tree", depth=2, random_state=0).fit,
                  *args, **kw)
    np.testing.assert_array_equal(_quiet(twin.estimate, n_boot=8).replicates,
                                  _quiet(learner.estimate, n_boot=8).replicates)


# ------------------------------------------------------------------- units and rank
def test_default_outcome_model_does_not_depend_on_covariate_units(data):
    """scikit-learn's LinearRegression truncates small singular values (``tol``): with one
    covariate in units 1e6 times larger it silently dropped the others. The default is least
    squares on standardised covariates, so the fit is the same in any units."""
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    scale = np.array([1e6, 1.0, 1.0])
    base = TargetPolicyValue(cv=3, random_state=0).fit(Xs, y, a, X_target=Xt)
    scaled = TargetPolicyValue(cv=3, random_state=0).fit(Xs * scale, y, a, X_target=Xt * scale)
    np.testing.assert_allclose(scaled.mu_source_, base.mu_source_, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(scaled.estimate(1).value, base.estimate(1).value, rtol=1e-9)
    dollars = TargetPolicyValue(cv=3, random_state=0).fit(Xs, 100 * y, a, X_target=Xt)
    np.testing.assert_allclose(dollars.estimate(1).std_error, 100 * base.estimate(1).std_error,
                               rtol=1e-9)


def test_constant_and_collinear_covariates_are_named(data):
    Xs, a, y, Xt = data["X_source"], data["treatment"], data["y"], data["X_target"]
    source = pd.DataFrame(Xs, columns=COLS).assign(site=1.0, age_months=12 * Xs[:, 0])
    target = pd.DataFrame(Xt, columns=COLS).assign(site=1.0, age_months=12 * Xt[:, 0])
    with pytest.warns(RankDeficientWarning, match=r"\['site', 'age_months'\] are constant or "
                                                  r"linear combinations"):
        est = TargetPolicyValue(cv=3, random_state=0).fit(source, y, a, X_target=target)
    assert np.isfinite(est.estimate(1).value)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RankDeficientWarning)   # full rank: no warning
        TargetPolicyValue(cv=3, random_state=0).fit(Xs, y, a, X_target=Xt)


# ------------------------------------------------------------------- folds
def test_folds_and_fold_models_are_stored(data):
    args, kw = _arrays(data)
    est = TargetPolicyValue(cv=KFold(4, shuffle=True, random_state=1)).fit(*args, **kw)
    assert len(est.folds_["source"]) == len(est.folds_["target"]) == 4
    assert len(est.outcome_models_) == len(est.propensity_models_) == len(est.domain_models_) == 4
    for k, (train, test) in enumerate(est.folds_["source"]):
        assert np.all(est.source_folds_[test] == k) and np.intersect1d(train, test).size == 0
    learner = TargetPolicyLearner(TargetPolicyValue(cv=2), policy="tree", depth=1, cv=3,
                                  random_state=0).fit(*args, **kw)
    assert len(learner.folds_) == len(learner.fold_models_) == 3
    with pytest.raises(TypeError, match="cv must be an int >= 2 or a scikit-learn splitter"):
        TargetPolicyValue(cv=[0, 1]).fit(*args, **kw)
