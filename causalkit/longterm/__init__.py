"""Long-term treatment effects when outcomes drop out monotonely over stages.

Data: covariates ``X``, binary ``treatment``, short-term outcomes ``short`` (n, T-1; NaN after
drop-out) and the long-term ``outcome`` (NaN when missing). Estimators (sklearn protocol;
``fit(X, treatment, short, outcome, observed=None)``, ``estimate()``, ``effect(X)``):

* :class:`SequentialIPW` - propensity x stage-wise continuation weights;
* :class:`SequentialRegression` - backward nested regression imputation;
* :class:`SeqMSM` - stage-wise weighted regressions (marginal structural model);
* :class:`MonotoneAIPW` - cross-fitted doubly robust estimator with influence-function SE;
* :class:`BalanceNet` - balanced-representation networks (torch, imported lazily);
* baselines :class:`CompleteCase`, :class:`NaiveIPW`.

Identification: strong ignorability of treatment and sequential missingness,
``R_t independent of (Z_t, ..., Z_T) given H_t, R_{t-1} = 1`` (Yang, Guo, Han & Wu 2025,
arXiv:2504.19527; Robins, Rotnitzky & Zhao 1995).
"""

from causalkit.longterm._data import MonotoneData, check_monotone_data
from causalkit.longterm.aipw import MonotoneAIPW
from causalkit.longterm.baselines import CompleteCase, NaiveIPW
from causalkit.longterm.dgp import LinearGaussianDesign
from causalkit.longterm.ipw import SequentialIPW
from causalkit.longterm.msm import SeqMSM
from causalkit.longterm.regression import SequentialRegression

__all__ = ["SequentialIPW", "SequentialRegression", "SeqMSM", "MonotoneAIPW", "BalanceNet",
           "CompleteCase", "NaiveIPW", "LinearGaussianDesign", "MonotoneData",
           "check_monotone_data"]


def __getattr__(name):
    if name == "BalanceNet":
        from causalkit.longterm.balancenet import BalanceNet
        return BalanceNet
    raise AttributeError(f"module 'causalkit.longterm' has no attribute {name!r}")
