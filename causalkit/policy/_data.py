"""The validated two-sample data of the policy estimators: a labelled source and a target.

:func:`policy_data` turns the arguments of ``fit(X, y, treatment, *, X_target, covariates)``
(arrays or the DataFrame front end) into a :class:`TwoSampleData` container. The container
stacks the samples, source rows first: ``n_rows = n_S + n_T``, and its ``strata`` (the arm
within the source, one more label for the target) make the pipeline bootstrap of
:class:`causalkit._base.CausalEstimator` a two-sample bootstrap that keeps every arm's size
and ``n_T``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from causalkit._base import reject_positional_roles, resolve_roles
from causalkit._linalg import warn_aliased_covariates
from causalkit._validation import check_array, check_vector, feature_names_of

__all__ = ["TwoSampleData", "policy_data"]

#: More distinct treatment values than this, some non-integer, reads as outcomes, not arms.
_MAX_ARMS = 10


@dataclass(frozen=True)
class TwoSampleData:
    """Source covariates ``Xs`` (n_S, p), arm labels ``a`` and outcomes ``y`` (n_S,), target
    covariates ``Xt`` (n_T, p); ``feature_names`` and ``is_frame`` (whether ``X`` was a
    DataFrame, so that policies see DataFrames with those columns).

    ``units`` is the stacked row of the data as fitted that each row copies (``None`` for
    that data itself): :meth:`take` carries it, so the cross-fitting folds of a bootstrap
    resample keep the copies of one unit together (``make_folds(groups=...)``)."""

    Xs: np.ndarray
    a: np.ndarray
    y: np.ndarray
    Xt: np.ndarray
    feature_names: tuple
    is_frame: bool
    units: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def arms(self) -> np.ndarray:
        """Sorted distinct arm labels of the source."""
        return np.unique(self.a)

    @property
    def n_source(self) -> int:
        return self.Xs.shape[0]

    @property
    def n_rows(self) -> int:
        return self.Xs.shape[0] + self.Xt.shape[0]

    @property
    def strata(self) -> np.ndarray:
        """Arm index for source rows, ``K`` for target rows."""
        arms = self.arms
        return np.r_[np.searchsorted(arms, self.a), np.full(self.Xt.shape[0], arms.size)]

    def take(self, idx) -> TwoSampleData:
        """Rows ``idx`` of the stacked samples (``< n_S``: source), validated as a fit would."""
        idx = np.asarray(idx)
        n_s = self.n_source
        src, tgt = idx[idx < n_s], idx[idx >= n_s] - n_s
        rows = np.r_[src, n_s + tgt]
        return _checked(self.Xs[src], self.a[src], self.y[src], self.Xt[tgt],
                        self.feature_names, self.is_frame,
                        rows if self.units is None else self.units[rows])

    @property
    def source_units(self) -> np.ndarray | None:
        """``units`` of the source rows (``None`` when the rows are the data as fitted)."""
        return None if self.units is None else self.units[: self.n_source]

    @property
    def target_units(self) -> np.ndarray | None:
        """``units`` of the target rows (``None`` when the rows are the data as fitted)."""
        return None if self.units is None else self.units[self.n_source:]

    def frame(self, X: np.ndarray):
        """``X`` as the user gave covariates: a DataFrame with the feature names, or the array."""
        return pd.DataFrame(X, columns=list(self.feature_names)) if self.is_frame else X


def _checked(Xs, a, y, Xt, names, is_frame, units=None) -> TwoSampleData:
    """The container, after the checks that depend on the rows (the arms)."""
    arms = np.unique(a)
    if arms.size < 2:
        raise ValueError(f"treatment must contain at least 2 arms in the source; "
                         f"got {arms.tolist()}")
    if arms.size > _MAX_ARMS and not np.all(arms == np.round(arms)):
        raise ValueError(f"treatment must be a small set of arm labels; got {arms.size} distinct "
                         "values, not all integers. Were y and treatment swapped? The order is "
                         "fit(X, y, treatment, X_target=...)")
    return TwoSampleData(Xs, a, y, Xt, tuple(names), bool(is_frame), units)


def policy_data(estimator, X, y, treatment, args, X_target, covariates) -> TwoSampleData:
    """Validate ``fit``'s arguments into a :class:`TwoSampleData`.

    Raises ``TypeError`` for positional arguments after ``treatment`` (the former order
    ``fit(X_source, treatment, y, X_target)``), and ``ValueError``/``TypeError`` naming the
    argument for bad input; an arm-like ``y`` with an outcome-like ``treatment`` (more than 10
    distinct values, some non-integer) is reported as a likely swap.
    """
    reject_positional_roles(estimator, args, "X_target=")
    if X_target is None:
        raise ValueError("X_target is required (the target sample's covariates); got None")
    X, roles = resolve_roles(X, {"y": y, "treatment": treatment, "X_target": X_target},
                             covariates=covariates, frames=("X_target",))
    Xs = check_array(X, "X")
    Xt = check_array(roles["X_target"], "X_target")
    if Xt.shape[1] != Xs.shape[1]:
        raise ValueError(f"X_target has {Xt.shape[1]} columns but X has {Xs.shape[1]}; both "
                         "samples need the same covariates")
    names = feature_names_of(X, Xs.shape[1])
    a = check_vector(roles["treatment"], "treatment", n=Xs.shape[0])
    y = check_vector(roles["y"], "y", n=Xs.shape[0])
    data = _checked(Xs, a, y, Xt, names, isinstance(X, pd.DataFrame))
    warn_aliased_covariates(
        np.vstack([Xs, Xt]), names, consequence=" on the stacked source and target samples; the "
        "nuisance models are fitted with them (the defaults remain well defined): drop them to "
        "silence this warning")
    return data
