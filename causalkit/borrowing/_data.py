"""Validated container for a trial with external controls (one place for input checks)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causalkit._validation import (
    check_array,
    check_binary,
    check_external_controls,
    check_trial_indicator,
    check_vector,
    feature_names_of,
)

__all__ = ["HybridData", "prepare_data"]


@dataclass
class HybridData:
    """Trial units first, external controls after, covariates standardised once.

    ``X`` is standardised with the mean and SD of the *pooled* sample (one common transform for
    all groups: per-group scaling would remove exactly the covariate shift the methods must see).
    ``order`` maps rows back to the caller's row order.
    """

    X: np.ndarray
    y: np.ndarray
    a: np.ndarray
    s: np.ndarray
    order: np.ndarray
    feature_names: list
    n_trial: int
    binary: bool

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


def prepare_data(X, y, treatment, trial) -> HybridData:
    """Validate ``fit(X, y, treatment, trial)`` inputs and reorder trial rows first.

    Raises
    ------
    ValueError
        NaN or infinite values, length mismatches, non-binary ``treatment``/``trial``, an
        external control with ``treatment == 1``, a trial without both arms, a constant column.
    """
    names = feature_names_of(X)
    Xa = check_array(X, "X")
    n = Xa.shape[0]
    ya = check_vector(y, "y", n=n)
    a = check_binary(treatment, "treatment", n=n)
    s = check_trial_indicator(trial, n=n)
    check_external_controls(a, s)
    sd = Xa.std(axis=0)
    if np.any(sd == 0):
        bad = [names[j] for j in np.flatnonzero(sd == 0)]
        raise ValueError(f"X has constant column(s) {bad}; drop them (the models add an intercept)")
    Xs = (Xa - Xa.mean(axis=0)) / sd
    order = np.concatenate([np.flatnonzero(s == 1), np.flatnonzero(s == 0)])
    binary = bool(np.isin(np.unique(ya), (0.0, 1.0)).all())
    return HybridData(X=Xs[order], y=ya[order], a=a[order], s=s[order], order=order,
                      feature_names=names, n_trial=int(s.sum()), binary=binary)
