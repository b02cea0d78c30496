"""Long-term treatment effects when outcomes drop out monotonely over stages.

Data: covariates ``X``, the long-term outcome ``y`` (NaN when missing), binary ``treatment`` and
the short-term outcomes ``short`` (n, T-1; NaN after drop-out). Estimators (the estimator core of
:mod:`causalkit`: ``fit(X, y, treatment, *, short=None, observed=None, covariates=None)`` with
arrays, or ``fit(df, y="y", treatment="treat", short=["s1", "s2"])`` on a DataFrame;
``estimate(inference="influence" | "bootstrap")``, ``effect(X)``):

* :class:`SequentialIPW` - propensity x stage-wise continuation weights;
* :class:`SequentialRegression` - backward nested regression imputation;
* :class:`SeqMSM` - stage-wise weighted regressions (marginal structural model);
* :class:`MonotoneAIPW` - cross-fitted doubly robust estimator with influence-function SE;
* :class:`SequentialTMLE` - longitudinal TMLE (targeted sequential regression, doubly robust);
* :class:`BalanceNet` - balanced-representation networks (torch, imported lazily);
* baselines :class:`CompleteCase`, :class:`NaiveIPW`.

Identification: strong ignorability of treatment and sequential missingness,
``R_t independent of (Z_t, ..., Z_T) given H_t, R_{t-1} = 1`` (Yang, Guo, Han & Wu 2025,
arXiv:2504.19527; Robins, Rotnitzky & Zhao 1995).
"""

from causalkit.longterm._data import MonotoneData, check_monotone_data
from causalkit.longterm.aipw import MonotoneAIPW
from causalkit.longterm.balancing import BalancingLogit
from causalkit.longterm.baselines import CompleteCase, NaiveIPW
from causalkit.longterm.dgp import LinearGaussianDesign
from causalkit.longterm.ipw import SequentialIPW
from causalkit.longterm.msm import SeqMSM
from causalkit.longterm.regression import SequentialRegression
from causalkit.longterm.tmle import SequentialTMLE

__all__ = ["SequentialIPW", "SequentialRegression", "SeqMSM", "MonotoneAIPW", "SequentialTMLE",
           "BalanceNet", "BalancingLogit",
           "CompleteCase", "NaiveIPW", "LinearGaussianDesign", "MonotoneData",
           "check_monotone_data", "ESTIMATORS"]

#: The estimators of this package by short name (used by the CLI). BalanceNet is left out: it
#: needs torch, which this package imports only on first use of ``BalanceNet``.
ESTIMATORS = {
    "ipw": SequentialIPW,
    "regression": SequentialRegression,
    "msm": SeqMSM,
    "aipw": MonotoneAIPW,
    "tmle": SequentialTMLE,
    "complete-case": CompleteCase,
    "naive-ipw": NaiveIPW,
}


def __getattr__(name):
    if name == "BalanceNet":
        from causalkit.longterm.balancenet import BalanceNet
        return BalanceNet
    raise AttributeError(f"module 'causalkit.longterm' has no attribute {name!r}")
