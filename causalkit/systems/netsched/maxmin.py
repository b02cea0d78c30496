"""Weighted max-min fair rate allocation by progressive filling (numpy + scipy.sparse).

An *entity* is a flow, or a whole job whose flows advance in lock-step (a collective step ends with
its slowest flow). Entity ``e`` sending at rate ``r_e`` loads link ``l`` with ``W[l, e] * r_e``;
the rates must satisfy ``W r <= c``. Progressive filling raises every unfrozen rate at the same
speed; when a link saturates, every entity crossing it is frozen::

    repeat:  delta = min_l residual_l / sum_{e active} W[l, e]      (and the caps, if any)
             r_active += delta;  residual -= delta * W r_active-part
             freeze entities that cross a saturated link
    until no entity is active

For 0/1 weights this is the classic max-min fair allocation (Bertsekas & Gallager, *Data
Networks*, 2nd ed., sec. 6.5.2); it ends after at most ``#links`` rounds of ``O(nnz)`` work.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["max_min_rates", "incidence"]


def incidence(links, entity, n_links: int, n_entities: int, weight=None) -> sp.csr_matrix:
    """Sparse link-by-entity load matrix from per-flow link lists.

    Parameters
    ----------
    links : array of shape (n_flows, hops)
        Link ids of every flow (``-1`` pads unused hops).
    entity : array of shape (n_flows,)
        Entity (flow or job) each flow belongs to.
    n_links, n_entities : int
        Matrix shape.
    weight : array of shape (n_flows,), optional
        Load a flow puts on its links per unit of entity rate (default 1).
    """
    links = np.asarray(links, dtype=np.int64)
    if links.ndim == 1:
        links = links[:, None]
    entity = np.asarray(entity, dtype=np.int64)
    w = np.ones(len(entity)) if weight is None else np.asarray(weight, dtype=float)
    rows = links.ravel()
    cols = np.repeat(entity, links.shape[1])
    vals = np.repeat(w, links.shape[1])
    keep = rows >= 0
    return sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(n_links, n_entities))


def max_min_rates(W, capacity, caps=None, *, rtol: float = 1e-12) -> tuple[np.ndarray, int]:
    """Max-min fair rates for the entities of load matrix ``W``.

    Parameters
    ----------
    W : scipy.sparse matrix of shape (n_links, n_entities)
        Non-negative load per unit rate (see :func:`incidence`).
    capacity : array of shape (n_links,)
        Link capacities.
    caps : array of shape (n_entities,), optional
        Upper bounds on the rates (``inf`` = none). Entities crossing no link get their cap (or
        ``inf``).
    rtol : float
        Relative tolerance used to decide which links are saturated.

    Returns
    -------
    rates : ndarray of shape (n_entities,)
    rounds : int
        Number of filling rounds (bottleneck levels).
    """
    W = sp.csr_matrix(W, dtype=float)
    n_links, n_ent = W.shape
    capacity = np.asarray(capacity, dtype=float)
    if capacity.shape != (n_links,):
        raise ValueError(f"capacity must have shape ({n_links},); got {capacity.shape}")
    if W.nnz and W.data.min() < 0:
        raise ValueError("W must be non-negative")
    cap = np.full(n_ent, np.inf) if caps is None else np.asarray(caps, dtype=float)
    WT = W.T.tocsr()
    rates = np.zeros(n_ent)
    residual = capacity.copy()
    active = np.asarray(WT.sum(axis=1)).ravel() > 0
    idle = ~active
    rates[idle] = cap[idle]
    rounds = 0
    while active.any():
        rounds += 1
        load = W @ active.astype(float)
        used = load > 0
        inc = np.full(n_links, np.inf)
        inc[used] = np.maximum(residual[used], 0.0) / load[used]
        delta = inc.min()
        cap_gap = cap[active] - rates[active]
        delta = min(delta, cap_gap.min())
        rates[active] += delta
        residual -= delta * load
        saturated = used & (inc <= delta * (1 + rtol) + 1e-15)
        frozen = (WT @ saturated.astype(float)) > 0
        frozen |= rates >= cap * (1 - rtol)
        active &= ~frozen
    return rates, rounds
