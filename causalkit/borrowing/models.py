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

Aliased columns: a column that is (numerically) a linear combination of the intercept and the
columns before it on the fitting rows is dropped before fitting, with a
:class:`~causalkit.exceptions.RankDeficientWarning` naming it (:func:`independent_columns`, the
rule of R's ``lm``). Its coefficient is reported as 0 and it gets no gradient or Hessian entry,
so the influence scores are those of the model on the identified columns.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, RegressorMixin, clone, is_classifier

from causalkit._linalg import independent_columns
from causalkit._validation import check_array, check_vector, feature_names_of
from causalkit.exceptions import RankDeficientWarning

__all__ = ["LinearOutcomeModel", "LogisticOutcomeModel", "SklearnGLM", "fit_logistic",
           "logistic_path", "as_outcome_model", "identified_columns"]

def identified_columns(Z, names, who: str, sample_weight=None) -> np.ndarray:
    """Kept columns of a design ``Z`` whose column 0 is the intercept and columns ``1..`` the
    covariates ``names`` (:func:`independent_columns`, rows weighted by ``sample_weight``);
    warns with a :class:`~causalkit.exceptions.RankDeficientWarning` naming the dropped
    covariates, ``who`` naming the fit."""
    Zw = Z if sample_weight is None else Z * np.sqrt(np.asarray(sample_weight, float))[:, None]
    keep = independent_columns(Zw)
    if keep.size < Z.shape[1]:
        dropped = [names[j - 1] if j else "intercept"
                   for j in np.setdiff1d(np.arange(Z.shape[1]), keep)]
        warnings.warn(f"{who}: column(s) {dropped} are aliased on the {Z.shape[0]} fitting rows "
                      "(linear combinations of the intercept and earlier columns) and were "
                      "dropped, as R's lm does", RankDeficientWarning, stacklevel=3)
    return keep


def _design(X: np.ndarray) -> np.ndarray:
    """Prepend the intercept column."""
    return np.hstack([np.ones((X.shape[0], 1)), X])


def _linear_predictor(X: np.ndarray, coef_full: np.ndarray) -> np.ndarray:
    """:math:`\\tilde x^\\top\\theta` for every row, without building the design."""
    return X @ coef_full[1:] + coef_full[0]


def _gradients(X: np.ndarray, resid: np.ndarray) -> np.ndarray:
    """Per-unit GLM gradients :math:`\\tilde x_i r_i` written straight into one (n, q) array
    (no intercept-column copy of the design)."""
    G = np.empty((X.shape[0], X.shape[1] + 1))
    G[:, 0] = resid
    np.multiply(X, resid[:, None], out=G[:, 1:])
    return G


def _restrict(G: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The identified columns of the gradients (no copy when all are kept)."""
    return G if keep.size == G.shape[1] else G[:, keep]


def _penalty(q: int, ridge: float) -> np.ndarray:
    """Ridge penalty matrix that leaves the intercept unpenalised."""
    pen = np.full(q, float(ridge))
    pen[0] = 0.0
    return np.diag(pen)


#: Rows per block of a logistic pass: a block of the design stays in cache between the two
#: matrix-vector products that use it.
PASS_BLOCK = 2048
#: Newton decrement below which a failed sufficient-decrease test is rounding noise (the
#: objective's rounding error, about 1e-16 of its value, exceeds the decrease still available):
#: :func:`fit_logistic` then takes the full Newton step and stops.
LINE_SEARCH_FLOOR = 1e-10
#: A quasi-Newton step that shrank by less than this factor triggers a Hessian refresh.
CONTRACTION = 0.1


def _logistic_pass(Z, t, beta, *, weight=None, hessian=False, loss=False, out=None):
    """One blocked pass over the rows of ``Z`` at ``beta``.

    With :math:`\\eta = Z\\beta` and :math:`p = \\mathrm{expit}(\\eta)` it returns ``eta`` (written
    into ``out`` when given), the gradient sum :math:`\\sum_i w_i z_i(p_i - t_i)`, the Hessian
    sum :math:`\\sum_i w_i p_i(1-p_i) z_i z_i^\\top` (``None`` unless ``hessian``) and the loss sum
    :math:`\\sum_i w_i\\{\\log(1+e^{\\eta_i}) - t_i\\eta_i\\}` (``None`` unless ``loss``).
    """
    n, q = Z.shape
    eta = np.empty(n) if out is None else out
    grad = np.zeros(q)
    hess = np.zeros((q, q)) if hessian else None
    total = 0.0 if loss else None
    for start in range(0, n, PASS_BLOCK):
        rows = slice(start, min(start + PASS_BLOCK, n))
        Zb, tb = Z[rows], t[rows]
        e = np.dot(Zb, beta, out=eta[rows])
        wb = None if weight is None else weight[rows]
        if loss:
            terms = np.logaddexp(0.0, e) - tb * e
            total += float(terms.sum() if wb is None else wb @ terms)
        p = expit(e)
        if hessian:
            curv = p * (1.0 - p) if wb is None else wb * p * (1.0 - p)
            hess += (Zb * curv[:, None]).T @ Zb
        p -= tb
        grad += Zb.T @ (p if wb is None else wb * p)
    return eta, grad, hess, total


def _newton_step(hess, grad):
    """Solve ``hess @ step = grad`` (symmetric positive definite, tiny jitter); None if singular."""
    try:
        return np.linalg.solve(hess + 1e-12 * np.eye(hess.shape[0]), grad)
    except np.linalg.LinAlgError:
        return None


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
    Z = np.asarray(Z, dtype=float)
    t = np.asarray(t, dtype=float)
    n, q = Z.shape
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
    wsum = float(n if w is None else w.sum())
    pen = _penalty(q, ridge)
    beta = np.zeros(q) if beta0 is None else np.array(beta0, dtype=float)

    def state(b):
        _, g, h, total = _logistic_pass(Z, t, b, weight=w, hessian=True, loss=True)
        return total / wsum + 0.5 * b @ pen @ b, g / wsum + pen @ b, h / wsum + pen

    obj, grad, hess = state(beta)
    for _ in range(max_iter):
        step = _newton_step(hess, grad)
        if step is None:
            return beta, False
        decrement = float(grad @ step)
        if decrement < tol:
            return beta, True
        size = 1.0
        while True:
            cand = beta - size * step
            cand_obj, cand_grad, cand_hess = state(cand)
            if cand_obj <= obj + 1e-4 * size * (-decrement):
                break
            if decrement < LINE_SEARCH_FLOOR:
                # the decrease still available is below the objective's rounding error, so the
                # sufficient-decrease test is noise: take the full Newton step (quadratically
                # convergent this close to the optimum) and stop
                return beta - step, True
            if size < 1e-10:
                break
            size *= 0.5
        beta, obj, grad, hess = cand, cand_obj, cand_grad, cand_hess
    return beta, False


def logistic_path(Z, t, ends, *, ridge: float = 0.0, xtol: float = 1e-9, max_iter: int = 50):
    """The penalised logistic fit of :func:`fit_logistic` on nested prefixes ``Z[:end]``.

    For ``end`` in ``ends`` (strictly increasing) it yields ``(beta, eta)``, the minimiser on the
    first ``end`` rows and its linear predictor :math:`\\eta = Z_{:end}\\beta`. The fits share
    their work along the path:

    * each fit starts from the previous one's coefficients (the first from the intercept
      :math:`\\mathrm{logit}(\\bar t)`, slopes 0);
    * the gradient and Hessian sums :math:`\\sum_i z_i(p_i-t_i)` and
      :math:`\\sum_i p_i(1-p_i)z_iz_i^\\top` are carried over and only the added rows are
      summed, so the first step on a new prefix costs as many rows as were added;
    * further steps are quasi-Newton steps: the gradient is exact on every pass, the Hessian
      is reused with a BFGS correction per step (Dennis & Moré 1977) and recomputed at the
      current coefficients only when a step shrank by less than :data:`CONTRACTION` relative
      to the previous one;
    * every pass is blocked (:data:`PASS_BLOCK` rows), so no design copy is made.

    The fixed point is the exact (penalised) optimum whatever Hessian preconditions the steps;
    a fit stops when the largest step component is below ``xtol * (1 + max|beta|)``. If the
    steps stop shrinking or ``max_iter`` passes do not suffice, the prefix is refitted by the
    globally convergent :func:`fit_logistic` (line search) from the previous coefficients and
    then polished to ``xtol``.

    Parameters
    ----------
    Z : ndarray of shape (n, q)
        Design with the intercept in column 0.
    t : ndarray of shape (n,)
        Responses in [0, 1].
    ends : sequence of int
        Prefix lengths, strictly increasing, in ``1..n``.
    ridge : float
        Slope penalty :math:`\\lambda` (mean-loss scale), as in :func:`fit_logistic`.

    References
    ----------
    Dennis, J. E. & Moré, J. J. (1977), "Quasi-Newton methods, motivation and theory",
    *SIAM Review* 19(1), 46-89.
    """
    Z = np.asarray(Z, dtype=float)
    t = np.asarray(t, dtype=float)
    ends = np.asarray(ends, dtype=int)
    if ends.size and (ends[0] < 1 or ends[-1] > Z.shape[0] or np.any(np.diff(ends) <= 0)):
        raise ValueError(f"ends must be strictly increasing prefix lengths in 1..{Z.shape[0]}")
    q = Z.shape[1]
    pen = _penalty(q, ridge)
    eta = np.empty(Z.shape[0])
    beta = grad = hess = None
    done = 0
    for end in ends:
        if beta is None:
            mean = float(np.clip(t[:end].mean(), 1e-6, 1 - 1e-6))
            beta = np.zeros(q)
            beta[0] = np.log(mean / (1.0 - mean))
            grad, hess = np.zeros(q), np.zeros((q, q))
        _, g_new, h_new, _ = _logistic_pass(Z[done:end], t[done:end], beta, hessian=True,
                                            out=eta[done:end])
        grad += g_new
        hess += h_new
        done = end
        start = beta
        beta, grad, hess, ok = _quasi_newton(Z[:end], t[:end], beta, grad, hess, pen, xtol,
                                             max_iter, eta[:end])
        if not ok:
            beta, _ = fit_logistic(Z[:end], t[:end], ridge=ridge, beta0=start)
            _, grad, hess, _ = _logistic_pass(Z[:end], t[:end], beta, hessian=True,
                                              out=eta[:end])
            beta, grad, hess, _ = _quasi_newton(Z[:end], t[:end], beta, grad, hess, pen, xtol,
                                                max_iter, eta[:end])
        yield beta.copy(), eta[:end].copy()


def _quasi_newton(Z, t, beta, grad, hess, pen, xtol, max_iter, eta):
    """Newton steps with a reused Hessian (:func:`logistic_path`); ``grad`` is the exact
    gradient sum at ``beta`` and ``eta`` its linear predictor (updated in place). Between
    refreshes the mean Hessian gets the BFGS correction from each step and gradient change.
    Returns ``beta, grad, hess, converged`` (sums, not means)."""
    n = Z.shape[0]
    mean_hess = hess / n + pen
    previous = np.inf
    for _ in range(max_iter):
        step = _newton_step(mean_hess, grad / n + pen @ beta)
        if step is None:
            break
        size = float(np.max(np.abs(step)))
        if size <= xtol * (1.0 + float(np.max(np.abs(beta)))):
            return beta, grad, (mean_hess - pen) * n, True
        if not np.isfinite(size) or size >= previous:
            break
        refresh = size > CONTRACTION * previous
        previous = size
        beta = beta - step
        old_grad = grad
        _, grad, fresh, _ = _logistic_pass(Z, t, beta, hessian=refresh, out=eta)
        if refresh:
            mean_hess = fresh / n + pen
            continue
        change = (grad - old_grad) / n - pen @ step       # mean-gradient change along -step
        curvature = float(-step @ change)
        if curvature > 0:
            hs = mean_hess @ step
            mean_hess = (mean_hess - np.outer(hs, hs) / float(step @ hs)
                         + np.outer(change, change) / curvature)
    return beta, grad, (mean_hess - pen) * n, False


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
        """Fit by solving the (weighted) normal equations on the identified columns."""
        if not (np.isscalar(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be a number >= 0; got {self.ridge!r}")
        Xa = check_array(X, "X")
        y = check_vector(y, "y", n=Xa.shape[0])
        Z = _design(Xa)
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.keep_ = identified_columns(Z, feature_names_of(X, Xa.shape[1]),
                                        type(self).__name__, sample_weight)
        Zk = Z[:, self.keep_]
        gram = ((Zk * w[:, None]).T @ Zk / w.sum()
                + _penalty(Z.shape[1], self.ridge)[np.ix_(self.keep_, self.keep_)])
        rhs = (Zk * w[:, None]).T @ y / w.sum()
        self.coef_full_ = np.zeros(Z.shape[1])
        self.coef_full_[self.keep_] = np.linalg.lstsq(gram, rhs, rcond=None)[0]
        self.intercept_ = float(self.coef_full_[0])
        self.coef_ = self.coef_full_[1:]
        self.n_features_in_ = Xa.shape[1]
        self.hessian_ = gram
        return self

    def predict(self, X):
        """Fitted mean :math:`\\tilde x^\\top\\hat\\theta`."""
        return _linear_predictor(check_array(X, "X"), self.coef_full_)

    def loss_gradients(self, X, y):
        """Per-unit gradients :math:`-\\tilde x_i (y_i - \\tilde x_i^\\top\\hat\\theta)`
        (identified columns)."""
        X = np.asarray(X, dtype=float)
        resid = _linear_predictor(X, self.coef_full_) - np.asarray(y, dtype=float)
        return _restrict(_gradients(X, resid), self.keep_)

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
        Xa = check_array(X, "X")
        y = check_vector(y, "y", n=Xa.shape[0])
        if np.any((y < 0) | (y > 1)):
            raise ValueError("LogisticOutcomeModel needs outcomes in [0, 1]")
        Z = _design(Xa)
        self.keep_ = identified_columns(Z, feature_names_of(X, Xa.shape[1]),
                                        type(self).__name__, sample_weight)
        Zk = Z[:, self.keep_]
        beta_k, converged = fit_logistic(Zk, y, ridge=self.ridge, sample_weight=sample_weight,
                                         max_iter=self.max_iter)
        p = expit(Zk @ beta_k)
        separated = np.all((p < 1e-6) | (p > 1 - 1e-6))
        if not converged or separated:
            raise ValueError(
                "LogisticOutcomeModel: the outcome is (quasi-)separated by the covariates in the "
                "trial controls, so the maximum-likelihood fit does not exist; use ridge > 0 "
                f"(currently {self.ridge!r}) or fewer covariates")
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.coef_full_ = np.zeros(Z.shape[1])
        self.coef_full_[self.keep_] = beta_k
        self.intercept_ = float(self.coef_full_[0])
        self.coef_ = self.coef_full_[1:]
        self.n_features_in_ = Xa.shape[1]
        self.hessian_ = ((Zk * (w * p * (1 - p))[:, None]).T @ Zk / w.sum()
                         + _penalty(Zk.shape[1], self.ridge))
        return self

    def predict(self, X):
        """Fitted probability :math:`\\hat p(x)`."""
        return expit(_linear_predictor(check_array(X, "X"), self.coef_full_))

    def loss_gradients(self, X, y):
        """Per-unit gradients :math:`\\tilde x_i(\\hat p_i - y_i)`."""
        X = np.asarray(X, dtype=float)
        p = expit(_linear_predictor(X, self.coef_full_))
        return _restrict(_gradients(X, p - np.asarray(y, dtype=float)), self.keep_)

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
        Xa = check_array(X, "X")
        y = check_vector(y, "y", n=Xa.shape[0])
        fitted = clone(base)
        if sample_weight is None:
            fitted.fit(Xa, y)
        else:
            fitted.fit(Xa, y, sample_weight=sample_weight)
        if not (hasattr(fitted, "coef_") and hasattr(fitted, "intercept_")):
            raise TypeError("SklearnGLM needs a linear model exposing coef_ and intercept_")
        self.model_ = fitted
        self.logistic_ = is_classifier(fitted)
        self.coef_full_ = np.concatenate([np.ravel(fitted.intercept_)[:1],
                                          np.ravel(fitted.coef_)])
        Z = _design(Xa)
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.keep_ = identified_columns(Z, feature_names_of(X, Xa.shape[1]),
                                        type(self).__name__, sample_weight)
        Zk = Z[:, self.keep_]
        curv = expit(Z @ self.coef_full_) if self.logistic_ else None
        weights = w * (curv * (1 - curv) if self.logistic_ else 1.0)
        self.hessian_ = ((Zk * weights[:, None]).T @ Zk / w.sum()
                         + float(self.damping) * np.eye(Zk.shape[1]))
        self.n_features_in_ = Xa.shape[1]
        return self

    def predict(self, X):
        """Conditional mean (probability of class 1 for a classifier)."""
        eta = _linear_predictor(check_array(X, "X"), self.coef_full_)
        return expit(eta) if self.logistic_ else eta

    def loss_gradients(self, X, y):
        """Per-unit gradients of squared or log loss at the fitted coefficients."""
        X = np.asarray(X, dtype=float)
        eta = _linear_predictor(X, self.coef_full_)
        resid = (expit(eta) - y) if self.logistic_ else (eta - y)
        return _restrict(_gradients(X, np.asarray(resid, dtype=float)), self.keep_)

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
