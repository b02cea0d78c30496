"""The vClos allocation problem: an isolated virtual Clos of ``m`` leaves x ``s`` spines.

Given which leaf-spine links are already reserved (``x_ab = 1``) and the free GPUs ``f_a`` of each
leaf, choose leaves ``l_a`` and spines ``p_b`` (binaries) solving::

    minimise   sum_a f_a l_a                         (best fit: keep large holes free)
    s.t.       sum_a l_a = m,   sum_b p_b = s
               l_a = 0                 if f_a < s
               l_a + p_b <= 1          for every reserved link (a, b)

i.e. every chosen leaf reaches every chosen spine over a free link. This is the integer program of
the vClos scheduler (Zhao et al., Computer Networks 268, 2025, sec. 4; the group's simulator
linearises ``y_ab = l_a AND p_b`` with three inequalities, which is equivalent).
Three exact solvers:

``milp``       HiGHS branch and bound through :func:`scipy.optimize.milp`;
``enumerate``  every spine subset (vectorised); for a fixed subset the best leaves are the ``m``
               eligible ones with the fewest free GPUs, so this is exact in ``C(S, s)`` steps;
``brute``      every leaf subset x every spine subset (tiny instances only; the test oracle).

``auto`` uses ``enumerate`` when ``C(S, s) <= 20000`` and ``milp`` otherwise.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["SOLVERS", "solve_vclos"]

SOLVERS = ("auto", "milp", "enumerate", "brute")


def solve_vclos(link_free, free_gpus, m: int, s: int, solver: str = "auto",
                time_limit: float = 10.0):
    """Find a virtual Clos; return ``(leaves, spines, cost)`` or ``None`` if infeasible.

    Parameters
    ----------
    link_free : bool array of shape (L, S)
        ``True`` where the link between leaf ``a`` and spine ``b`` is not reserved.
    free_gpus : int array of shape (L,)
        Free GPUs per leaf.
    m, s : int
        Leaves and spines (= GPUs per leaf) of the virtual Clos.
    solver : {"auto", "milp", "enumerate", "brute"}
    time_limit : float
        Seconds allowed to ``milp``; a time-out without a solution counts as infeasible.
    """
    link_free = np.asarray(link_free, dtype=bool)
    free = np.asarray(free_gpus, dtype=np.int64)
    L, S = link_free.shape
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}; got {solver!r}")
    if not (1 <= m <= L and 1 <= s <= S):
        return None
    if np.count_nonzero(free >= s) < m:
        return None
    if solver == "auto":
        solver = "enumerate" if math.comb(S, s) <= 20000 else "milp"
    return {"milp": _milp, "enumerate": _enumerate, "brute": _brute}[solver](
        link_free, free, m, s, time_limit)


def _enumerate(link_free, free, m, s, _time_limit):
    L, S = link_free.shape
    subsets = np.array(list(itertools.combinations(range(S), s)), dtype=np.int64)
    mask = np.zeros((len(subsets), S))
    mask[np.arange(len(subsets))[:, None], subsets] = 1.0
    blocked = (~link_free).astype(float) @ mask.T                   # (L, K) reserved links
    eligible = (blocked == 0) & (free >= s)[:, None]
    enough = eligible.sum(axis=0) >= m
    if not enough.any():
        return None
    keyed = np.where(eligible, free[:, None], np.iinfo(np.int64).max // (L + 1))
    order = np.argsort(keyed, axis=0, kind="stable")[:m]            # best-fit leaves per subset
    cost = np.take_along_axis(keyed, order, axis=0).sum(axis=0)
    cost = np.where(enough, cost, np.iinfo(np.int64).max)
    k = int(np.argmin(cost))
    return np.sort(order[:, k]), subsets[k], int(cost[k])


def _brute(link_free, free, m, s, _time_limit):
    L, S = link_free.shape
    if math.comb(L, m) * math.comb(S, s) > 2_000_000:
        raise ValueError("brute-force vClos solver is for tiny instances (C(L,m)*C(S,s) <= 2e6)")
    best = None
    for spines in itertools.combinations(range(S), s):
        cols = link_free[:, spines].all(axis=1) & (free >= s)
        for leaves in itertools.combinations(np.flatnonzero(cols).tolist(), m):
            cost = int(free[list(leaves)].sum())
            if best is None or cost < best[2]:
                best = (np.array(leaves), np.array(spines), cost)
    return best


def _milp(link_free, free, m, s, time_limit):
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix, vstack

    L, S = link_free.shape
    n = L + S
    c = np.r_[free.astype(float), np.zeros(S)]
    upper = np.r_[(free >= s).astype(float), np.ones(S)]
    card = coo_matrix(np.r_[[np.r_[np.ones(L), np.zeros(S)]], [np.r_[np.zeros(L), np.ones(S)]]])
    a, b = np.nonzero(~link_free)
    rows = np.repeat(np.arange(len(a)), 2)
    cols = np.column_stack([a, L + b]).ravel()
    conflict = coo_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(a), n))
    A = vstack([card, conflict]).tocsr()
    lo = np.r_[m, s, np.full(len(a), -np.inf)]
    hi = np.r_[m, s, np.ones(len(a))]
    res = milp(c, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(n),
               bounds=Bounds(np.zeros(n), upper),
               options={"time_limit": float(time_limit), "presolve": True})
    if res.x is None or res.status not in (0, 1):
        return None
    x = np.round(res.x).astype(int)
    leaves, spines = np.flatnonzero(x[:L]), np.flatnonzero(x[L:])
    if len(leaves) != m or len(spines) != s:
        return None
    return leaves, spines, int(free[leaves].sum())
