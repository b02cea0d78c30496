"""Cross-fitting and clipping helpers against scikit-learn references."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import KFold, cross_val_predict

from causalkit.exceptions import ClippingWarning
from causalkit.nuisance import clip_probabilities, cross_fit, fit_clone, predict_positive_proba


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


def test_clip_probabilities_warns_when_binding():
    with pytest.warns(ClippingWarning, match="propensity: 1 value"):
        out = clip_probabilities([0.001, 0.5, 0.7], (0.01, 0.99))
    np.testing.assert_allclose(out, [0.01, 0.5, 0.7])
    with pytest.raises(ValueError, match="bounds"):
        clip_probabilities([0.5], (0.6, 0.4))
