"""Influence scores: closed forms, identities, vectorisation."""

import numpy as np
import pytest
import statsmodels.api as sm
from sklearn.linear_model import LinearRegression, LogisticRegression

from causalkit.borrowing import (
    LinearOutcomeModel,
    LogisticOutcomeModel,
    SklearnGLM,
    influence_scores,
)


@pytest.fixture
def linear_data():
    rng = np.random.default_rng(0)
    X0 = rng.normal(size=(60, 3))
    y0 = 1 + X0 @ [1.0, -0.5, 0.2] + rng.normal(size=60)
    Xe = rng.normal(0.5, 1.0, size=(40, 3))
    ye = 1 + Xe @ [1.0, -0.5, 0.2] + rng.normal(size=40) + np.r_[np.zeros(20), 2 * np.ones(20)]
    return X0, y0, Xe, ye


def test_linear_model_matches_statsmodels(linear_data):
    X0, y0, _, _ = linear_data
    model = LinearOutcomeModel().fit(X0, y0)
    ref = sm.OLS(y0, sm.add_constant(X0)).fit()
    np.testing.assert_allclose(model.coef_full_, ref.params, rtol=1e-10)


def test_linear_score_is_residual_times_leverage(linear_data):
    X0, y0, Xe, ye = linear_data
    model = LinearOutcomeModel().fit(X0, y0)
    Z0, Ze = sm.add_constant(X0), sm.add_constant(Xe)
    H = Z0.T @ Z0 / len(y0)
    e0, ee = y0 - Z0 @ model.coef_full_, ye - Ze @ model.coef_full_
    lev = Z0 @ np.linalg.solve(H, Ze.T)                      # x_i' H^-1 x_z
    expected = np.abs(ee) * (np.abs(e0)[:, None] * np.abs(lev)).sum(axis=0)
    np.testing.assert_allclose(influence_scores(model, X0, y0, Xe, ye), expected, rtol=1e-10)
    # H-norm variant: e_z^2 x' H^-1 x = n0 e_z^2 h(x), h the leverage in (X0'X0)^-1
    h = np.einsum("ij,ji->i", Ze, np.linalg.solve(Z0.T @ Z0, Ze.T))
    np.testing.assert_allclose(influence_scores(model, X0, y0, Xe, ye, score="hnorm"),
                               len(y0) * ee ** 2 * h, rtol=1e-10)
    squared = ee ** 2 * ((e0[:, None] * lev) ** 2).sum(axis=0)
    np.testing.assert_allclose(influence_scores(model, X0, y0, Xe, ye, score="squared"),
                               squared, rtol=1e-10)


def test_signed_influence_sum_vanishes(linear_data):
    X0, y0, Xe, ye = linear_data
    model = LinearOutcomeModel().fit(X0, y0)
    G0 = model.loss_gradients(X0, y0)
    V = np.linalg.solve(model.loss_hessian(), model.loss_gradients(Xe, ye).T)
    signed = (G0 @ V).sum(axis=0)
    assert np.max(np.abs(signed)) < 1e-8 * np.max(np.abs(G0 @ V).sum(axis=0))


@pytest.mark.parametrize("score", ["absolute", "squared", "hnorm"])
def test_biased_controls_score_higher(score):
    # 200 exchangeable and 200 controls shifted by 2 SD: the leverage factor adds noise, but a
    # shifted control outranks an exchangeable one in most pairs (AUC; 0.5 = no separation)
    rng = np.random.default_rng(0)
    X0 = rng.normal(size=(60, 3))
    y0 = 1 + X0 @ [1.0, -0.5, 0.2] + rng.normal(size=60)
    Xe = rng.normal(0.5, 1.0, size=(400, 3))
    ye = 1 + Xe @ [1.0, -0.5, 0.2] + rng.normal(size=400) + np.r_[np.zeros(200), np.full(200, 2.)]
    s = influence_scores(LinearOutcomeModel().fit(X0, y0), X0, y0, Xe, ye, score=score)
    assert np.mean(s[200:, None] > s[None, :200]) > 0.75


def test_logistic_closed_form_and_sklearn_reference():
    rng = np.random.default_rng(1)
    X0 = rng.normal(size=(300, 2))
    y0 = rng.binomial(1, 1 / (1 + np.exp(-(0.3 + X0 @ [1.0, -1.0])))).astype(float)
    Xe = rng.normal(size=(50, 2))
    ye = rng.binomial(1, 0.5, size=50).astype(float)
    model = LogisticOutcomeModel(ridge=0.0).fit(X0, y0)
    ref = sm.Logit(y0, sm.add_constant(X0)).fit(disp=0)
    np.testing.assert_allclose(model.coef_full_, ref.params, rtol=1e-6)
    Z0, Ze = sm.add_constant(X0), sm.add_constant(Xe)
    p0, pe = model.predict(X0), model.predict(Xe)
    H = (Z0 * (p0 * (1 - p0))[:, None]).T @ Z0 / len(y0)
    lev = Z0 @ np.linalg.solve(H, Ze.T)
    expected = np.abs(pe - ye) * (np.abs(p0 - y0)[:, None] * np.abs(lev)).sum(axis=0)
    np.testing.assert_allclose(influence_scores(model, X0, y0, Xe, ye), expected, rtol=1e-8)
    wrapped = SklearnGLM(LogisticRegression(C=1e12, max_iter=5000, tol=1e-12)).fit(X0, y0)
    np.testing.assert_allclose(influence_scores(wrapped, X0, y0, Xe, ye), expected, rtol=1e-4)


def test_sklearn_adapter_equals_linear_model(linear_data):
    X0, y0, Xe, ye = linear_data
    ours = influence_scores(LinearOutcomeModel().fit(X0, y0), X0, y0, Xe, ye)
    wrapped = influence_scores(SklearnGLM(LinearRegression()).fit(X0, y0), X0, y0, Xe, ye)
    np.testing.assert_allclose(ours, wrapped, rtol=1e-8)


def test_blocking_does_not_change_scores(linear_data):
    X0, y0, Xe, ye = linear_data
    model = LinearOutcomeModel().fit(X0, y0)
    np.testing.assert_allclose(influence_scores(model, X0, y0, Xe, ye, block_size=7),
                               influence_scores(model, X0, y0, Xe, ye), rtol=1e-12)


def test_bad_arguments(linear_data):
    X0, y0, Xe, ye = linear_data
    model = LinearOutcomeModel().fit(X0, y0)
    with pytest.raises(ValueError, match="score"):
        influence_scores(model, X0, y0, Xe, ye, score="signed")
    with pytest.raises(ValueError, match="damping"):
        influence_scores(model, X0, y0, Xe, ye, damping=-1)


def test_logistic_separation_raises_without_ridge():
    X = np.linspace(-1, 1, 40)[:, None]
    y = (X[:, 0] > 0).astype(float)
    with pytest.raises(ValueError, match="separated"):
        LogisticOutcomeModel(ridge=0.0).fit(X, y)
    p = LogisticOutcomeModel().fit(X, y).predict(X)     # default ridge damps it
    assert np.all(np.isfinite(p)) and p[0] < 0.5 < p[-1]
