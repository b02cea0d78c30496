"""Baselines that mishandle drop-out: complete-case analysis and (X, A)-only weighting."""

from __future__ import annotations

from causalkit.longterm._data import MonotoneData
from causalkit.longterm.aipw import MonotoneAIPW
from causalkit.longterm.ipw import SequentialIPW

__all__ = ["CompleteCase", "NaiveIPW"]


class CompleteCase(MonotoneAIPW):
    """Complete-case analysis: cross-fitted AIPW on the units whose outcome is observed.

    Drops every unit with ``R_T = 0`` and ignores the short-term outcomes, then estimates
    :math:`E[Y(1) - Y(0)]` among the complete cases with the usual AIPW score
    :math:`m(X, a) + I(A = a)(Y - m(X, a))/e_a(X)` (Robins, Rotnitzky & Zhao 1994). It is
    unbiased for the population ATE only when drop-out is unrelated to the potential outcomes
    given nothing (MCAR) or, more generally, when complete cases and the population share the
    same conditional effects and covariate law; drop-out driven by short-term outcomes biases it.
    Parameters are those of :class:`MonotoneAIPW` (``selection_model`` is unused).
    """

    _label = "Complete case"

    def _fit(self, data: MonotoneData):
        complete = data.R[:, -1] == 1
        sub = MonotoneData(data.X[complete], data.a[complete], data.Z[complete, -1:],
                           data.R[complete, -1:], data.feature_names,
                           None if data.units is None else data.units[complete])
        super()._fit(sub)


class NaiveIPW(SequentialIPW):
    """IPW with drop-out modelled on ``(X, A)`` only.

    :math:`\\hat\\mu_a = n^{-1}\\sum_i I(A_i = a) R_{Ti} Y_i /
    \\{\\hat e_a(X_i)\\hat\\pi(X_i, A_i)\\}`
    with :math:`\\pi(x, a) = P(R_T = 1 | X = x, A = a)` fitted on all units: the missing-at-random
    assumption relative to the always-observed variables. It ignores the short-term outcomes, so
    it is biased when they drive drop-out. Parameters are those of :class:`SequentialIPW`.
    """

    _label = "Naive IPW"

    def _stage_data(self, data: MonotoneData) -> MonotoneData:
        return MonotoneData(data.X, data.a, data.Z[:, -1:], data.R[:, -1:], data.feature_names,
                            data.units)
