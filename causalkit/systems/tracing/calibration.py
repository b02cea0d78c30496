"""Calibrating the straggler threshold of diagnosis on healthy runs of the same host.

Level 2 flags a rank whose phase exceeds its group's baseline by at least ``phase_rel``
(relative), with ``z >= phase_z`` and an impact of at least ``phase_impact`` of the iteration.
The reference default ``phase_rel = 0.15`` assumes homogeneous devices. Ranks that share a
host's cores do not have them: on the 2-core host of the ARGUS study, fault-free 2-rank runs
showed one rank's compute phases 16-54 % slower than its peer's for a whole run, with the
thread's CPU time up by as much where it was measured (so not time lost to descheduling),
which the default reads as a compute straggler.

:func:`calibrate_phase_rel` rediagnoses runs known to be healthy over a grid of ``phase_rel``
values and returns the smallest one whose false-alarm rate (share of runs with any root-cause
finding) is at most ``max_false_alarm``: the usual way of setting a detector's operating point
from its null distribution. Calibrate and evaluate on different runs.

Reference: Zhou et al. (2026), arXiv 2606.20374, section 6 (the L2 thresholds).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from causalkit.exceptions import CausalkitWarning
from causalkit.systems.tracing.diagnosis import diagnose

__all__ = ["calibrate_phase_rel", "false_alarms", "choose_phase_rel", "PHASE_REL_GRID"]

#: Default grid of :func:`calibrate_phase_rel` (the reference default first).
PHASE_REL_GRID = (0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0)


def calibrate_phase_rel(stores, grid=PHASE_REL_GRID, max_false_alarm: float = 0.1,
                        **diagnose_options) -> tuple[float, pd.DataFrame]:
    """Smallest ``phase_rel`` in ``grid`` with a false-alarm rate <= ``max_false_alarm`` on
    healthy runs.

    Parameters
    ----------
    stores : sequence of TraceStore, MemoryStore or path
        Trace stores of runs without a fault.
    grid : sequence of float
        Candidate values (> 0), searched in increasing order.
    max_false_alarm : float
        Largest acceptable share of healthy runs with a root-cause finding, in [0, 1).
    **diagnose_options
        Other keyword arguments of :func:`diagnose`, held fixed.

    Returns
    -------
    phase_rel : float
        The chosen value; the largest grid value, with a warning, if none meets the target.
    table : DataFrame
        Per grid value: ``false_alarm_rate`` and ``runs``.
    """
    stores = list(stores)
    if not stores:
        raise ValueError("stores must hold at least one healthy run")
    _grid(grid), _check_rate(max_false_alarm)           # fail before any diagnosis
    alarms = np.array([false_alarms(store, grid, **diagnose_options) for store in stores])
    return choose_phase_rel(alarms, grid, max_false_alarm)


def _grid(grid) -> np.ndarray:
    grid = np.sort(np.asarray(grid, dtype=float))
    if grid.size == 0 or not np.all(grid > 0):
        raise ValueError(f"grid must hold values > 0; got {grid.tolist()}")
    return grid


def _check_rate(max_false_alarm) -> None:
    if not 0 <= max_false_alarm < 1:
        raise ValueError(f"max_false_alarm must be in [0, 1); got {max_false_alarm!r}")


def false_alarms(store, grid=PHASE_REL_GRID, **diagnose_options) -> np.ndarray:
    """Whether diagnosis of one healthy run finds a root cause, at each ``phase_rel`` of
    ``grid`` (in increasing order): a boolean array, one entry per grid value."""
    if "phase_rel" in diagnose_options:
        raise TypeError("phase_rel is what is calibrated; do not pass it")
    return np.array([bool(diagnose(store, phase_rel=float(value), **diagnose_options).culprits)
                     for value in _grid(grid)])


def choose_phase_rel(alarms, grid=PHASE_REL_GRID,
                     max_false_alarm: float = 0.1) -> tuple[float, pd.DataFrame]:
    """The calibration's choice from per-run :func:`false_alarms` (``runs x grid``), as
    returned by :func:`calibrate_phase_rel`."""
    grid = _grid(grid)
    alarms = np.asarray(alarms, dtype=bool)
    if alarms.ndim != 2 or alarms.shape[1] != grid.size or alarms.shape[0] == 0:
        raise ValueError(f"alarms must be a (runs, {grid.size}) array; got shape "
                         f"{alarms.shape}")
    _check_rate(max_false_alarm)
    table = pd.DataFrame({"phase_rel": grid, "false_alarm_rate": alarms.mean(axis=0),
                          "runs": alarms.shape[0]})
    ok = table["false_alarm_rate"] <= max_false_alarm
    if not ok.any():
        warnings.warn(f"no phase_rel in the grid keeps false alarms <= {max_false_alarm:.0%} "
                      f"(lowest rate {table['false_alarm_rate'].min():.0%}); returning the "
                      f"largest", CausalkitWarning, stacklevel=2)
        return float(grid[-1]), table
    return float(table.loc[ok, "phase_rel"].iloc[0]), table
