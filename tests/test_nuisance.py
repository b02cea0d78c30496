"""Cross-fitting and clipping helpers against scikit-learn references."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GroupKFold, KFold, cross_val_predict

from causalkit.exceptions import ClippingWarning
from causalkit.nuisance import (
    clip_probabilities,
    cross_fit,
    fit_clone,
    make_folds,
    predict_positive_proba,
)


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, X @ [1.0, -2.0, 0.5] + rng.normal(size=n)


def test_cross_fit_equals_sklearn_cross_val_predict():
    X, y = _data()
    ours = cross_fit(LinearRegression(), X, y, cv=5, random_state=4)
    ref = cross_val_predict(LinearRegression(), X, y, cv=KFold(5, shuffle=True, random_state=4))
    np.testing.assert_allclose(ours, ref)


def test_cross_fit_predicts_extra_points_by_fold_average():
    X, y = _data()
    _, extra = cross_fit(LinearRegression(), X, y, cv=3, random_state=0, predict_X=X[:5])
    full = LinearRegression().fit(X, y).predict(X[:5])
    np.testing.assert_allclose(extra, full, atol=0.1)


def test_cross_fit_probabilities_and_clone():
    X, y = _data()
    labels = (y > 0).astype(int)
    model = LogisticRegression()
    p = cross_fit(model, X, labels, cv=4, method="predict_proba", random_state=0)
    assert p.shape == (200,) and np.all((p > 0) & (p < 1))
    assert not hasattr(model, "coef_")  # the user's model is never fitted in place
    fitted = fit_clone(model, X, labels)
    np.testing.assert_allclose(predict_positive_proba(fitted, X), fitted.predict_proba(X)[:, 1])


def test_cross_fit_rejects_bad_input():
    X, y = _data(n=4)
    with pytest.raises(ValueError, match="cv"):
        cross_fit(LinearRegression(), X, y, cv=1)
    with pytest.raises(ValueError, match="at least 5 rows"):
        cross_fit(LinearRegression(), X, y, cv=5)
    with pytest.raises(ValueError, match="method"):
        cross_fit(LinearRegression(), X, y, cv=2, method="transform")


def _fold_of_row(folds, n):
    fold = np.full(n, -1)
    for k, (train, test) in enumerate(folds):
        assert np.intersect1d(train, test).size == 0
        fold[test] = k
    assert (fold >= 0).all()
    return fold


def test_make_folds_keeps_the_copies_of_a_unit_in_one_test_fold():
    """A bootstrap-like resample (units drawn with replacement): each unit's rows share one
    test fold, and the folds are stratified over units as an int ``cv`` is over rows."""
    rng = np.random.default_rng(3)
    arm = np.r_[np.zeros(60, int), np.ones(40, int)]
    rows = np.sort(np.r_[rng.choice(60, 60), 60 + rng.choice(40, 40)])
    folds = make_folds(5, rows.size, stratify=arm[rows], groups=rows, random_state=1)
    fold = _fold_of_row(folds, rows.size)
    for unit in np.unique(rows):
        assert np.unique(fold[rows == unit]).size == 1, unit
    units = np.unique(rows)
    fold_of_unit = np.array([fold[rows == u][0] for u in units])
    per_fold = np.array([np.bincount(fold_of_unit[arm[units] == a], minlength=5) for a in (0, 1)])
    assert np.ptp(per_fold, axis=1).max() <= 1          # each arm's units spread evenly


def test_make_folds_with_distinct_groups_are_the_folds_without_groups():
    """Without repeated units (every full-sample fit) ``groups`` changes nothing."""
    strata = np.repeat([0, 1], 50)
    plain = make_folds(5, 100, stratify=strata, random_state=7)
    grouped = make_folds(5, 100, stratify=strata, groups=np.arange(100) + 10, random_state=7)
    for (tr_a, te_a), (tr_b, te_b) in zip(plain, grouped, strict=True):
        np.testing.assert_array_equal(tr_a, tr_b)
        np.testing.assert_array_equal(te_a, te_b)


def test_make_folds_passes_groups_to_a_splitter_and_checks_their_length():
    groups = np.repeat(np.arange(10), 3)
    folds = make_folds(GroupKFold(5), 30, groups=groups)
    fold = _fold_of_row(folds, 30)
    assert all(np.unique(fold[groups == g]).size == 1 for g in range(10))
    with pytest.raises(ValueError, match="groups must have length 30"):
        make_folds(5, 30, groups=np.arange(29))
    with pytest.raises(ValueError, match="need at least 5 distinct units; got 3"):
        make_folds(5, 30, groups=np.repeat([0, 1, 2], 10))


def test_clip_probabilities_warns_when_binding():
    with pytest.warns(ClippingWarning, match="propensity: 1 value"):
        out = clip_probabilities([0.001, 0.5, 0.7], (0.01, 0.99))
    np.testing.assert_allclose(out, [0.01, 0.5, 0.7])
    with pytest.raises(ValueError, match="bounds"):
        clip_probabilities([0.5], (0.6, 0.4))
