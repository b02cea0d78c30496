"""Validated container for long-term data with monotone drop-out.

Stage ``t = 1, ..., T`` records ``Z_t``: the short-term outcomes ``S_1, ..., S_{T-1}`` and then the
long-term outcome ``Z_T = Y``. ``R_t = 1`` means ``Z_t`` is observed (1 = observed, never the
reverse). The pattern is monotone: ``R_t = 0`` forces ``R_s = 0`` for every ``s > t``. The history
before stage ``t`` is ``H_t = (X, A, S_1, ..., S_{t-1})``; it is available exactly for the units at
risk at stage ``t`` (``R_{t-1} = 1``, with ``R_0 = 1``).

Internally stages are indexed ``k = t - 1 = 0, ..., T-1``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from causalkit._linalg import warn_aliased_covariates
from causalkit._validation import (
    check_array,
    check_binary,
    check_both_arms,
    check_vector,
    feature_names_of,
)
from causalkit.exceptions import SmallSampleWarning

__all__ = ["MonotoneData", "check_monotone_data"]


def _rows(idx: np.ndarray) -> str:
    return ", ".join(map(str, idx[:10])) + (" ..." if idx.size > 10 else "")


@dataclass(frozen=True)
class MonotoneData:
    """Covariates ``X`` (n, p), treatment ``a`` (n,), stage values ``Z`` (n, T; NaN where not
    observed) and response indicators ``R`` (n, T; 1 = observed).

    The data container of the estimator core: ``n_rows``, ``strata`` (the treatment, which the
    pipeline bootstrap resamples within) and ``take(idx)``. ``units`` is the row of the data as
    fitted that each row copies (``None`` for that data itself): :meth:`take` carries it, so the
    cross-fitting folds of a bootstrap resample keep the copies of one unit together
    (``make_folds(groups=...)``).
    """

    X: np.ndarray
    a: np.ndarray
    Z: np.ndarray
    R: np.ndarray
    feature_names: tuple = ()
    units: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def n_rows(self) -> int:
        return self.n

    @property
    def strata(self) -> np.ndarray:
        return self.a

    @property
    def n_stages(self) -> int:
        return self.Z.shape[1]

    def at_risk(self, k: int) -> np.ndarray:
        """Units whose history before stage ``k`` is observed (``R_{k-1} = 1``; all at k = 0)."""
        return np.ones(self.n, dtype=bool) if k == 0 else self.R[:, k - 1].astype(bool)

    def responders(self, k: int) -> np.ndarray:
        """Units with ``Z_k`` observed (``R_k = 1``)."""
        return self.R[:, k].astype(bool)

    def history(self, k: int, rows=None) -> np.ndarray:
        """``(X, Z_0, ..., Z_{k-1})`` (treatment excluded) for ``rows``, which must be at risk."""
        rows = slice(None) if rows is None else rows
        return np.column_stack([self.X[rows], self.Z[rows, :k]])

    def subset(self, idx) -> MonotoneData:
        """The units ``idx`` (indices or a boolean mask), without validation (folds)."""
        return MonotoneData(self.X[idx], self.a[idx], self.Z[idx], self.R[idx],
                            self.feature_names)

    def take(self, idx) -> MonotoneData:
        """The units ``idx`` validated as a fresh fit would validate them (bootstrap)."""
        idx = np.asarray(idx)
        idx = np.flatnonzero(idx) if idx.dtype == bool else idx
        data = replace(self.subset(idx), units=idx if self.units is None else self.units[idx])
        check_both_arms(data.a, "treatment")
        _check_identified(data, warn=False)
        return data

    def stage_counts(self) -> dict:
        """Numbers at risk and observed per stage and arm: ``{(k, arm): (at_risk, observed)}``."""
        out = {}
        for k in range(self.n_stages):
            risk = self.at_risk(k)
            for arm in (0, 1):
                in_arm = risk & (self.a == arm)
                out[(k, arm)] = (int(in_arm.sum()), int((in_arm & self.responders(k)).sum()))
        return out


def _check_identified(data: MonotoneData, warn: bool = True) -> None:
    """Every stage has responders in both arms (else the effect is not identified); with
    ``warn``, warn when a stage and arm has fewer responders than the default stage regression
    has parameters."""
    T = data.n_stages
    p = data.X.shape[1]
    small = []
    for (k, arm), (risk, obs) in data.stage_counts().items():
        what = "y (the long-term outcome)" if k == T - 1 else f"short-term outcome {k + 1}"
        if risk > 0 and obs == 0:
            raise ValueError(
                f"every one of the {risk} unit(s) with treatment={arm} still at risk drops out "
                f"at stage {k + 1} ({what}): the long-term effect is not identified")
        if risk == 0:
            raise ValueError(f"no unit with treatment={arm} reaches stage {k + 1} ({what}): "
                             "the long-term effect is not identified")
        if obs < p + k + 1:
            small.append(f"stage {k + 1} arm {arm}: {obs} responder(s) for {p + k + 1} "
                         "parameters")
    if small and warn:
        warnings.warn("fewer responders than the default stage regression has parameters ("
                      + "; ".join(small) + "): its fit is not identified without shrinkage",
                      SmallSampleWarning, stacklevel=4)


def check_monotone_data(X, y, treatment, *, short=None, observed=None) -> MonotoneData:
    """Validate long-term data under monotone drop-out.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Baseline covariates; must be complete (no NaN).
    y : array-like of shape (n,)
        Long-term outcome, NaN when missing.
    treatment : array-like of shape (n,)
        Binary treatment (0/1 or boolean); both arms must be present.
    short : array-like of shape (n, T-1) or None
        Short-term outcomes, one column per stage, NaN after drop-out. ``None`` (or zero
        columns) means a single stage: only the long-term outcome can be missing.
    observed : array-like of shape (n, T), optional
        Explicit response indicators (1 = observed). Values where ``observed == 0`` are ignored.
        Default: derived from the NaN pattern of ``short`` and ``y``.

    Raises
    ------
    ValueError
        Non-monotone rows (listed), observed entries that are NaN, or a stage at which every
        unit of an arm still at risk drops out (the effect is then not identified).

    Warns
    -----
    RankDeficientWarning
        Constant or collinear covariate columns (named).
    SmallSampleWarning
        A stage and arm with fewer responders than the default stage regression's parameters.
    """
    names = feature_names_of(X, None if np.ndim(X) < 2 else np.shape(X)[1])
    X = np.ascontiguousarray(check_array(X, "X"))   # a DataFrame's block is column-major
    n = X.shape[0]
    y = check_vector(y, "y", n=n, allow_nan=True)
    a = check_binary(treatment, "treatment", n=n)
    check_both_arms(a, "treatment")
    if short is None or (np.ndim(short) == 2 and np.shape(short)[1] == 0):
        S = np.empty((n, 0))
    else:
        S = check_array(short, "short", allow_nan=True)
        if S.shape[0] != n:
            raise ValueError(f"short has {S.shape[0]} rows but X has {n}")
    Z = np.column_stack([S, y])
    T = Z.shape[1]
    if observed is None:
        R = (~np.isnan(Z)).astype(np.int8)
    else:
        R = check_array(observed, "observed")
        if R.shape != (n, T):
            raise ValueError(f"observed must have shape (n, T) = ({n}, {T}) (one column per "
                             f"short-term outcome plus y); got {R.shape}")
        if not np.isin(R, (0.0, 1.0)).all():
            raise ValueError("observed must be binary (1 = observed, 0 = missing)")
        R = R.astype(np.int8)
        bad = np.flatnonzero(((R == 1) & np.isnan(Z)).any(axis=1))
        if bad.size:
            raise ValueError(f"observed marks NaN values as observed (rows {_rows(bad)})")
        Z = np.where(R == 1, Z, np.nan)
    non_monotone = np.flatnonzero((np.diff(R, axis=1) > 0).any(axis=1))
    if non_monotone.size:
        raise ValueError(
            f"the missingness pattern of short and y is not monotone: {non_monotone.size} "
            f"row(s) are observed again after a drop-out (rows {_rows(non_monotone)}); only "
            "monotone drop-out (no re-entry) is supported")
    short_names = (list(map(str, short.columns)) if hasattr(short, "columns")
                   else [f"S{j + 1}" for j in range(S.shape[1])])
    data = MonotoneData(X, a, Z, R, tuple(names + short_names))
    _check_identified(data)
    warn_aliased_covariates(
        X, names, consequence="; the default least-squares fits give the same fitted values "
        "without them (minimum-norm solution) and the logistic fits nearly the same: drop them "
        "to silence this warning")
    return data
