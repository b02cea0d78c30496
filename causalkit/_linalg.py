"""Rank checks of design matrices: the aliased-column rule of R's ``lm``, in one place.

:func:`independent_columns` decides which columns a least-squares fit can identify;
:func:`warn_aliased_covariates` names the covariates that are constant or linear combinations of
the others (with an intercept), for estimators whose nuisance models stay well defined with them
(minimum-norm least squares, penalised logistic regression) and so only report them.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import qr

from causalkit.exceptions import RankDeficientWarning

__all__ = ["ALIAS_TOL", "independent_columns", "aliased_covariates", "warn_aliased_covariates"]

#: Tolerance of :func:`independent_columns`: R's ``lm`` default (``qr(tol = 1e-07)``).
ALIAS_TOL = 1e-7


def independent_columns(Z, tol: float = ALIAS_TOL) -> np.ndarray:
    """Indices of the columns of ``Z`` that R's ``lm`` keeps, in order.

    Columns are taken left to right; column :math:`j` is aliased (dropped) when its residual
    after projecting on the kept columns before it is at most ``tol`` times its own norm,
    :math:`|R_{jj}| \\le \\mathrm{tol}\\,\\|Z_j\\|` in the QR factorisation of the kept columns
    (so the rule does not depend on the units of the columns). This is the limited column
    pivoting of LINPACK's ``dqrdc2`` used by ``lm``: earlier columns (the intercept first) are
    preferred, unlike the norm-greedy pivoting of LAPACK's ``geqp3``, which could drop the
    intercept. Each aliased column costs one more QR of the remaining columns; zero columns are
    aliased, and so is every column beyond the number of rows. When every column is far from
    aliased (the unit-norm columns' Cholesky pivots clear ``_GRAM_MARGIN``, which the rounding
    of their Gram matrix cannot move to the tolerance), the QR is skipped: the answer is the same.

    References
    ----------
    Dongarra, Bunch, Moler & Stewart (1979), *LINPACK Users' Guide*, ch. 9 (``dqrdc``); R Core
    Team, ``?qr`` (``LAPACK = FALSE``, ``tol = 1e-07``).
    """
    Z = np.asarray(Z, dtype=float)
    if _clearly_independent(Z.T @ Z, Z.shape[0]):
        return np.arange(Z.shape[1])
    return _qr_rule(Z, tol)


def _qr_rule(Z, tol):
    """The QR rule of :func:`independent_columns`, without its shortcut."""
    norms = np.linalg.norm(Z, axis=0)
    keep = np.flatnonzero(norms > 0)
    while keep.size:
        R = qr(Z[:, keep], mode="r", check_finite=False)[0]
        diag = np.abs(np.diag(R))
        bad = np.flatnonzero(diag <= tol * norms[keep[:diag.size]])
        if bad.size == 0:
            return keep[:diag.size]
        keep = np.delete(keep, bad[0])
    return keep


#: Smallest squared pivot of the unit-norm columns' Cholesky factor that decides "no column is
#: aliased" without the QR: :math:`|R_{jj}|/\|Z_j\| \ge 10^{-3}`, four orders of magnitude above
#: ``ALIAS_TOL``. The Gram matrix's rounding (about :math:`n\epsilon` relative, and
#: :math:`p\epsilon` in the factorisation) moves a squared pivot by far less than this, so the
#: answer is the QR rule's; anything closer goes to the QR.
_GRAM_MARGIN = 1e-6


def _clearly_independent(gram, n_rows) -> bool:
    """Whether the columns whose Gram matrix is ``gram`` (over ``n_rows`` rows) are so far from
    aliased that the QR rule of :func:`independent_columns` keeps them all: no zero column, and
    every squared pivot of the Cholesky factor of the unit-norm columns' Gram matrix
    :math:`D^{-1}Z'ZD^{-1}` (:math:`D` the norms; the pivots are the QR's
    :math:`|R_{jj}|/\\|Z_j\\|`) at least ``_GRAM_MARGIN``."""
    norms = np.sqrt(np.diag(gram))
    if gram.shape[0] == 0 or gram.shape[0] > n_rows or not np.all(norms > 0):
        return False
    try:
        R = np.linalg.cholesky(gram / np.outer(norms, norms))
    except np.linalg.LinAlgError:
        return False
    return bool(np.min(np.diag(R)) ** 2 >= _GRAM_MARGIN)


def aliased_covariates(X) -> np.ndarray:
    """Indices of the columns of ``X`` that :func:`independent_columns` drops from the design
    ``[1, X]``: constant columns and linear combinations of the intercept and earlier columns."""
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    gram = np.empty((p + 1, p + 1))  # of [1, X], without building it
    gram[0, 0] = n
    gram[0, 1:] = gram[1:, 0] = X.sum(axis=0)
    gram[1:, 1:] = X.T @ X
    if _clearly_independent(gram, n):
        return np.array([], dtype=int)
    kept = _qr_rule(np.column_stack([np.ones(n), X]), ALIAS_TOL)
    return np.setdiff1d(np.arange(1, X.shape[1] + 1), kept) - 1


def warn_aliased_covariates(X, names, what: str = "X", consequence: str = "") -> np.ndarray:
    """Warn (:class:`~causalkit.exceptions.RankDeficientWarning`) naming the aliased covariates
    of ``X`` (:func:`aliased_covariates`); ``consequence`` says what the estimator does with
    them. Returns their indices."""
    bad = aliased_covariates(X)
    if bad.size:
        warnings.warn(f"{what}: column(s) {[names[j] for j in bad]} are constant or linear "
                      f"combinations of the intercept and other columns (aliased){consequence}",
                      RankDeficientWarning, stacklevel=4)
    return bad
