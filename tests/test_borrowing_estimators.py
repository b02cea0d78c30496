"""Borrowing estimators: exact identities, references, binary outcomes, bad input, protocol."""

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats
from sklearn.base import clone

from causalkit import Estimate
from causalkit.borrowing import (
    ESTIMATORS,
    CalibratedFullBorrowing,
    CalibratedInfluenceBorrowing,
    FullBorrowing,
    InfluenceBorrowing,
    LogisticOutcomeModel,
    OutcomeCalibrator,
    PowerPriorBorrowing,
    SelectiveBorrowing,
    TrialOnly,
)
from causalkit.borrowing.designs import gao_design, paper_a_design
from causalkit.exceptions import FallbackWarning, FewBorrowedWarning


def small(seed=0, **kw):
    d = paper_a_design(np.random.default_rng(seed), n_trial=200, n_treated=150,
                       n_external=300, n_features=4, **kw)
    return d["X"], d["y"], d["a"], d["s"]


@pytest.fixture
def data():
    return small(bias=1.0)


def test_trial_only_is_textbook_aipw(data):
    X, y, a, s = data
    Xt, yt, at = X[s == 1], y[s == 1], a[s == 1]
    Z = sm.add_constant(Xt)
    mu1 = Z @ sm.OLS(yt[at == 1], Z[at == 1]).fit().params
    mu0 = Z @ sm.OLS(yt[at == 0], Z[at == 0]).fit().params
    e = at.mean()
    terms = mu1 - mu0 + at * (yt - mu1) / e - (1 - at) * (yt - mu0) / (1 - e)
    est = TrialOnly().fit(X, y, a, trial=s).estimate()
    assert est.value == pytest.approx(terms.mean(), rel=1e-10)
    assert est.std_error == pytest.approx(terms.std() / np.sqrt(terms.size), rel=1e-10)


def test_empty_set_equals_trial_only_exactly(data):
    with pytest.warns(FewBorrowedWarning):
        aib = InfluenceBorrowing(grid=[0]).fit(*data[:3], trial=data[3])
    aib = aib.estimate(inference="influence")
    trial = TrialOnly().fit(*data[:3], trial=data[3]).estimate()
    assert aib.value == trial.value and aib.std_error == trial.std_error


def test_all_controls_equals_full_borrowing(data):
    n_ext = int(np.sum(data[3] == 0))
    aib = InfluenceBorrowing(grid=[0, n_ext], variance_ratio=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewBorrowedWarning)
        aib.fit(*data[:3], trial=data[3])
    full = FullBorrowing(variance_ratio=1.0).fit(*data[:3], trial=data[3]).estimate()
    last = aib.mse_path_.iloc[-1]
    assert last["size"] == n_ext
    assert last["estimate"] == pytest.approx(full.value, rel=1e-9)
    assert last["se"] == pytest.approx(full.std_error, rel=1e-9)


def test_aib_fitted_attributes(data):
    X, y, a, s = data
    est = InfluenceBorrowing().fit(pd.DataFrame(X, columns=list("abcd")), y, a, trial=s)
    n_ext = int(np.sum(s == 0))
    assert est.influence_scores_.shape == (n_ext,) and est.borrowed_.shape == (n_ext,)
    assert list(est.mse_path_.columns) == ["size", "estimate", "se", "bias2", "variance", "mse"]
    path = est.mse_path_
    np.testing.assert_allclose(path["mse"], path["bias2"] + path["variance"])
    k = est.details_["selected_size"]
    assert est.n_borrowed_ == k == path.loc[path["mse"].idxmin(), "size"]
    # the borrowed controls are exactly the k lowest scores
    assert np.all(est.influence_scores_[est.borrowed_].max(initial=-np.inf)
                  <= est.influence_scores_[~est.borrowed_].min())
    assert list(est.feature_names_in_) == list("abcd")
    res = est.estimate(inference="influence")
    assert isinstance(res, Estimate) and res.details["n_borrowed"] == k


def test_debiased_criterion_never_exceeds_plugin(data):
    plug = InfluenceBorrowing(criterion="plugin").fit(*data[:3], trial=data[3]).mse_path_
    deb = InfluenceBorrowing(criterion="debiased").fit(*data[:3], trial=data[3]).mse_path_
    assert np.all(deb["bias2"].to_numpy() <= plug["bias2"].to_numpy() + 1e-15)


def test_grid_forms(data):
    n_ext = int(np.sum(data[3] == 0))
    X, y, a, s = data
    by_size = InfluenceBorrowing(grid=[0, 30, 60, 90]).fit(X, y, a, trial=s).mse_path_["size"]
    by_frac = InfluenceBorrowing(grid=[0.1, 0.2, 0.3]).fit(X, y, a, trial=s).mse_path_["size"]
    assert list(by_size) == [0, 30, 60, 90] and list(by_frac) == [0, 30, 60, 90]
    assert len(InfluenceBorrowing(grid=11).fit(*data[:3], trial=data[3]).mse_path_) == 11
    assert InfluenceBorrowing().fit(*data[:3], trial=data[3]).mse_path_["size"].max() == n_ext
    with pytest.raises(ValueError, match="grid"):
        InfluenceBorrowing(grid=[0.5, 2]).fit(*data[:3], trial=data[3])


def test_full_borrowing_bias_and_aib_rejects_biased():
    X, y, a, s = small(seed=3, bias=3.0, frac_biased=0.5)
    truth = 1.0
    full = FullBorrowing().fit(X, y, a, trial=s).estimate()
    aib = InfluenceBorrowing().fit(X, y, a, trial=s)
    biased = paper_a_design(np.random.default_rng(3), n_trial=200, n_treated=150,
                            n_external=300, n_features=4, bias=3.0, frac_biased=0.5)["biased"]
    assert full.value < truth - 3 * full.std_error          # pooled shifted controls: biased
    share = np.mean(biased[aib.borrowed_]) if aib.n_borrowed_ else 0.0
    assert share < 0.1                                     # pool has 50% biased


def test_calibration_recovers_shift():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(900, 2))
    d = np.r_[np.zeros(300), np.ones(600)].astype(int)
    y = 1 + X @ [1.0, 0.5] + d * (0.8 + 0.5 * X[:, 0]) + rng.normal(size=900) * 0.5
    lin = OutcomeCalibrator(random_state=0).fit(X, y, d)
    assert lin.intercept_ == pytest.approx(0.8, abs=0.1)
    assert lin.coef_ == pytest.approx([0.5, 0.0], abs=0.1)
    const = OutcomeCalibrator(method="constant", random_state=0).fit(X, y, d)
    assert const.intercept_ == pytest.approx(0.8, abs=0.1)
    kern = OutcomeCalibrator(method="kernel", random_state=0).fit(X[::2], y[::2], d[::2])
    grid = np.array([[-1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(kern.predict(grid), 0.8 + 0.5 * grid[:, 0], atol=0.25)


def test_calibration_shrinks_to_zero_under_exchangeability():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(900, 3))
    d = np.r_[np.zeros(300), np.ones(600)].astype(int)
    y = 1 + X @ [1.0, 0.5, -0.5] + rng.normal(size=900)      # same outcome model in both
    for method in ("linear", "constant"):
        cal = OutcomeCalibrator(method=method, random_state=0).fit(X, y, d)
        unpenalised = np.linalg.lstsq(np.c_[np.ones(900), X][d == 1], y[d == 1], rcond=None)[0][0] \
            - np.linalg.lstsq(np.c_[np.ones(900), X][d == 0], y[d == 0], rcond=None)[0][0]
        assert np.max(np.abs(cal.predict(X))) < 0.05
        assert abs(cal.intercept_) < 0.5 * abs(unpenalised)


def test_calibrated_estimators_remove_systematic_shift():
    d = paper_a_design(np.random.default_rng(5), n_trial=800, n_treated=400, n_external=1200,
                       n_features=4)
    X, a, s = d["X"], d["a"], d["s"]
    y = d["y"] + 2.0 * (s == 0)              # every external control shifted by 2
    full = FullBorrowing().fit(X, y, a, trial=s).estimate()
    cal = CalibratedFullBorrowing(random_state=0).fit(X, y, a, trial=s).estimate()
    acib = CalibratedInfluenceBorrowing(random_state=0).fit(X, y, a, trial=s)
    assert abs(full.value - 1) > 1.0
    assert abs(cal.value - 1) < 3 * cal.std_error
    assert acib.calibration_model_.intercept_ == pytest.approx(2.0, abs=0.25)
    assert abs(acib.estimate(inference="influence").value - 1) < 0.3
    aib = InfluenceBorrowing().fit(X, y, a, trial=s)             # cannot undo the shift
    assert acib.n_borrowed_ > 2 * aib.n_borrowed_


def test_power_prior_limits(data):
    X, y, a, s = data
    pp0 = PowerPriorBorrowing(a0=0.0).fit(X, y, a, trial=s).estimate()
    Xt, yt, at = X[s == 1], y[s == 1], a[s == 1]
    Z = sm.add_constant(Xt)
    b1 = sm.OLS(yt[at == 1], Z[at == 1]).fit().params
    b0 = sm.OLS(yt[at == 0], Z[at == 0]).fit().params
    assert pp0.value == pytest.approx(np.mean(Z @ (b1 - b0)), rel=1e-8)
    pp1 = PowerPriorBorrowing(a0=1.0).fit(X, y, a, trial=s)
    Zc = sm.add_constant(np.vstack([Xt[at == 0], X[s == 0]]))
    pooled = sm.OLS(np.r_[yt[at == 0], y[s == 0]], Zc).fit().params
    assert pp1.estimate().value == pytest.approx(np.mean(Z @ (b1 - pooled)), rel=1e-8)
    # empirical Bayes: strong conflict -> small power, exchangeable -> large power
    Xc, yc, ac, sc = small(seed=6, bias=3.0, frac_biased=1.0)
    conflict = PowerPriorBorrowing().fit(Xc, yc, ac, trial=sc)
    Xg, yg, ag, sg = small(seed=6, bias=0.0)
    agree = PowerPriorBorrowing().fit(Xg, yg, ag, trial=sg)
    assert conflict.a0_ < 0.05 < 0.5 < agree.a0_
    with pytest.raises(ValueError, match="a0"):
        PowerPriorBorrowing(a0=2).fit(X, y, a, trial=s)


def test_selective_borrowing_rejects_shifted():
    X, y, a, s = small(seed=7, bias=3.0, frac_biased=0.5)
    biased = paper_a_design(np.random.default_rng(7), n_trial=200, n_treated=150,
                            n_external=300, n_features=4, bias=3.0, frac_biased=0.5)["biased"]
    sel = SelectiveBorrowing().fit(X, y, a, trial=s)
    assert sel.n_borrowed_ > 0 and np.mean(biased[sel.borrowed_]) < 0.1
    res = sel.estimate(inference="influence")
    assert abs(res.value - 1) < 4 * res.std_error
    # its default is the pipeline bootstrap's normal interval (BorrowingEstimator's docstring)
    boot = sel.estimate(n_boot=10)
    assert boot.ci_method == "normal" and boot.replicates.size == 10


def test_binary_outcome_end_to_end():
    d = paper_a_design(np.random.default_rng(8), outcome="binary", bias=1.0, n_trial=300,
                       n_treated=200, n_external=400, n_features=4)
    for name, cls in ESTIMATORS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewBorrowedWarning)
            est = cls(random_state=0).fit(d["X"], d["y"], d["a"], trial=d["s"])
            res = est.estimate(inference="influence")
        assert np.isfinite(res.value) and res.std_error > 0, name
        assert abs(res.value - d["truth"]) < 0.25, name
    aib = InfluenceBorrowing().fit(d["X"], d["y"], d["a"], trial=d["s"])
    assert type(aib.score_model_).__name__ == "LogisticOutcomeModel"
    assert type(aib.outcome_models_["control"]).__name__ == "LogisticOutcomeModel"


def test_binary_separation_clear_error():
    X, y, a, s = small(seed=9)
    yb = (X[:, 0] > 0).astype(float)         # outcome perfectly separated by x0
    with pytest.raises(ValueError, match="separated"):
        InfluenceBorrowing(score_model=LogisticOutcomeModel(ridge=0.0)).fit(X, yb, a, trial=s)
    est = InfluenceBorrowing().fit(X, yb, a, trial=s)   # default ridge damps the separation
    assert np.isfinite(est.estimate(inference="influence").value)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_bad_input(name, data):
    X, y, a, s = data
    cls = ESTIMATORS[name]
    a_bad = a.copy()
    a_bad[np.flatnonzero(s == 0)[0]] = 1
    with pytest.raises(ValueError, match="external controls"):
        cls().fit(X, y, a_bad, trial=s)
    with pytest.raises(ValueError, match="both arms"):
        cls().fit(X, y, np.where(s == 1, 1, 0), trial=s)      # no trial controls
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cls().fit(X_nan, y, a, trial=s)
    with pytest.raises(ValueError, match="length"):
        cls().fit(X, y[:-1], a, trial=s)
    with pytest.raises(ValueError, match="trial"):
        cls().fit(X, y, a, trial=np.full_like(s, 2))


@pytest.mark.parametrize("name", [n for n in ESTIMATORS if n != "trial"])
def test_no_external_controls_falls_back(name, data):
    X, y, a, s = data
    t = s == 1
    with pytest.warns(FallbackWarning):
        est = ESTIMATORS[name]().fit(X[t], y[t], a[t], trial=s[t])
    res = est.estimate(inference="influence")
    ref = TrialOnly().fit(X[t], y[t], a[t], trial=s[t]).estimate()
    assert res.value == pytest.approx(ref.value) and est.n_borrowed_ == 0


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_protocol_and_determinism(name, data):
    est = ESTIMATORS[name](random_state=1)
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewBorrowedWarning)
        v1 = est.fit(*data[:3], trial=data[3]).estimate(inference="influence").value
        v2 = twin.fit(*data[:3], trial=data[3]).estimate(inference="influence").value
    assert v1 == v2
    with pytest.raises(ValueError, match="inference"):
        est.estimate(inference="sandwich")


def test_bootstrap_refits_selection(data):
    est = InfluenceBorrowing(random_state=0, grid=11).fit(*data[:3], trial=data[3])
    boot = est.estimate(n_boot=20)          # default for AIB is the pipeline bootstrap
    assert boot.replicates.size == 20
    # with the normal interval around the estimate, the replicates' SD as the SE
    z = stats.norm.ppf(0.975)
    assert boot.ci_method == "normal" and boot.std_error == pytest.approx(
        np.std(boot.replicates, ddof=1), rel=1e-12)
    np.testing.assert_allclose(boot.conf_int(), (boot.value - z * boot.std_error,
                                                 boot.value + z * boot.std_error), rtol=1e-12)
    np.testing.assert_allclose(boot.conf_int(method="percentile"),
                               np.quantile(boot.replicates, [0.025, 0.975]), rtol=1e-12)
    # the bootstrap refits the full sample: the same estimate up to floating-point summation
    # order (array alignment changes numpy's SIMD reductions in the last bits)
    assert boot.value == pytest.approx(est.estimate(inference="influence").value, rel=1e-12)
    assert np.std(boot.replicates) > 0 and boot.details["n_borrowed"] == est.n_borrowed_
    again = InfluenceBorrowing(random_state=0, grid=11).fit(*data[:3], trial=data[3])
    again = again.estimate(n_boot=20)
    np.testing.assert_array_equal(boot.replicates, again.replicates)


def test_gao_design_truth_and_logistic_propensity():
    d = gao_design(np.random.default_rng(0), omega=0.0, n_rct=2000, n_ec=1000)
    est = TrialOnly(propensity="logistic").fit(d["X"], d["y"], d["a"], trial=d["s"]).estimate()
    assert abs(est.value - d["truth"]) < 3 * est.std_error
    assert d["truth"] < 0                     # trial selects low X1 + X2


def test_plot(data):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    fig = InfluenceBorrowing().fit(*data[:3], trial=data[3]).plot()
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    plt.close(fig)
    fig = TrialOnly().fit(*data[:3], trial=data[3]).plot()      # the core's forest plot
    assert isinstance(fig, Figure)
    plt.close(fig)
