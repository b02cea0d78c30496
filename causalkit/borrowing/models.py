"""Outcome models with the gradient/Hessian protocol the influence scores need.

An *influence-ready* outcome model is any object with

* ``fit(X, y)`` returning ``self`` (an intercept is handled by the model itself),
* ``predict(X)``: the conditional mean :math:`f(x;\\hat\\theta)`,
* ``loss_gradients(X, y)``: per-unit gradients :math:`\\nabla_\\theta \\ell(z_i;\\hat\\theta)`,
  shape ``(n, q)``,
* ``loss_hessian(X)``: the mean Hessian
  :math:`n^{-1}\\sum_i \\nabla^2_\\theta\\ell(z_i;\\hat\\theta)`
  over the rows it was fitted on (GLM Hessians do not depend on ``y``), shape ``(q, q)``.

:class:`LinearOutcomeModel` (squared loss) and :class:`LogisticOutcomeModel` (log loss) implement
it in closed form; :class:`SklearnGLM` adapts a scikit-learn linear model (``coef_``,
``intercept_``): a regressor is read as squared loss and a classifier as log loss.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, RegressorMixin, clone, is_classifier

from causalkit._validation import check_array, check_vector

__all__ = ["LinearOutcomeModel", "LogisticOutcomeModel", "SklearnGLM", "fit_logistic",
           "as_outcome_model"]


def _design(X: np.ndarray) -> np.ndarray:
    """Prepend the intercept column."""
    return np.hstack([np.ones((X.shape[0], 1)), X])


def _penalty(q: int, ridge: float) -> np.ndarray:
    """Ridge penalty matrix that leaves the intercept unpenalised."""
    pen = np.full(q, float(ridge))
    pen[0] = 0.0
    return np.diag(pen)


def fit_logistic(Z, t, *, ridge: float = 0.0, sample_weight=None, beta0=None, tol: float = 1e-8,
                 max_iter: int = 100) -> tuple[np.ndarray, bool]:
    """Penalised logistic regression by Newton's method.

    Minimises :math:`n^{-1}\\sum_i w_i\\{\\log(1+e^{z_i^\\top\\beta}) - t_i z_i^\\top\\beta\\}
    + \\tfrac{\\lambda}{2}\\|\\beta_{-0}\\|^2`, where ``Z`` already holds the intercept column
    (unpenalised). Each step solves one :math:`q\\times q` system; step halving guarantees descent.

    Returns
    -------
    beta : ndarray of shape (q,)
    converged : bool
        Whether the Newton decrement fell below ``tol`` within ``max_iter`` steps.
    """
    n, q = Z.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    wsum = w.sum()
    pen = _penalty(q, ridge)
    beta = np.zeros(q) if beta0 is None else np.array(beta0, dtype=float)

    def objective(b):
        eta = Z @ b
        return (w @ (np.logaddexp(0.0, eta) - t * eta)) / wsum + 0.5 * b @ pen @ b, eta

    obj, eta = objective(beta)
    for _ in range(max_iter):
        p = expit(eta)
        grad = Z.T @ (w * (p - t)) / wsum + pen @ beta
        hess = (Z * (w * p * (1.0 - p))[:, None]).T @ Z / wsum + pen
        try:
            step = np.linalg.solve(hess + 1e-12 * np.eye(q), grad)
        except np.linalg.LinAlgError:
            return beta, False
        decrement = float(grad @ step)
        if decrement < tol:
            return beta, True
        size = 1.0
        while True:
            cand = beta - size * step
            cand_obj, cand_eta = objective(cand)
            if cand_obj <= obj + 1e-4 * size * (-decrement) or size < 1e-10:
                break
            size *= 0.5
        beta, obj, eta = cand, cand_obj, cand_eta
    return beta, False


class LinearOutcomeModel(RegressorMixin, BaseEstimator):
    """Least squares (optionally ridge) with intercept, for continuous outcomes.

    Loss :math:`\\ell(z;\\theta) = \\tfrac12 (y - \\tilde x^\\top\\theta)^2` with
    :math:`\\tilde x = (1, x)`, so
    :math:`\\nabla\\ell = -\\tilde x\\,(y-\\tilde x^\\top\\theta)` and
    the mean Hessian is :math:`\\tilde X^\\top\\tilde X/n + \\lambda I_{-0}`.

    Parameters
    ----------
    ridge : float
        Penalty :math:`\\lambda \\ge 0` on the slopes (not the intercept), on the mean-loss scale.
    """

    def __init__(self, ridge: float = 0.0):
        self.ridge = ridge

    def fit(self, X, y, sample_weight=None):
        """Fit by solving the (weighted) normal equations."""
        if not (np.isscalar(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be a number >= 0; got {self.ridge!r}")
        X = check_array(X, "X")
        y = check_vector(y, "y", n=X.shape[0])
        Z = _design(X)
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        gram = (Z * w[:, None]).T @ Z / w.sum() + _penalty(Z.shape[1], self.ridge)
        rhs = (Z * w[:, None]).T @ y / w.sum()
        self.coef_full_ = np.linalg.lstsq(gram, rhs, rcond=None)[0]
        self.intercept_ = float(self.coef_full_[0])
        self.coef_ = self.coef_full_[1:]
        self.n_features_in_ = X.shape[1]
        self.hessian_ = gram
        return self

    def predict(self, X):
        """Fitted mean :math:`\\tilde x^\\top\\hat\\theta`."""
        return _design(check_array(X, "X")) @ self.coef_full_

    def loss_gradients(self, X, y):
        """Per-unit gradients :math:`-\\tilde x_i (y_i - \\tilde x_i^\\top\\hat\\theta)`."""
        Z = _design(np.asarray(X, dtype=float))
        return -Z * (np.asarray(y, dtype=float) - Z @ self.coef_full_)[:, None]

    def loss_hessian(self, X=None):
        """Mean Hessian on the fitting rows (squared loss: it does not depend on the data)."""
        return self.hessian_


class LogisticOutcomeModel(BaseEstimator):
    """Logistic regression with intercept for binary outcomes, fitted by Newton's method.

    Loss :math:`\\ell = \\log(1+e^{\\eta}) - y\\eta`, :math:`\\eta=\\tilde x^\\top\\theta`;
    :math:`\\nabla\\ell = \\tilde x(\\hat p - y)`, mean Hessian
    :math:`n^{-1}\\sum_i \\hat p_i(1-\\hat p_i)\\tilde x_i\\tilde x_i^\\top + \\lambda I_{-0}`.

    Parameters
    ----------
    ridge : float
        Slope penalty :math:`\\lambda \\ge 0` (mean-loss scale). The default small ridge keeps the
        fit finite and the Hessian invertible under (quasi-)separation, which small control arms
        often show; with ``ridge=0`` separation raises a ``ValueError``.
    max_iter : int
        Newton iterations.
    """

    def __init__(self, ridge: float = 1e-3, max_iter: int = 100):
        self.ridge = ridge
        self.max_iter = max_iter

    def fit(self, X, y, sample_weight=None):
        """Fit by penalised Newton iterations; raise on separation when unpenalised."""
        if not (np.isscalar(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be a number >= 0; got {self.ridge!r}")
        X = check_array(X, "X")
        y = check_vector(y, "y", n=X.shape[0])
        if np.any((y < 0) | (y > 1)):
            raise ValueError("LogisticOutcomeModel needs outcomes in [0, 1]")
        Z = _design(X)
        beta, converged = fit_logistic(Z, y, ridge=self.ridge, sample_weight=sample_weight,
                                       max_iter=self.max_iter)
        p = expit(Z @ beta)
        separated = np.all((p < 1e-6) | (p > 1 - 1e-6))
        if not converged or separated:
            raise ValueError(
                "LogisticOutcomeModel: the outcome is (quasi-)separated by the covariates in the "
                "trial controls, so the maximum-likelihood fit does not exist; use ridge > 0 "
                f"(currently {self.ridge!r}) or fewer covariates")
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.coef_full_ = beta
        self.intercept_ = float(beta[0])
        self.coef_ = beta[1:]
        self.n_features_in_ = X.shape[1]
        self.hessian_ = ((Z * (w * p * (1 - p))[:, None]).T @ Z / w.sum()
                         + _penalty(Z.shape[1], self.ridge))
        return self

    def predict(self, X):
        """Fitted probability :math:`\\hat p(x)`."""
        return expit(_design(check_array(X, "X")) @ self.coef_full_)

    def loss_gradients(self, X, y):
        """Per-unit gradients :math:`\\tilde x_i(\\hat p_i - y_i)`."""
        Z = _design(np.asarray(X, dtype=float))
        return Z * (expit(Z @ self.coef_full_) - np.asarray(y, dtype=float))[:, None]

    def loss_hessian(self, X=None):
        """Mean Hessian on the fitting rows."""
        return self.hessian_


class SklearnGLM(BaseEstimator):
    """Adapter giving a scikit-learn linear model the gradient/Hessian protocol.

    The wrapped model (cloned) must expose ``coef_`` and ``intercept_`` after fitting. A
    classifier is read as a logistic model (log loss), a regressor as a linear model (squared
    loss). Gradients and the Hessian are those of the *unpenalised* loss at the fitted
    coefficients, plus ``damping * I`` on the Hessian (Koh & Liang 2017 use the same damping
    when a penalised fit is not an exact stationary point).

    Parameters
    ----------
    model : sklearn linear estimator, optional
        Defaults to ``sklearn.linear_model.LinearRegression()``.
    damping : float
        Added to the Hessian diagonal.
    """

    def __init__(self, model=None, damping: float = 0.0):
        self.model = model
        self.damping = damping

    def fit(self, X, y, sample_weight=None):
        """Fit a clone of ``model`` and store the Hessian at its coefficients."""
        from sklearn.linear_model import LinearRegression

        base = LinearRegression() if self.model is None else self.model
        X = check_array(X, "X")
        y = check_vector(y, "y", n=X.shape[0])
        fitted = clone(base)
        if sample_weight is None:
            fitted.fit(X, y)
        else:
            fitted.fit(X, y, sample_weight=sample_weight)
        if not (hasattr(fitted, "coef_") and hasattr(fitted, "intercept_")):
            raise TypeError("SklearnGLM needs a linear model exposing coef_ and intercept_")
        self.model_ = fitted
        self.logistic_ = is_classifier(fitted)
        self.coef_full_ = np.concatenate([np.ravel(fitted.intercept_)[:1],
                                          np.ravel(fitted.coef_)])
        Z = _design(X)
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        curv = expit(Z @ self.coef_full_) if self.logistic_ else None
        weights = w * (curv * (1 - curv) if self.logistic_ else 1.0)
        self.hessian_ = ((Z * weights[:, None]).T @ Z / w.sum()
                         + float(self.damping) * np.eye(Z.shape[1]))
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        """Conditional mean (probability of class 1 for a classifier)."""
        eta = _design(check_array(X, "X")) @ self.coef_full_
        return expit(eta) if self.logistic_ else eta

    def loss_gradients(self, X, y):
        """Per-unit gradients of squared or log loss at the fitted coefficients."""
        Z = _design(np.asarray(X, dtype=float))
        eta = Z @ self.coef_full_
        resid = (expit(eta) - y) if self.logistic_ else (eta - y)
        return Z * np.asarray(resid, dtype=float)[:, None]

    def loss_hessian(self, X=None):
        """Mean Hessian on the fitting rows (plus damping)."""
        return self.hessian_


_PROTOCOL = ("fit", "predict", "loss_gradients", "loss_hessian")


def as_outcome_model(spec, binary: bool):
    """Resolve ``outcome_model=`` into an unfitted influence-ready model.

    ``"auto"`` picks logistic for a binary outcome and linear otherwise; ``"linear"`` and
    ``"logistic"`` force one; an object with the protocol methods is cloned; any other
    scikit-learn linear model is wrapped in :class:`SklearnGLM`.
    """
    if isinstance(spec, str):
        if spec == "auto":
            spec = "logistic" if binary else "linear"
        if spec == "linear":
            return LinearOutcomeModel()
        if spec == "logistic":
            return LogisticOutcomeModel()
        raise ValueError(f"outcome_model must be 'auto', 'linear', 'logistic' or a model; "
                         f"got {spec!r}")
    if all(hasattr(spec, m) for m in _PROTOCOL):
        return clone(spec)
    if hasattr(spec, "fit") and hasattr(spec, "get_params"):
        return SklearnGLM(model=spec)
    raise TypeError("outcome_model must be 'auto', 'linear', 'logistic', an influence-ready "
                    f"model or a scikit-learn linear model; got {type(spec).__name__}")
