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

import numpy as np

from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import cumulative_scores

__all__ = ["inverse_weights", "aipw_components", "combine_aipw", "aipw_scores"]


def inverse_weights(data: MonotoneData, e1: np.ndarray, lam: np.ndarray,
                    cap: float = np.inf) -> np.ndarray:
    """``W[:, t] = min(1 / (e_A(X) r_t(H_t)), cap)`` for the responders of stage ``t``; NaN
    elsewhere. ``cap`` bounds the cumulative weight (``ltmle``'s ``gbounds`` on the cumulative
    probability ``e_A r_t``, whose default lower bound 0.01 is a cap of 100)."""
    e_own = np.where(data.a == 1, e1, 1.0 - e1)
    r = cumulative_scores(lam)
    return np.where(data.R == 1, np.minimum(1.0 / (e_own[:, None] * r), cap), np.nan)


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
    total = W.sum(axis=0)                                       # (T, 2)
    safe = np.where(total > 0, total, 1.0)
    b = np.sum(W * D, axis=0) / safe
    scale = safe / W.shape[0]
    return m_first + np.sum(b + W * (D - b) / scale, axis=1)


def aipw_scores(data: MonotoneData, e1: np.ndarray, lam: np.ndarray, chain,
                cap: float = np.inf) -> np.ndarray:
    """Uncentred scores ``(phi_0, phi_1)`` (n, 2) in the plain form (module docstring), with
    the weights capped at ``cap``."""
    return combine_aipw(*aipw_components(data, e1, lam, chain, cap))
