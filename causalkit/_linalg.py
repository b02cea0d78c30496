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
    aliased, and so is every column beyond the number of rows.

    References
    ----------
    Dongarra, Bunch, Moler & Stewart (1979), *LINPACK Users' Guide*, ch. 9 (``dqrdc``); R Core
    Team, ``?qr`` (``LAPACK = FALSE``, ``tol = 1e-07``).
    """
    Z = np.asarray(Z, dtype=float)
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


def aliased_covariates(X) -> np.ndarray:
    """Indices of the columns of ``X`` that :func:`independent_columns` drops from the design
    ``[1, X]``: constant columns and linear combinations of the intercept and earlier columns."""
    X = np.asarray(X, dtype=float)
    kept = independent_columns(np.column_stack([np.ones(X.shape[0]), X]))
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
