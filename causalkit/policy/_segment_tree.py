"""Compiled scan of the best child splits of every root split point of a depth-2 policy tree.

With the rows in the order of the root feature, the left child of the root split after row
:math:`i` holds rows :math:`0..i` and the right child the others, so a forward pass adds one row
at a time to the left child and a backward pass to the right one. The best split of a child on
one child feature has value :math:`\\max_{a, b}\\big(T_b + \\max_t [P_a(t) - P_b(t)]\\big)`
(:mod:`causalkit.policy.trees`). A segment tree over the child feature's sorted distinct values
(leaves: blocks of ``_BLOCK`` consecutive values) keeps, for every arm pair, the sum, the
maximum and the minimum prefix sum of :math:`\\Gamma_a-\\Gamma_b` and the row count where each
extreme is reached, so that adding a row costs :math:`O(K^2\\log n)`. The root of the segment
tree gives the best split in :math:`O(K^2)` unless the best of its extremes lies within
``min_samples_leaf`` rows of either end and no allowed extreme reaches it; then an exact range
query over the allowed split points, in :math:`O(K^2\\log n)`, is run unless the unrestricted
extreme (an upper bound) cannot beat the best child split already found on another feature.
Compiled with numba (cached on disk, so that a new process loads rather than recompiles it);
every kernel releases the GIL where it is called from threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["scan_children"]


#: Distinct values per leaf block of the segment tree (a speed constant: blocks are scanned
#: linearly, which keeps the tree small enough to stay in cache).
_BLOCK = 8

#: Each segment-tree node record is padded to a multiple of this many float64 values (a 64-byte
#: cache line), so that the two children of a node lie on adjacent lines.
_LINE = 8

# The child feature's distinct values ("groups", in sorted order) hold per-group records
# ``gs[g] = (rows, sum of Gamma_a - Gamma_b for each arm pair q = (a, b), a < b)``. Blocks of
# ``_BLOCK`` consecutive groups are the leaves of a segment tree ``T`` (block b: row ``size + b``;
# node v has children 2v and 2v + 1). A node record (one row of T) holds in column 0 the rows
# below the node and, for each pair q, five columns from 1 + 5q: the sum of Gamma_a - Gamma_b
# over the node's rows, the maximum prefix sum of Gamma_a - Gamma_b over the node's groups
# (prefix from its first group, inclusive), the rows up to that maximum, the minimum prefix sum
# and the rows up to it. The arm totals of all rows are kept outside the tree.


@njit(cache=True, error_model="numpy")
def _add(group, g, gs, pa, pb):
    """Add a row with rewards ``g`` to the record of ``group``."""
    gs[group, 0] += 1.0
    for q in range(pa.size):
        gs[group, 1 + q] += g[pa[q]] - g[pb[q]]


@njit(cache=True, error_model="numpy")
def _scan_block(blk, gs, T, size, P):
    """Recompute the leaf record of block ``blk`` from its groups."""
    leaf = size + blk
    T[leaf, :] = 0.0
    for q in range(P):
        T[leaf, 2 + 5 * q] = -np.inf
        T[leaf, 4 + 5 * q] = np.inf
    for h in range(blk * _BLOCK, (blk + 1) * _BLOCK):
        T[leaf, 0] += gs[h, 0]
        for q in range(P):
            c = 1 + 5 * q
            d = T[leaf, c] + gs[h, 1 + q]
            T[leaf, c] = d
            if d > T[leaf, c + 1]:
                T[leaf, c + 1], T[leaf, c + 2] = d, T[leaf, 0]
            if d < T[leaf, c + 3]:
                T[leaf, c + 3], T[leaf, c + 4] = d, T[leaf, 0]


@njit(cache=True, error_model="numpy")
def _merge(node, T, P):
    """Recompute the record of internal ``node`` from its two children."""
    L, R = 2 * node, 2 * node + 1
    T[node, 0] = T[L, 0] + T[R, 0]
    for q in range(P):
        c = 1 + 5 * q
        dl = T[L, c]
        T[node, c] = dl + T[R, c]
        lv, rv = T[L, c + 1], dl + T[R, c + 1]
        lr, rr = T[L, c + 2], T[L, 0] + T[R, c + 2]
        keep = lv >= rv
        T[node, c + 1] = lv if keep else rv
        T[node, c + 2] = lr if keep else rr
        lv, rv = T[L, c + 3], dl + T[R, c + 3]
        lr, rr = T[L, c + 4], T[L, 0] + T[R, c + 4]
        keep = lv <= rv
        T[node, c + 3] = lv if keep else rv
        T[node, c + 4] = lr if keep else rr


@njit(cache=True, error_model="numpy")
def _insert(group, g, gs, T, size, pa, pb):
    """Add a row with rewards ``g`` to ``group``, rescan its block and refresh the path to the
    root."""
    _add(group, g, gs, pa, pb)
    blk = group // _BLOCK
    _scan_block(blk, gs, T, size, pa.size)
    node = (size + blk) >> 1
    while node >= 1:
        _merge(node, T, pa.size)
        node >>= 1


@njit(cache=True, error_model="numpy")
def _rebuild(gs, T, size, P):
    """Recompute every record of the tree from the group records (the same values as the
    row-by-row inserts that led to them)."""
    for blk in range(size):
        _scan_block(blk, gs, T, size, P)
    for node in range(size - 1, 0, -1):
        _merge(node, T, P)


@njit(cache=True, error_model="numpy")
def _kth(gs, T, size, k):
    """Group holding the k-th present row (1-based) in sorted order."""
    node = 1
    while node < size:
        if T[2 * node, 0] >= k:
            node = 2 * node
        else:
            k -= T[2 * node, 0]
            node = 2 * node + 1
    g = (node - size) * _BLOCK
    while gs[g, 0] < k:
        k -= gs[g, 0]
        g += 1
    return g


@njit(cache=True, error_model="numpy")
def _absorb_group(gs, g, off, hi_mx, lo_mn):
    """Extend running prefix sums ``off`` and the extremes seen so far by group ``g``."""
    for q in range(off.size):
        off[q] += gs[g, 1 + q]
        hi_mx[q] = max(hi_mx[q], off[q])
        lo_mn[q] = min(lo_mn[q], off[q])


@njit(cache=True, error_model="numpy")
def _absorb(T, v, off, hi_mx, lo_mn):
    """Extend running prefix sums ``off`` and the extremes seen so far by node ``v``."""
    for q in range(off.size):
        c = 1 + 5 * q
        hi_mx[q] = max(hi_mx[q], off[q] + T[v, c + 1])
        lo_mn[q] = min(lo_mn[q], off[q] + T[v, c + 3])
        off[q] += T[v, c]


@njit(cache=True, error_model="numpy", inline="always")
def _allowed_prefix(rows, m, min_leaf):
    """Whether a split after the first ``rows`` of ``m`` rows leaves ``min_leaf`` rows on each
    side (or is no split: 0 or m rows)."""
    return not (0 < rows < m and (rows < min_leaf or rows > m - min_leaf))


@njit(cache=True, error_model="numpy")
def _stump_value(gs, T, size, tot, min_leaf, bar, pa, pb, off, hi_mx, lo_mn, stack):
    """Best depth-1 total reward of the rows in the tree (arm totals ``tot``; leaf or any
    allowed split), or any value not above ``bar`` when the best is not above ``bar``."""
    P = pa.size
    m = T[1, 0]
    best = tot.max()
    # The extreme prefix sums over all groups bound the best allowed split from above; one
    # that does not sit strictly inside the first or last ``min_leaf - 1`` rows is an allowed
    # split (a prefix over 0 or all m rows is a leaf value), and when the allowed ones reach
    # the bound they decide.
    direct, allowed = best, best
    for q in range(P):
        c = 1 + 5 * q
        high, low = tot[pb[q]] + T[1, c + 1], tot[pa[q]] - T[1, c + 3]
        direct = max(direct, high, low)
        if _allowed_prefix(T[1, c + 2], m, min_leaf):
            allowed = max(allowed, high)
        if _allowed_prefix(T[1, c + 4], m, min_leaf):
            allowed = max(allowed, low)
    if allowed >= direct or direct <= bar:
        return direct
    if m < 2 * min_leaf:
        return best
    lo = _kth(gs, T, size, min_leaf)
    hi = _kth(gs, T, size, m - min_leaf + 1) - 1
    if lo > hi:
        return best
    blo, bhi = lo // _BLOCK, hi // _BLOCK
    off[:] = 0.0  # sums of the groups before lo
    node, a, b = 1, 0, size
    while node < size:
        mid = (a + b) // 2
        if blo >= mid:
            for q in range(P):
                off[q] += T[2 * node, 1 + 5 * q]
            node, a = 2 * node + 1, mid
        else:
            node, b = 2 * node, mid
    for g in range(blo * _BLOCK, lo):
        for q in range(P):
            off[q] += gs[g, 1 + q]
    hi_mx[:] = -np.inf
    lo_mn[:] = np.inf
    for g in range(lo, min(hi + 1, (blo + 1) * _BLOCK)):
        _absorb_group(gs, g, off, hi_mx, lo_mn)
    if bhi > blo:
        ns = 0
        l, r = blo + 1 + size, bhi + size
        while l < r:  # canonical nodes of blocks blo+1 .. bhi-1, absorbed left to right
            if l & 1:
                _absorb(T, l, off, hi_mx, lo_mn)
                l += 1
            if r & 1:
                r -= 1
                stack[ns] = r
                ns += 1
            l >>= 1
            r >>= 1
        for t in range(ns - 1, -1, -1):
            _absorb(T, stack[t], off, hi_mx, lo_mn)
        for g in range(bhi * _BLOCK, hi + 1):
            _absorb_group(gs, g, off, hi_mx, lo_mn)
    for q in range(P):
        best = max(best, tot[pb[q]] + hi_mx[q], tot[pa[q]] - lo_mn[q])
    return best


@njit(cache=True, nogil=True, error_model="numpy")
def scan_children(group, n_groups, gamma, cut, min_leaf, pa, pb, need, left, right):
    """Raise ``left[i]`` / ``right[i]`` to the best depth-1 reward of the left / right child
    of root split point i (rows ``0..i`` of the root order on the left) over splits on the
    child features j with ``need[0, j, i]`` / ``need[1, j, i]``. ``gamma`` is in root order and
    ``group[j, i]`` is the rank of row i's value among the distinct values of child feature j
    (``n_groups[j]`` of them). Rows far (more than about ``2 size / log2(size)`` rows) from the
    next needed split point only update their group record; the tree is rebuilt before the next
    query, which costs about as much as that many row insertions."""
    n, K = gamma.shape
    P = pa.size
    width = -(-(1 + 5 * P) // _LINE) * _LINE
    tot, off, hi_mx, lo_mn = np.empty(K), np.empty(P), np.empty(P), np.empty(P)
    stack = np.empty(64, dtype=np.int64)
    queries = np.empty(n, dtype=np.int64)
    for j in range(group.shape[0]):
        size, levels = 1, 0
        while size * _BLOCK < n_groups[j]:
            size *= 2
            levels += 1
        max_gap = 2 * size // (levels + 1)
        for side in range(2):
            n_queries = 0
            for step in range(n):
                at = step if side == 0 else n - 2 - step
                if at >= 0 and cut[at] and need[side, j, at]:
                    queries[n_queries] = step
                    n_queries += 1
            if n_queries == 0:
                continue
            gs = np.zeros((size * _BLOCK, 1 + P))
            T = np.zeros((2 * size, width))
            tot[:] = 0.0
            stale, nxt = False, 0
            for step in range(queries[n_queries - 1] + 1):
                i = step if side == 0 else n - 1 - step
                if queries[nxt] - step > max_gap:
                    _add(group[j, i], gamma[i], gs, pa, pb)
                    stale = True
                elif stale:
                    _add(group[j, i], gamma[i], gs, pa, pb)
                    _rebuild(gs, T, size, P)
                    stale = False
                else:
                    _insert(group[j, i], gamma[i], gs, T, size, pa, pb)
                for k in range(K):
                    tot[k] += gamma[i, k]
                if step < queries[nxt]:
                    continue
                nxt += 1
                if side == 0:
                    left[i] = max(left[i], _stump_value(gs, T, size, tot, min_leaf, left[i], pa, pb,
                                                        off, hi_mx, lo_mn, stack))
                else:
                    right[i - 1] = max(right[i - 1], _stump_value(gs, T, size, tot, min_leaf,
                                                                  right[i - 1], pa, pb, off,
                                                                  hi_mx, lo_mn, stack))
