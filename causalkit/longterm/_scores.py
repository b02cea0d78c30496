"""Inverse-probability weights and efficient-influence-function scores for monotone drop-out.

With ``e_a(x) = P(A = a | x)``, ``r_t = prod_{s <= t} lambda_s`` and the outcome chain
``m_1, ..., m_T`` (``m_{T+1} = Y``), the uncentred efficient influence function of
``mu_a = E[Y(a)]`` under sequential missingness is (Robins, Rotnitzky & Zhao 1995, *JASA* 90(429);
Tsiatis 2006, ch. 9-10; Bang & Robins 2005)

    phi_a = m_1(X, a) + sum_{t=1}^{T} W_{at} D_{at},
    W_{at} = I(A = a) R_t / (e_a(X) r_t(H_t)),   D_{at} = m_{t+1}(H_{t+1}, a) - m_t(H_t, a).

The normalised (ratio) form replaces each stage's weighted mean residual by its Hajek version,

    phi_a = m_1(X, a) + sum_t [ b_{at} + W_{at} (D_{at} - b_{at}) / mean(W_{at}) ],
    b_{at} = sum_i W_{ati} D_{ati} / sum_i W_{ati},

whose mean is ``mean(m_1) + sum_t b_{at}``. Each ``W_{at}`` has mean one in the population, so
the two forms share the influence function and the double robustness; the ratio form removes
the first-order effect of a systematic error in the level of the estimated weights (e.g. the
upward bias of out-of-fold inverse probabilities, Jensen's inequality), which the plain form
multiplies by the mean residual when the outcome chain is wrong (Robins, Sued, Lei-Gomez &
Rotnitzky 2007, *Statist. Sci.* 22(4), sec. 4; Kang & Schafer 2007).
"""

from __future__ import annotations

import warnings

import numpy as np

from causalkit.exceptions import ClippingWarning
from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import cumulative_scores
from causalkit.longterm._sandwich import (
    chain_estimation_term,
    chain_leverage,
    loo_residual,
    stage_designs,
)
from causalkit.nuisance import fit_clone

__all__ = ["inverse_weights", "count_capped", "warn_capped", "aipw_components", "combine_aipw",
           "hajek_scale", "substitution_variance", "with_chain_term",
           "least_squares_chain_variance", "check_variance", "check_weight_cap", "VARIANCES"]

#: Estimators of the variance of the efficient influence function (see
#: :func:`substitution_variance`).
VARIANCES = ("substitution", "empirical")


def inverse_weights(data: MonotoneData, e1: np.ndarray, lam: np.ndarray,
                    cap: float = np.inf) -> np.ndarray:
    """``W[:, t] = min(1 / (e_A(X) r_t(H_t)), cap)`` for the responders of stage ``t``; NaN
    elsewhere. ``cap`` bounds the cumulative weight (``ltmle``'s ``gbounds`` on the cumulative
    probability ``e_A r_t``, whose default lower bound 0.01 is a cap of 100)."""
    e_own = np.where(data.a == 1, e1, 1.0 - e1)
    r = cumulative_scores(lam)
    return np.where(data.R == 1, np.minimum(1.0 / (e_own[:, None] * r), cap), np.nan)


def check_weight_cap(cap) -> float:
    """``cap`` as a float, which must be positive (``numpy.inf``: no cap)."""
    try:
        value = float(cap)
    except (TypeError, ValueError):
        raise ValueError(f"weight_cap must be a positive number; got {cap!r}") from None
    if not value > 0:
        raise ValueError(f"weight_cap must be positive; got {cap!r}")
    return value


def count_capped(weights: np.ndarray, cap: float) -> np.ndarray:
    """Per stage, the responders whose uncapped cumulative weight (``weights``, (n, T), from
    :func:`inverse_weights`; NaN for non-responders) exceeds ``cap``."""
    with np.errstate(invalid="ignore"):
        return np.sum(weights > cap, axis=0)


def warn_capped(label: str, counts: np.ndarray, cap: float) -> None:
    """``ClippingWarning`` when any cumulative weight was capped (``counts`` per stage)."""
    if counts.any():
        warnings.warn(f"{label}: {int(counts.sum())} cumulative weight(s) capped at {cap:g} "
                      f"(per stage: {counts.tolist()})", ClippingWarning, stacklevel=5)


def aipw_components(data: MonotoneData, e1: np.ndarray, lam: np.ndarray, chain,
                    cap: float = np.inf):
    """``(m_first, W, D)`` of the module docstring: ``m_first`` (n, 2) holds ``m_1(X, a)``,
    ``W`` and ``D`` (n, T, 2) the stage weights ``W_{at}`` (capped at ``cap``) and residuals
    ``D_{at}`` (zero where a unit is not a stage-``t`` responder of arm ``a``)."""
    T = data.n_stages
    W_all = inverse_weights(data, e1, lam, cap)
    m_first = np.empty((data.n, 2))
    W = np.zeros((data.n, T, 2))
    D = np.zeros((data.n, T, 2))
    everyone = np.ones(data.n, dtype=bool)
    for arm in (0, 1):
        m_first[:, arm] = chain.predict(0, data, everyone, arm)
        rows_now = data.a == arm         # at risk at stage k, in this arm
        m_now = m_first[rows_now, arm]   # m_k on those units
        for k in range(T):
            resp = rows_now & data.responders(k)
            keep = data.responders(k)[rows_now]
            m_next = (chain.predict(k + 1, data, resp, arm) if k < T - 1
                      else data.Z[resp, T - 1])
            W[resp, k, arm] = W_all[resp, k]
            D[resp, k, arm] = m_next - m_now[keep]
            rows_now, m_now = resp, m_next
    return m_first, W, D


def combine_aipw(m_first: np.ndarray, W: np.ndarray, D: np.ndarray,
                 normalize: bool = False) -> np.ndarray:
    """Uncentred scores ``(phi_0, phi_1)`` (n, 2) from :func:`aipw_components`, in the plain or
    the normalised form (module docstring)."""
    if not normalize:
        return m_first + np.sum(W * D, axis=1)
    total = _stage_totals(W)
    b = np.sum(W * D, axis=0) / total
    scale = total / W.shape[0]
    return m_first + np.sum(b + W * (D - b) / scale, axis=1)


def _stage_totals(W: np.ndarray) -> np.ndarray:
    """(T, 2) sum of each stage's and arm's weights ``W`` (n, T, 2); 1 where it is 0."""
    total = W.sum(axis=0)
    return np.where(total > 0, total, 1.0)


def hajek_scale(W: np.ndarray) -> np.ndarray:
    """(T, 2) mean of each stage's and arm's weights ``W`` (n, T, 2) over all units (1 / n
    where the stage has no responders): the ratio form divides the weights by it."""
    return _stage_totals(W) / W.shape[0]


def check_variance(variance) -> str:
    if variance not in VARIANCES:
        raise ValueError(f"variance must be one of {VARIANCES}; got {variance!r}")
    return variance


def _squared_residual_model():
    """Poisson (log-link) regression on standardised columns: a positive mean for the squared
    residuals, consistent for their conditional mean when it is log-linear (quasi-likelihood)."""
    from sklearn.linear_model import PoissonRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    return make_pipeline(StandardScaler(), PoissonRegressor(alpha=1e-4, max_iter=300))


def second_moment(history: np.ndarray, residual: np.ndarray, at: np.ndarray,
                  leverage: np.ndarray | None = None) -> np.ndarray:
    """``E[D^2 | H]`` at the histories ``at``, fitted on ``(history, residual)``, as
    ``mu(H)^2 + v(H)``: ``mu`` the least-squares fit of ``D`` on the standardised ``H`` and
    ``v`` a Poisson (log-link) regression of the squared centred residuals ``(D - mu(H))^2`` on
    ``H``. With ``leverage`` (each unit's ``h`` in the least-squares chain that left ``D``), the
    centred residuals are replaced by their leave-one-out form ``(D - mu(H)) / (1 - h)`` before
    they are squared (the HC3 term; :func:`substitution_variance`).

    With the outcome chain right, ``D`` has conditional mean 0 and ``mu`` is close to 0 (exactly
    0 for in-sample least-squares residuals on the same columns, so that ``v`` is then the
    log-linear model of the HC3 squares alone). With a wrong chain, ``D`` carries the chain's
    error: for a constant chain and a linear truth ``E[D^2 | H]`` is quadratic in ``H``,
    largest in the tails where the heavy weights sit, and a log-linear model of ``D^2`` alone
    misses most of it (see :func:`substitution_variance`)."""
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    # standardised columns: the fit does not depend on the covariates' units to rounding
    mean = make_pipeline(StandardScaler(), LinearRegression()).fit(history, residual)
    centred = residual - mean.predict(history)
    if leverage is not None:
        centred = loo_residual(centred, leverage)
    squared = centred ** 2
    out = mean.predict(at) ** 2
    level = squared.mean()
    if level > 0:                       # fitted on the unit scale: the penalty is then free of
        out += level * fit_clone(       # the outcome's units
            _squared_residual_model(), history, squared / level).predict(at)
    return out


def substitution_variance(data: MonotoneData, e1: np.ndarray, lam: np.ndarray,
                          m_first: np.ndarray, D: np.ndarray,
                          leverage: np.ndarray | None = None) -> float:
    """Substitution estimate of ``Var(phi_1 - phi_0)`` (the module's efficient influence
    function) that averages the stage terms over the units at risk rather than the responders.

    The terms of ``phi_a`` are orthogonal (martingale differences), so

    .. math::

        \\operatorname{Var}(\\varphi_1 - \\varphi_0)
          = \\operatorname{Var}\\{m_1(X, 1) - m_1(X, 0)\\}
          + \\sum_{a, t} E\\Big[\\frac{I(A = a) R_{t-1}}
                 {e_a(X)^2 r_{t-1}(H_{t-1})^2 \\lambda_t(H_t)}\\,
                 \\sigma^2_{at}(H_t)\\Big],
        \\qquad \\sigma^2_{at}(H_t) = E[D_{at}^2 \\mid H_t, R_t = 1, A = a],

    using ``E[R_t / lambda_t^2 | H_t, R_{t-1} = 1] = 1 / lambda_t``. The empirical variance of
    ``phi`` sees a unit with a small ``lambda_t`` only when it responds (rarely) and then with
    weight ``1 / lambda_t^2``, so under heavy drop-out it is usually too small; here every unit
    at risk contributes ``sigma^2 / lambda_t``, whether or not it responded, which is the idea
    of the substitution variance estimators of Tran, Petersen, Schwab & van der Laan ("Robust
    variance estimation and inference for causal effect estimation", arXiv:1810.03030; the
    ``variance.method = "tmle"`` of ``ltmle``), here in a simpler plug-in form (one stage
    integrated at a time). ``sigma^2_at`` is fitted among the arm's stage-``t`` responders by
    :func:`second_moment`: the square of a least-squares fit of ``D_at`` on ``H_t`` plus a
    Poisson (log-link) regression of the squared centred residuals; ``e1`` and ``lam`` are
    clipped as in the estimator. When the residuals are in-sample least-squares residuals,
    ``leverage`` (n, T, 2) holds each unit's leverage ``h`` in its stage regression
    (:func:`~causalkit.longterm._sandwich.chain_leverage`) and the centred residual
    ``D - mu(H)`` is replaced by its leave-one-out form ``(D - mu(H)) / (1 - h)`` before the
    spread is modelled (the HC3 term; MacKinnon & White 1985, *J. Econometrics* 29(3); Long &
    Ervin 2000, *Amer. Statist.* 54(3), recommend it for small samples).

    Why the residuals' mean is modelled. With the outcome chain right, ``D_at`` has conditional
    mean 0 and ``sigma^2_at`` is its conditional variance. With a wrong chain it also carries
    the chain's error, ``E[D^2 | H] = mu(H)^2 + Var(D | H)``; for a constant chain and a linear
    truth ``mu`` is linear, so ``sigma^2_at`` is quadratic in ``H`` and largest in the tails of
    the history, where the heavy weights sit. A log-linear model of ``D^2`` alone misses that
    (:func:`second_moment` fits ``mu`` by least squares on the raw residuals and the spread
    log-linearly on the centred ones; with the right in-sample least-squares chain the raw
    residuals are orthogonal to ``H``, ``mu`` is 0 to rounding, and the variance is the
    log-linear model of the HC3 squares alone). The variance of
    ``phi`` at the wrong chain is then an upper bound for the estimator's: estimating correctly
    specified weight models by maximum likelihood subtracts the projection of ``phi`` on their
    scores (Robins, Rotnitzky & Zhao 1994, *JASA* 89(427); Tsiatis 2006, ch. 9). Checked on
    draws no study uses (``simulations/longterm_dr_by_n.py``, seeds ``[712000, rate, n, r]``,
    the linear design at 30% and 40% drop-out per stage, n = 1000, 4000 and 16,000, 400 draws
    each, a constant chain): the coverage of :class:`~causalkit.longterm.MonotoneAIPW`'s and
    :class:`~causalkit.longterm.SequentialTMLE`'s default intervals is 0.95-0.97 in all 12
    cells, where the log-linear model of ``D^2`` alone gave 0.725-0.8775 (that check's results
    at commit c44f9bb); with the right chain they are 0.9425-0.9825, and without the chain term
    (below) MonotoneAIPW's standard errors equal those of the log-linear model alone. The order
    of the mean fit and the HC3 correction matters when there are many history columns and few
    responders: a mean fitted to the HC3 residuals, which are not orthogonal to ``H``, takes up
    some of their spread. In
    ``causalkit simulate longterm-ihdp`` (25 covariates, 139 treated) that order lowered
    MonotoneAIPW's mean SE with the right chain from 0.2496 to 0.2452 at 15% drop-out per stage
    and from 0.4667 to 0.4519 at 30% (that study's results at commit d09b0d8); in this order it
    is 0.2496 and 0.4667, with coverage 0.92 and 0.985 (at commit 69d1a5c; the estimators now
    add the chain term below, which brings the study's mean SE to 0.2721 and 0.4920 and the
    coverage to 0.945 and 0.985).

    Why HC3 and not HC2, which the least-squares sandwich of
    :mod:`causalkit.longterm._sandwich` uses. An in-sample residual's variance is
    ``sigma^2 (1 - h)``, so ``D^2 / (1 - h)`` (HC2) is unbiased for ``sigma^2`` under
    homoskedasticity; but this variance is that of the efficient influence function, which
    leaves out the finite-sample variance from estimating the propensity and continuation
    models in sample, and that part grows with the same ratio of covariates to units as the
    leverage. HC3's larger correction, ``sigma^2 / (1 - h)`` on average, is a
    jackknife-style allowance for it. Chosen on draws no study uses (seeds
    ``[700000, r]``, the studies' designs; MonotoneAIPW's median SE / SD and coverage with HC2
    against HC3): IHDP (139 treated, 25 covariates), 400 replications, 15% drop-out per stage
    0.87 / 0.892 against 1.02 / 0.940, 30% 0.93 / 0.948 against 1.15 / 0.970; linear design
    (n = 1000, 5 covariates), 200 replications, 40% 0.93 / 0.940 against 0.98 / 0.950, 10%
    1.04 / 0.960 against 1.05 / 0.960 (leverages there are small, so the two barely differ;
    these SEs are this variance alone, before the chain term below was added).

    What it leaves out. This is the variance of the efficient influence function at the fitted
    nuisances. When the weights are wrong and the chain right, estimating the chain adds a
    first-order term; for an in-sample least-squares chain :class:`~causalkit.longterm.MonotoneAIPW`
    and :class:`~causalkit.longterm.SequentialTMLE` add it
    (:func:`least_squares_chain_variance`).
    """
    n = data.n
    variance = float(np.var(m_first[:, 1] - m_first[:, 0]))
    log_lam = np.log(np.where(np.isnan(lam), 1.0, lam))
    for arm in (0, 1):
        e_arm = e1 if arm == 1 else 1.0 - e1
        for k in range(data.n_stages):
            responders = data.responders(k) & (data.a == arm)
            at_risk = data.at_risk(k) & (data.a == arm)
            residual = D[responders, k, arm]
            if not responders.any() or not residual.any():
                continue
            sigma2 = second_moment(data.history(k, responders), residual,
                                   data.history(k, at_risk),
                                   None if leverage is None else leverage[responders, k, arm])
            r_before = np.exp(log_lam[at_risk, :k].sum(axis=1))
            variance += float(np.sum(sigma2 / (e_arm[at_risk] ** 2 * r_before ** 2
                                               * lam[at_risk, k]))) / n
    return variance


def with_chain_term(variance: float, influence: np.ndarray, term: np.ndarray) -> float:
    """``variance`` (of the influence function ``influence``, e.g. from
    :func:`substitution_variance`) plus what the chain-estimation term ``term``
    (:func:`~causalkit.longterm._sandwich.chain_estimation_term`) adds to the sample variance,
    ``max(0, Var(phi + term) - Var(phi))``.

    The difference, not ``Var(phi + term)`` itself, keeps the substitution estimate of the
    efficient part, which the sample variance of ``phi`` understates under heavy drop-out. It is
    floored at 0: with right weights the term's limit is 0 and a negative difference is noise;
    where wrong weights would make it lower the variance, the floor errs on the long side."""
    added = np.var(influence + term) - np.var(influence)
    return float(variance + max(0.0, added))


def least_squares_chain_variance(data: MonotoneData, e1: np.ndarray, lam: np.ndarray,
                                 m_first: np.ndarray, D: np.ndarray, W: np.ndarray,
                                 influence: np.ndarray, chain, mode: str) -> float:
    """The default variance for an in-sample least-squares outcome ``chain``: the
    :func:`substitution_variance` with the chain's leverages (the HC3 term) plus, by
    :func:`with_chain_term`, the chain's estimation term
    (:func:`~causalkit.longterm._sandwich.chain_estimation_term`, stage weights ``W`` as used in
    the scores and ``mode`` the chain's variant); the stage designs are fitted once for both."""
    designs = stage_designs(data, chain)
    variance = substitution_variance(data, e1, lam, m_first, D,
                                     chain_leverage(data, chain, designs))
    return with_chain_term(variance, influence,
                           chain_estimation_term(data, chain, mode, W, designs=designs))
