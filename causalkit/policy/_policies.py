"""Turning a user's policy into an (n, K) matrix of action probabilities, with clear errors.

A *policy* maps covariates to a distribution over the K treatment arms seen in the source sample.
It can be given as

* an object with ``predict_proba(X)`` returning an (n, K) matrix (columns in the order of the
  sorted source arms), e.g. a fitted :class:`~causalkit.policy.TargetPolicyLearner`;
* a callable ``policy(X)`` returning such a matrix, or a 1-D vector of arm labels (a
  deterministic policy; it is turned into one-hot rows);
* a single arm label (int or float), meaning "always assign this arm".
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["policy_matrix", "one_hot"]

_ATOL = 1e-6


def one_hot(labels: np.ndarray, arms: np.ndarray) -> np.ndarray:
    """One-hot rows for arm ``labels`` (each must be in ``arms``); shape (n, K)."""
    labels = np.asarray(labels, dtype=float).ravel()
    index = np.searchsorted(arms, labels)
    index = np.clip(index, 0, arms.size - 1)
    unseen = arms[index] != labels
    if unseen.any():
        bad = np.unique(labels[unseen])[:5].tolist()
        raise ValueError(f"policy assigns arm(s) {bad} that are not among the treatment arms seen "
                         f"in the source sample {arms.tolist()}")
    out = np.zeros((labels.size, arms.size))
    out[np.arange(labels.size), index] = 1.0
    return out


def policy_matrix(policy, X: np.ndarray, arms: np.ndarray, *, name: str = "policy") -> np.ndarray:
    """Evaluate ``policy`` at the rows of ``X`` and validate the result.

    Parameters
    ----------
    policy : object with ``predict_proba``, callable, or an arm label
    X : ndarray of shape (n, p)
        Covariates (already validated).
    arms : ndarray of shape (K,)
        Sorted treatment arms of the source sample.
    name : str
        Argument name for error messages.

    Returns
    -------
    ndarray of shape (n, K)
        Rows are probability vectors (non-negative, summing to one within 1e-6).

    Raises
    ------
    ValueError
        Wrong shape, negative entries, rows not summing to one, non-finite values, or a label
        outside ``arms``.
    TypeError
        ``policy`` is none of the accepted kinds.
    """
    n = X.shape[0]
    if isinstance(policy, numbers.Real) and not isinstance(policy, bool):
        return one_hot(np.full(n, float(policy)), arms)
    if hasattr(policy, "predict_proba"):
        out = policy.predict_proba(X)
    elif callable(policy):
        out = policy(X)
    else:
        raise TypeError(f"{name} must be an arm label, a callable X -> (n, K) probabilities or "
                        f"arm labels, or an object with predict_proba; got {type(policy).__name__}")
    try:
        out = np.asarray(out, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must return numbers; got {type(out).__name__}") from exc
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    if out.ndim == 1:
        if out.shape[0] != n:
            raise ValueError(f"{name} returned {out.shape[0]} labels for {n} rows")
        if not np.isfinite(out).all():
            raise ValueError(f"{name} returned non-finite arm labels")
        return one_hot(out, arms)
    if out.ndim != 2 or out.shape != (n, arms.size):
        raise ValueError(f"{name} must return an ({n}, {arms.size}) probability matrix (one column "
                         f"per source arm {arms.tolist()}); got shape {out.shape}")
    if not np.isfinite(out).all():
        raise ValueError(f"{name} returned non-finite probabilities")
    if (out < -_ATOL).any() or (out > 1 + _ATOL).any():
        raise ValueError(f"{name} returned probabilities outside [0, 1] "
                         f"(min {out.min():.3g}, max {out.max():.3g})")
    sums = out.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > _ATOL)
    if bad.size:
        raise ValueError(f"{name} returned rows that do not sum to 1 (e.g. row {bad[0]} sums to "
                         f"{sums[bad[0]]:.6g}; {bad.size} such rows)")
    return np.clip(out, 0.0, 1.0)
