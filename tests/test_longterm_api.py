"""The long-term estimators on the estimator core: argument order, DataFrame front end, seeds,
cross-fitting folds, nuisance slots and scale."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import GradientBoostingClassifier, RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from causalkit.exceptions import CausalkitWarning, RankDeficientWarning, SmallSampleWarning
from causalkit.longterm import (
    CompleteCase,
    LinearGaussianDesign,
    MonotoneAIPW,
    NaiveIPW,
    SeqMSM,
    SequentialIPW,
    SequentialRegression,
)

ALL = [SequentialIPW, SequentialRegression, SeqMSM, MonotoneAIPW, CompleteCase, NaiveIPW]


@pytest.fixture(scope="module")
def sample():
    return LinearGaussianDesign(dropout=(0.2, 0.25, 0.25)).sample(np.random.default_rng(8),
                                                                  n=400)


def _roles(s):
    return dict(X=s["X"], y=s["outcome"], treatment=s["treatment"], short=s["short"])


def _frame(s):
    return pd.DataFrame(s["X"], columns=[f"c{j}" for j in range(5)]).assign(
        treat=s["treatment"], week1=s["short"][:, 0], week2=s["short"][:, 1], y=s["outcome"])


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalkitWarning)
        yield


def test_old_argument_order_is_rejected(sample):
    X, a, S, y = sample["X"], sample["treatment"], sample["short"], sample["outcome"]
    for cls in ALL:
        with pytest.raises(TypeError, match="short="):
            cls().fit(X, a, S, y)
        with pytest.raises(TypeError, match="old argument order"):
            cls().fit(X, a, S)


def test_not_fitted(sample):
    for cls in ALL:
        with pytest.raises(NotFittedError):
            cls().estimate()
        with pytest.raises(NotFittedError):
            cls().effect(sample["X"])


def test_dataframe_front_end_matches_arrays(sample):
    df = _frame(sample)
    for cls in ALL:
        on_arrays = cls(random_state=3).fit(**_roles(sample))
        on_frame = cls(random_state=3).fit(df, y="y", treatment="treat",
                                           short=["week1", "week2"])
        assert on_frame.ate_ == on_arrays.ate_
        assert on_frame.estimate("influence").std_error == \
            on_arrays.estimate("influence").std_error
        assert list(on_frame.feature_names_in_) == ["c0", "c1", "c2", "c3", "c4"]
        assert not hasattr(on_arrays, "feature_names_in_")
        # effect() matches a DataFrame by column name
        np.testing.assert_allclose(on_frame.effect(df[["c4", "c3", "c2", "c1", "c0"]]),
                                   on_arrays.effect(sample["X"]), rtol=1e-12)
    chosen = SequentialRegression().fit(df, y="y", treatment="treat", short=["week1", "week2"],
                                        covariates=["c0", "c2"])
    assert list(chosen.feature_names_in_) == ["c0", "c2"]
    with pytest.raises(ValueError, match="short"):
        SequentialRegression().fit(df, y="y", treatment="treat", short=["week1", "week9"])


def test_pandas_roles_are_aligned_on_the_index(sample):
    """A Series in another row order is matched by index, not by position."""
    X = pd.DataFrame(sample["X"])
    order = np.random.default_rng(0).permutation(len(X))
    y = pd.Series(sample["outcome"]).iloc[order]
    short = pd.DataFrame(sample["short"]).iloc[order]
    aligned = SequentialRegression().fit(X, y, sample["treatment"], short=short)
    assert aligned.ate_ == pytest.approx(SequentialRegression().fit(**_roles(sample)).ate_,
                                         abs=1e-12)
    with pytest.raises(ValueError, match="y and X have different indexes"):
        SequentialRegression().fit(X, pd.Series(sample["outcome"], index=X.index + 1000),
                                   sample["treatment"], short=sample["short"])


def test_ensembles_and_pipelines_fill_every_nuisance_slot(sample):
    """Regression: ``model or default()`` called ``bool()`` on an unfitted ensemble, which
    raises AttributeError; every slot now takes any scikit-learn estimator or Pipeline (a
    Pipeline in SeqMSM's weighted stage regressions gets the weights in its final step)."""
    models = {
        "regressor": [RandomForestRegressor(n_estimators=10, min_samples_leaf=5),
                      make_pipeline(StandardScaler(), Ridge())],
        "classifier": [GradientBoostingClassifier(n_estimators=20),
                       make_pipeline(StandardScaler(), LogisticRegression())],
    }
    for cls in ALL:
        assert cls._nuisance_slots
        for slot, kind in cls._nuisance_slots.items():
            for model in models[kind]:
                est = cls(**{slot: model}, random_state=0).fit(**_roles(sample))
                # the point value (a plug-in with a flexible chain offers only the bootstrap)
                assert np.isfinite(est.estimate(inference="bootstrap", n_boot=2).value) \
                    if "influence" not in est._inferences \
                    else np.isfinite(est.estimate(inference="influence").value), (cls, slot)


def test_unseeded_nuisance_models_follow_the_estimator_seed(sample):
    rf = RandomForestRegressor(n_estimators=10, min_samples_leaf=5)
    first = SequentialRegression(outcome_model=rf, random_state=1).fit(**_roles(sample))
    second = SequentialRegression(outcome_model=rf, random_state=1).fit(**_roles(sample))
    other = SequentialRegression(outcome_model=rf, random_state=2).fit(**_roles(sample))
    assert first.ate_ == second.ate_ != other.ate_
    assert rf.get_params()["random_state"] is None          # the user's model is untouched
    # each stage of the chain gets its own seed
    seeds = {stage.models[0].get_params()["random_state"] for stage in first.chain_.stages_}
    assert len(seeds) == 3


def test_aipw_bootstrap_uses_the_constructor_seed(sample):
    """Regression: ``MonotoneAIPW(random_state=0).estimate("bootstrap")`` drew unseeded
    resamples."""
    runs = [MonotoneAIPW(random_state=0).fit(**_roles(sample)).estimate(
        "bootstrap", n_boot=8) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].replicates, runs[1].replicates)
    other = MonotoneAIPW(random_state=1).fit(**_roles(sample)).estimate("bootstrap", n_boot=8)
    assert not np.array_equal(other.replicates, runs[0].replicates)


def test_seqmsm_default_bootstrap_is_seeded(sample):
    """Regression: SeqMSM's default (bootstrap) inference had no seed at all."""
    runs = [SeqMSM(random_state=5).fit(**_roles(sample)).estimate(n_boot=8) for _ in range(2)]
    assert runs[0].replicates is not None
    np.testing.assert_array_equal(runs[0].replicates, runs[1].replicates)
    assert runs[0].conf_int() == runs[1].conf_int()
    assert "random_state" in SequentialRegression().get_params()


def test_bootstrap_does_not_depend_on_n_jobs(sample):
    est = SequentialIPW(random_state=0).fit(**_roles(sample))
    one = est.estimate("bootstrap", n_boot=6, n_jobs=1)
    est._bootstrap_cache.clear()
    two = est.estimate("bootstrap", n_boot=6, n_jobs=2)
    np.testing.assert_array_equal(one.replicates, two.replicates)


def test_cross_fitting_folds(sample):
    n = len(sample["outcome"])
    # parametric nuisance models: in-sample by default; a flexible one: five folds
    assert len(MonotoneAIPW().fit(**_roles(sample)).folds_) == 1
    flexible = MonotoneAIPW(outcome_model=RandomForestRegressor(n_estimators=5),
                            random_state=0).fit(**_roles(sample))
    assert len(flexible.folds_) == 5
    est = MonotoneAIPW(cv=5, random_state=0).fit(**_roles(sample))
    assert len(est.folds_) == 5 and len(est.fold_models_) == 5
    tested = np.sort(np.concatenate([test for _, test in est.folds_]))
    np.testing.assert_array_equal(tested, np.arange(n))
    assert set(est.fold_models_[0]) == {"propensity", "selection", "outcome"}
    # a splitter and the same folds given explicitly give the same estimate
    splitter = KFold(4, shuffle=True, random_state=0)
    by_splitter = MonotoneAIPW(cv=splitter).fit(**_roles(sample))
    explicit = MonotoneAIPW(cv=list(splitter.split(sample["X"]))).fit(**_roles(sample))
    assert by_splitter.ate_ == explicit.ate_
    labels = np.zeros(n, dtype=int)
    for k, (_, test) in enumerate(splitter.split(sample["X"])):
        labels[test] = k
    assert MonotoneAIPW(cv=labels).fit(**_roles(sample)).ate_ == explicit.ate_
    in_sample = MonotoneAIPW(cv=1).fit(**_roles(sample))
    assert len(in_sample.folds_) == 1
    np.testing.assert_array_equal(in_sample.folds_[0][1], np.arange(n))


def test_units_of_y_and_x_do_not_matter(sample):
    """Regression: scikit-learn's LinearRegression zeroes singular values below 1e-6 of the
    largest, so one covariate in large units changed the OLS stage regressions (by 5% of the
    ATE here); the default nuisances work on standardised columns."""
    X = sample["X"].copy()
    X[:, 1] *= 1e6
    for cls in ALL:
        base = cls(random_state=0).fit(**_roles(sample)).estimate(inference="influence")
        wide = cls(random_state=0).fit(**{**_roles(sample), "X": X}).estimate(
            inference="influence")
        scaled = cls(random_state=0).fit(**{**_roles(sample), "y": 100 * sample["outcome"]})
        scaled = scaled.estimate(inference="influence")
        assert wide.value == pytest.approx(base.value, rel=1e-6), cls
        assert wide.std_error == pytest.approx(base.std_error, rel=1e-6), cls
        assert scaled.value == pytest.approx(100 * base.value, rel=1e-9), cls
        assert scaled.std_error == pytest.approx(100 * base.std_error, rel=1e-9), cls


def test_rank_deficient_and_small_samples_warn(sample):
    X = np.column_stack([sample["X"], np.ones(len(sample["X"])), sample["X"][:, 0] * 2])
    with pytest.warns(RankDeficientWarning, match=r"\['x5', 'x6'\]|\['x0', 'x5'\]"):
        est = SequentialRegression().fit(**{**_roles(sample), "X": X})
    assert np.isfinite(est.ate_)
    df = pd.DataFrame(X, columns=[f"c{j}" for j in range(7)])
    with pytest.warns(RankDeficientWarning, match="c5"):
        SequentialIPW().fit(**{**_roles(sample), "X": df})
    rows = np.r_[np.flatnonzero(sample["treatment"] == 1)[:12],
                 np.flatnonzero(sample["treatment"] == 0)[:12]]
    small = {k: v[rows] for k, v in _roles(sample).items()}
    with pytest.warns(SmallSampleWarning, match="fewer responders"):
        SequentialRegression().fit(**small)


def test_clone_and_params():
    for cls in ALL:
        est = cls(random_state=3)
        assert clone(est).get_params() == est.get_params()
        assert est.get_params()["random_state"] == 3


def test_plots_return_figures(sample):
    from matplotlib.figure import Figure

    for cls in (SequentialIPW, SequentialRegression):
        fig = cls().fit(**_roles(sample)).plot(inference="influence")
        assert isinstance(fig, Figure)
        # the weighting estimators add the weights and effective sample sizes
        assert len(fig.axes) == (3 if cls is SequentialIPW else 1)
