"""Inverse-probability weights and efficient-influence-function scores for monotone drop-out.

With ``e_a(x) = P(A = a | x)``, ``r_t = prod_{s <= t} lambda_s`` and the outcome chain
``m_1, ..., m_T`` (``m_{T+1} = Y``), the uncentred efficient influence function of
``mu_a = E[Y(a)]`` under sequential missingness is (Robins, Rotnitzky & Zhao 1995, *JASA* 90(429);
Tsiatis 2006, ch. 9-10; Bang & Robins 2005)

    phi_a = m_1(X, a) + I(A = a) / e_a(X) * sum_{t=1}^{T} R_t / r_t(H_t) * (m_{t+1} - m_t).
"""

from __future__ import annotations

import numpy as np

from causalkit.longterm._data import MonotoneData
from causalkit.longterm._models import cumulative_scores

__all__ = ["inverse_weights", "aipw_scores"]


def inverse_weights(data: MonotoneData, e1: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``W[:, t] = 1 / (e_A(X) r_t(H_t))`` for the responders of stage ``t``; NaN elsewhere."""
    e_own = np.where(data.a == 1, e1, 1.0 - e1)
    r = cumulative_scores(lam)
    return np.where(data.R == 1, 1.0 / (e_own[:, None] * r), np.nan)


def aipw_scores(data: MonotoneData, e1: np.ndarray, lam: np.ndarray, chain) -> np.ndarray:
    """Uncentred scores ``(phi_0, phi_1)`` as an (n, 2) array (module docstring formula)."""
    T = data.n_stages
    r = cumulative_scores(lam)
    out = np.empty((data.n, 2))
    everyone = np.ones(data.n, dtype=bool)
    for arm in (0, 1):
        e_arm = e1 if arm == 1 else 1.0 - e1
        m_first = chain.predict(0, data, everyone, arm)
        correction = np.zeros(data.n)
        in_arm = data.a == arm
        m_now = m_first[in_arm]          # m_k on the at-risk units of this arm
        rows_now = in_arm                # at risk at stage k, in this arm
        for k in range(T):
            resp = rows_now & data.responders(k)
            keep = data.responders(k)[rows_now]
            m_next = (chain.predict(k + 1, data, resp, arm) if k < T - 1
                      else data.Z[resp, T - 1])
            correction[resp] += (m_next - m_now[keep]) / r[resp, k]
            rows_now, m_now = resp, m_next
        out[:, arm] = m_first + np.where(in_arm, correction / e_arm, 0.0)
    return out
