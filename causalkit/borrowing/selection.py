"""Nested borrowing sets ranked by influence score, and the MSE path that picks one.

External controls sorted by ascending score (ties broken by row order) give nested sets
:math:`\\emptyset = S_0 \\subset S_{k_1} \\subset \\dots \\subset S_{n_E}`. For each size :math:`k`
on the grid the efficient estimator gives :math:`\\hat\\tau_k` and :math:`\\hat V_k`; the
estimated mean squared error is

* ``"plugin"`` (the form used by Yang, Li & Wu 2025):
  :math:`\\widehat{MSE}_k = (\\hat\\tau_k-\\hat\\tau_0)^2 + \\hat V_k`, the bias measured against
  the unbiased trial-only estimate :math:`\\hat\\tau_0`;
* ``"debiased"`` (the estimators' default):
  :math:`\\max\\{(\\hat\\tau_k-\\hat\\tau_0)^2 - \\hat V(\\hat\\tau_k-\\hat\\tau_0),
  0\\} + \\hat V_k`, since :math:`E(\\hat\\tau_k-\\hat\\tau_0)^2 = B_k^2 +
  Var(\\hat\\tau_k-\\hat\\tau_0)` makes the plug-in over-penalise borrowing. The variance of the
  difference uses the difference of the two influence functions on the common sample
  (a reconstruction, not in the papers).

:math:`k^* = \\arg\\min_k \\widehat{MSE}_k`; :math:`k = 0` is always on the grid, so the rule can
fall back to no borrowing.
"""

from __future__ import annotations

import itertools
import numbers

import numpy as np
import pandas as pd

from causalkit.borrowing.efficient import difference_se

__all__ = ["size_grid", "rank_order", "mse_path", "CRITERIA", "DEFAULT_GRID_POINTS"]

CRITERIA = ("plugin", "debiased")
#: Number of evenly spaced sizes in the default grid (0 and n_E included): steps of 20 for the
#: 800 external controls of the reference design, the resolution used by Yang et al.
DEFAULT_GRID_POINTS = 41


def size_grid(n_external: int, grid=None) -> np.ndarray:
    """Borrowing-set sizes to evaluate (sorted, unique, always containing 0).

    Parameters
    ----------
    n_external : int
    grid : None, int, or sequence
        ``None``: :data:`DEFAULT_GRID_POINTS` evenly spaced sizes from 0 to ``n_external``;
        an int ``m >= 2``: ``m`` evenly spaced sizes; a sequence of integers: the sizes
        themselves (capped at ``n_external``); a sequence of numbers in [0, 1] with at least
        one non-integer: fractions of ``n_external``.
    """
    if grid is None or isinstance(grid, numbers.Integral) and not isinstance(grid, bool):
        m = DEFAULT_GRID_POINTS if grid is None else int(grid)
        if m < 2:
            raise ValueError(f"grid as an int is a number of sizes and must be >= 2; got {grid}")
        sizes = np.round(np.linspace(0, n_external, m))
    else:
        values = np.asarray(grid, dtype=float).ravel()
        if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError(f"grid must hold sizes >= 0 or fractions in [0, 1]; got {grid!r}")
        if np.all(values == np.round(values)):
            sizes = np.minimum(values, n_external)
        elif np.all(values <= 1):
            sizes = np.round(values * n_external)
        else:
            raise ValueError("grid mixes fractions and sizes; give integers (sizes) or numbers "
                             f"in [0, 1] (fractions); got {grid!r}")
    return np.unique(np.concatenate([[0], sizes]).astype(int))


def rank_order(scores: np.ndarray) -> np.ndarray:
    """External controls by ascending score, ties broken by row order."""
    return np.argsort(scores, kind="stable")


def mse_path(engine, order: np.ndarray, sizes: np.ndarray, criterion: str = "plugin"):
    """Evaluate the nested sets and pick the MSE-minimising size.

    Parameters
    ----------
    engine : EfficientBorrowing
        Its :meth:`~causalkit.borrowing.efficient.EfficientBorrowing.nested` evaluates the
        whole grid along one warm-started path.
    order : ndarray
        External-control indices, most comparable first.
    sizes : ndarray of int
        Grid of set sizes (0 is added if missing).
    criterion : {"plugin", "debiased"}

    Returns
    -------
    path : DataFrame
        Columns ``size, estimate, se, bias2, variance, mse``.
    best : BorrowedFit
        The fit at the selected size.
    best_size : int
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}; got {criterion!r}")
    sizes = np.union1d([0], np.asarray(sizes, dtype=int))
    fits = engine.nested(order, sizes)
    base = next(fits)
    rows, best, best_size, best_mse = [], base, 0, np.inf
    for k, fit in zip(sizes, itertools.chain([base], fits), strict=True):
        diff = fit.value - base.value
        bias2 = diff * diff
        if criterion == "debiased" and k > 0:
            bias2 = max(bias2 - difference_se(base, fit) ** 2, 0.0)
        variance = fit.std_error ** 2
        mse = bias2 + variance
        rows.append((int(k), fit.value, fit.std_error, bias2, variance, mse))
        if mse < best_mse:
            best, best_size, best_mse = fit, int(k), mse
    path = pd.DataFrame(rows, columns=["size", "estimate", "se", "bias2", "variance", "mse"])
    return path, best, best_size
