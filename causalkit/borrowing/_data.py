"""Validated container for a trial with external controls (one place for input checks)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from causalkit._linalg import warn_aliased_covariates
from causalkit._validation import (
    check_array,
    check_binary,
    check_external_controls,
    check_trial_indicator,
    check_vector,
    feature_names_of,
)
from causalkit.exceptions import SmallSampleWarning

__all__ = ["HybridData", "prepare_data", "MIN_ARM"]

#: Fewest units a trial arm may have: an arm's outcome mean and spread need two.
MIN_ARM = 2


@dataclass
class HybridData:
    """Trial units first, external controls after, covariates standardised once.

    ``X`` holds the identified covariates standardised with the mean and SD of the *pooled*
    sample (one common transform for all groups: per-group scaling would remove exactly the
    covariate shift the methods must see); ``names`` are their names. ``raw`` is the validated
    input covariate array as the caller passed it (every column, unstandardised, in the
    caller's row order; shared with the caller and with every resample, never copied) and
    ``raw_rows`` the row of ``raw`` that each row holds, for :meth:`take`; ``feature_names``
    names the columns of ``raw``. ``order`` maps rows back to the caller's row order. So the
    container holds one copy of the covariates, not two.

    As a data container of :class:`causalkit._base.CausalEstimator`: ``n_rows``, ``strata``
    (``2 * trial + treatment``: the bootstrap resamples trial arms and external controls
    separately) and :meth:`take`.

    ``warm_start`` holds starting values that fits on this data leave for fits on its resamples
    (:meth:`take` hands a copy down): a bootstrap refit then starts its iterative fits from the
    full-sample solution and converges in fewer passes to the same optimum.

    ``units`` is the row of the data as fitted that each row copies (``None`` for that data
    itself): :meth:`take` carries it, so the cross-fitting folds of a bootstrap resample keep
    the copies of one unit together (``make_folds(groups=...)``).
    """

    X: np.ndarray
    y: np.ndarray
    a: np.ndarray
    s: np.ndarray
    raw: np.ndarray
    raw_rows: np.ndarray
    order: np.ndarray
    feature_names: list
    names: list
    n_trial: int
    binary: bool
    warm_start: dict = field(default_factory=dict, repr=False, compare=False)
    units: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    @property
    def strata(self) -> np.ndarray:
        return 2 * self.s + self.a

    @property
    def n_external(self) -> int:
        return self.X.shape[0] - self.n_trial

    @property
    def trial(self) -> slice:
        return slice(0, self.n_trial)

    @property
    def external(self) -> slice:
        return slice(self.n_trial, None)

    @property
    def controls(self) -> np.ndarray:
        """Boolean mask of trial controls within the trial rows."""
        return self.a[: self.n_trial] == 0

    def frame(self, rows=slice(None)) -> pd.DataFrame:
        """The standardised covariates of ``rows`` as a DataFrame named by ``names`` (so that
        nuisance models report the user's column names)."""
        return pd.DataFrame(self.X[rows], columns=self.names, copy=False)

    def take(self, idx) -> HybridData:
        """The container of rows ``idx`` (of this container), standardised and checked for
        aliased covariates as a fresh fit would be (the inputs are not re-validated: they are
        rows of validated data)."""
        idx = np.asarray(idx)
        out = _assemble(self.raw, self.raw_rows[idx], self.y[idx], self.a[idx], self.s[idx],
                        self.feature_names)
        out.warm_start.update(self.warm_start)
        out.units = (idx if self.units is None else self.units[idx])[out.order]
        return out


def prepare_data(X, y, treatment, trial, *, feature_names=None) -> HybridData:
    """Validate ``fit(X, y, treatment, trial=...)`` inputs and reorder trial rows first.

    Columns of ``X`` that are constant or aliased (a linear combination of the intercept and
    earlier columns on the pooled sample, e.g. dummies that sum to one) are dropped with a
    :class:`~causalkit.exceptions.RankDeficientWarning` naming them
    (:func:`~causalkit._linalg.independent_columns`). A trial arm with fewer units than
    the default outcome model's parameters (identified covariates plus intercept) gives a
    :class:`~causalkit.exceptions.SmallSampleWarning`.

    Raises
    ------
    ValueError
        NaN or infinite values, length mismatches, non-binary ``treatment``/``trial``, an
        external control with ``treatment == 1``, a trial arm with fewer than :data:`MIN_ARM`
        units.
    """
    names = feature_names_of(X) if feature_names is None else list(feature_names)
    Xa = check_array(X, "X")
    n = Xa.shape[0]
    ya = check_vector(y, "y", n=n)
    a = check_binary(treatment, "treatment", n=n)
    s = check_trial_indicator(trial, n=n)
    check_external_controls(a, s)
    arms = np.bincount(a[s == 1], minlength=2)
    if arms.min() < MIN_ARM:
        raise ValueError(f"treatment: each trial arm (trial == 1) needs at least {MIN_ARM} "
                         f"units; got {arms[1]} treated and {arms[0]} control units")
    return _assemble(Xa, None, ya, a, s, names)


#: Squared relative residual norm above which no column can be aliased under the rule of
#: :func:`~causalkit._linalg.independent_columns` (which drops a column whose residual norm is
#: below 1e-7 of its norm, i.e. 1e-14 squared), with a safety factor of 100.
_SAFE_RESIDUAL2 = 1e-12


def _assemble(raw, raw_rows, ya, a, s, names) -> HybridData:
    """Standardise, drop aliased columns and order trial rows first (validated inputs): the
    rows ``raw_rows`` of ``raw`` (``None``: all of them, in order) with outcomes ``ya``.

    The aliasing rule (:func:`~causalkit._linalg.independent_columns`, a QR of the design) runs
    only when the cheap sufficient condition for full rank on the :math:`p\\times p` Gram matrix
    fails. The standardised copy is the only :math:`n\\times p` array kept; the centring and
    scaling are done in place.
    """
    Xa = raw if raw_rows is None else raw[raw_rows]
    varying = np.ptp(Xa, axis=0) > 0
    mean, sd = Xa.mean(axis=0), Xa.std(axis=0)
    order = np.concatenate([np.flatnonzero(s == 1), np.flatnonzero(s == 0)])
    Xs = Xa[order]
    Xs -= mean
    Xs /= np.where(varying, sd, 1.0)
    Xs[:, ~varying] = 0.0
    if varying.all() and _clearly_full_rank(Xs, mean, sd * sd):
        keep = np.arange(Xa.shape[1])
    else:
        dropped = warn_aliased_covariates(Xa, names,
                                          consequence=" and were dropped, as R's lm does")
        keep = np.setdiff1d(np.arange(Xa.shape[1]), dropped)
    if keep.size == 0:
        raise ValueError(f"X: every covariate column is constant ({names})")
    if keep.size < Xa.shape[1]:
        Xs = Xs[:, keep]
    ya, a, s = ya[order], a[order], s[order]
    raw_rows = order if raw_rows is None else raw_rows[order]
    n_trial = int(s.sum())
    arms = np.bincount(a[s == 1], minlength=2)
    if arms.min() < keep.size + 1:
        warnings.warn(f"treatment: the smallest trial arm has {arms.min()} units, fewer than "
                      f"the {keep.size + 1} parameters of a linear outcome model on "
                      f"{keep.size} covariates; its fit is not identified (aliased columns are "
                      "dropped)", SmallSampleWarning, stacklevel=5)
    binary = bool(np.isin(np.unique(ya), (0.0, 1.0)).all())
    return HybridData(X=Xs, y=ya, a=a, s=s, raw=raw, raw_rows=raw_rows, order=order,
                      feature_names=names, names=[names[j] for j in keep], n_trial=n_trial,
                      binary=binary)


def _clearly_full_rank(Xs: np.ndarray, mean: np.ndarray, var: np.ndarray) -> bool:
    """A cheap sufficient condition for "no column (after the intercept) is aliased".

    The standardised columns ``Xs`` are orthogonal to the intercept, so the squared residual
    norm of raw column :math:`j` (mean :math:`m_j`, variance :math:`s_j^2`) after projecting on
    the intercept and the other columns is at least :math:`n\\,\\lambda_{min}\\,s_j^2`, with
    :math:`\\lambda_{min}` the smallest eigenvalue of :math:`X_s^\\top X_s/n`, against its
    squared norm :math:`n(m_j^2 + s_j^2)`; the check is
    :math:`\\lambda_{min}\\min_j s_j^2/(m_j^2+s_j^2) >` :data:`_SAFE_RESIDUAL2`.
    """
    lam = np.linalg.eigvalsh(Xs.T @ Xs / Xs.shape[0])[0]
    return bool(lam * np.min(var / (mean * mean + var)) > _SAFE_RESIDUAL2)
