"""Linear cost model of the downtime of a resize, fitted to measured events.

``downtime = a + b * bytes + c * processes`` (any set of regressors): ordinary least squares
with classical standard errors (statsmodels ``OLS``), and predictions with the standard error
of the fitted mean, ``se(x'beta) = sqrt(x' Cov(beta) x)`` with ``Cov(beta) = s^2 (X'X)^-1`` and
``s^2 = RSS / (n - p)`` (e.g. Greene, *Econometric Analysis*, 7th ed., sections 4.3 and 4.6).

A prediction far outside the fitted range (the paper's GPU settings from CPU runs of a few
gigabytes) rests on the model being linear there; its standard error covers only the
uncertainty of the coefficients, not that assumption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["CostFit", "fit_costs"]


class CostFit:
    """Result of :func:`fit_costs`.

    Attributes
    ----------
    terms : tuple of str
        The regressors (the intercept is ``"intercept"``, always first in ``coef``).
    coef, se : pandas.Series
        Coefficients and their standard errors, indexed by ``("intercept", *terms)``.
    cov : numpy.ndarray
        Covariance matrix of the coefficients.
    n : int
        Observations.
    r2 : float
        Coefficient of determination.
    """

    def __init__(self, terms, coef, cov, n, r2):
        self.terms = tuple(terms)
        names = ("intercept", *self.terms)
        self.coef = pd.Series(coef, index=names)
        self.cov = cov
        self.se = pd.Series(np.sqrt(np.diag(cov)), index=names)
        self.n = int(n)
        self.r2 = float(r2)

    def predict(self, x: Mapping) -> tuple[float, float]:
        """Fitted mean at ``x`` (a mapping with every term) and its standard error."""
        missing = [t for t in self.terms if t not in x]
        if missing:
            raise ValueError(f"x is missing the terms {missing}")
        v = np.array([1.0, *(float(x[t]) for t in self.terms)])
        return float(v @ self.coef.to_numpy()), float(np.sqrt(v @ self.cov @ v))

    def to_frame(self) -> pd.DataFrame:
        """One row per coefficient: ``term, coef, se, n, r2``."""
        return pd.DataFrame({"term": self.coef.index, "coef": self.coef.to_numpy(),
                             "se": self.se.to_numpy(), "n": self.n, "r2": self.r2})


def fit_costs(table: pd.DataFrame, y: str, terms: Sequence[str]) -> CostFit:
    """Least-squares fit of ``table[y]`` on an intercept and the columns ``terms``.

    Raises ``ValueError`` when a column is missing, when there are no more rows than
    coefficients, or when the regressors are collinear (e.g. a single state size).
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a DataFrame; got {type(table).__name__}")
    terms = [terms] if isinstance(terms, str) else list(terms)
    missing = [c for c in (y, *terms) if c not in table]
    if missing:
        raise ValueError(f"table has no columns {missing}")
    data = table[[y, *terms]].astype(float).dropna()
    n, p = len(data), len(terms) + 1
    if n <= p:
        raise ValueError(f"need more than {p} rows with {y} and {terms}; got {n}")
    X = np.column_stack([np.ones(n), data[terms].to_numpy()])
    if np.linalg.matrix_rank(X) < p:
        raise ValueError(f"the terms {terms} are collinear in these rows (vary them)")
    import statsmodels.api as sm

    fit = sm.OLS(data[y].to_numpy(), X).fit()
    return CostFit(terms, fit.params, fit.cov_params(), n, fit.rsquared)
