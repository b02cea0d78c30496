"""Validated container for long-term data with monotone drop-out.

Stage ``t = 1, ..., T`` records ``Z_t``: the short-term outcomes ``S_1, ..., S_{T-1}`` and then the
long-term outcome ``Z_T = Y``. ``R_t = 1`` means ``Z_t`` is observed (1 = observed, never the
reverse). The pattern is monotone: ``R_t = 0`` forces ``R_s = 0`` for every ``s > t``. The history
before stage ``t`` is ``H_t = (X, A, S_1, ..., S_{t-1})``; it is available exactly for the units at
risk at stage ``t`` (``R_{t-1} = 1``, with ``R_0 = 1``).

Internally stages are indexed ``k = t - 1 = 0, ..., T-1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causalkit._validation import (
    check_array,
    check_binary,
    check_both_arms,
    check_vector,
    feature_names_of,
)

__all__ = ["MonotoneData", "check_monotone_data"]


def _rows(idx: np.ndarray) -> str:
    return ", ".join(map(str, idx[:10])) + (" ..." if idx.size > 10 else "")


@dataclass(frozen=True)
class MonotoneData:
    """Covariates ``X`` (n, p), treatment ``a`` (n,), stage values ``Z`` (n, T; NaN where not
    observed) and response indicators ``R`` (n, T; 1 = observed)."""

    X: np.ndarray
    a: np.ndarray
    Z: np.ndarray
    R: np.ndarray
    feature_names: tuple = ()

    @property
    def n(self) -> int:
        return self.X.shape[0]

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
        """The units ``idx`` (indices or a boolean mask)."""
        return MonotoneData(self.X[idx], self.a[idx], self.Z[idx], self.R[idx],
                            self.feature_names)

    def stage_counts(self) -> dict:
        """Numbers at risk and observed per stage and arm: ``{(k, arm): (at_risk, observed)}``."""
        out = {}
        for k in range(self.n_stages):
            risk = self.at_risk(k)
            for arm in (0, 1):
                in_arm = risk & (self.a == arm)
                out[(k, arm)] = (int(in_arm.sum()), int((in_arm & self.responders(k)).sum()))
        return out


def check_monotone_data(X, treatment, short, outcome, observed=None) -> MonotoneData:
    """Validate long-term data under monotone drop-out.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Baseline covariates; must be complete (no NaN).
    treatment : array-like of shape (n,)
        Binary treatment; both arms must be present.
    short : array-like of shape (n, T-1) or None
        Short-term outcomes, one column per stage, NaN after drop-out. ``None`` (or zero
        columns) means a single stage: only the long-term outcome can be missing.
    outcome : array-like of shape (n,)
        Long-term outcome, NaN when missing.
    observed : array-like of shape (n, T), optional
        Explicit response indicators (1 = observed). Values where ``observed == 0`` are ignored.
        Default: derived from the NaN pattern of ``short`` and ``outcome``.

    Raises
    ------
    ValueError
        Non-monotone rows (listed), observed entries that are NaN, or a stage at which every
        unit of an arm still at risk drops out (the effect is then not identified).
    """
    names = feature_names_of(X, None if np.ndim(X) < 2 else np.shape(X)[1])
    X = check_array(X, "X")
    n = X.shape[0]
    a = check_binary(treatment, "treatment", n=n)
    check_both_arms(a, "treatment")
    if short is None:
        S = np.empty((n, 0))
    else:
        S = check_array(short, "short", allow_nan=True) if np.size(short) else np.empty((n, 0))
        if S.shape[0] != n:
            raise ValueError(f"short has {S.shape[0]} rows but X has {n}")
    y = check_vector(outcome, "outcome", n=n, allow_nan=True)
    Z = np.column_stack([S, y])
    T = Z.shape[1]
    if observed is None:
        R = (~np.isnan(Z)).astype(np.int8)
    else:
        R = check_array(observed, "observed")
        if R.shape != (n, T):
            raise ValueError(f"observed must have shape (n, T) = ({n}, {T}) (one column per "
                             f"short-term outcome plus the outcome); got {R.shape}")
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
            f"the missingness pattern is not monotone: {non_monotone.size} row(s) are observed "
            f"again after a drop-out (rows {_rows(non_monotone)}); only monotone drop-out "
            "(no re-entry) is supported")
    short_names = (list(map(str, short.columns)) if hasattr(short, "columns")
                   else [f"S{j + 1}" for j in range(S.shape[1])])
    data = MonotoneData(X, a, Z, R, tuple(names + short_names))
    for (k, arm), (risk, obs) in data.stage_counts().items():
        what = "the outcome" if k == T - 1 else f"short-term outcome {k + 1}"
        if risk > 0 and obs == 0:
            raise ValueError(
                f"every one of the {risk} unit(s) with treatment={arm} still at risk drops out "
                f"at stage {k + 1} ({what}): the long-term effect is not identified")
        if risk == 0:
            raise ValueError(f"no unit with treatment={arm} reaches stage {k + 1} ({what}): "
                             "the long-term effect is not identified")
    return data
