"""Cross-leaf traffic of one training job's collective (flow-level model).

A job's GPUs are grouped by leaf (leaf-major rank order). NCCL-style, the collective runs one
*channel* per NIC: channel ``c`` enters and leaves leaf ``i`` on its GPU ``c mod n_i`` (``n_i`` GPUs
of the job on that leaf), so in a balanced placement every NIC carries exactly one channel and
cross-leaf flows connect equal local indices (rail-aligned). Intra-leaf hops are not network
bottlenecks in this model (NVLink / a non-blocking leaf switch).

Every pattern returns flows with *weights* normalised so that, in a balanced placement, each NIC's
weights sum to 1: the job's communication then takes ``B / r`` seconds when its flows progress at
rate ``r`` and ``B / C_link`` alone at line rate. Patterns:

``ring``
    ring all-reduce over the leaves on every channel: flow leaf ``i`` -> leaf ``i+1`` (mod m),
    weight 1 (Patarasuk & Yuan, 2009; 2(N-1) steps of M/N bytes on the same flow set).
``alltoall``
    rail all-to-all: on every channel each leaf sends to every other leaf, weight 1/(m-1).
``halving_doubling``
    recursive halving-doubling over ``N`` ranks (``N`` must be a power of two): step ``k`` pairs
    rank ``r`` with ``r XOR 2^k`` and moves a ``2^-(k+1)`` share of the data (Thakur et al., 2005);
    the steps are time-averaged into one flow set (fluid approximation).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PATTERNS", "check_pattern", "job_flows"]

PATTERNS = ("ring", "alltoall", "halving_doubling")


def check_pattern(pattern, n_gpus: int, job_id=None) -> str:
    """Validate a pattern name against a job size; raise ValueError naming the job."""
    who = "" if job_id is None else f"job {job_id}: "
    if pattern not in PATTERNS:
        raise ValueError(f"{who}pattern must be one of {PATTERNS}; got {pattern!r}")
    if pattern == "halving_doubling" and (n_gpus & (n_gpus - 1)) != 0:
        raise ValueError(
            f"{who}pattern 'halving_doubling' needs a power-of-two number of GPUs; got {n_gpus}"
        )
    return pattern


def _leaf_groups(cluster, gpus):
    gpus = np.sort(np.asarray(gpus, dtype=np.int64))
    leaf = cluster.leaf_of(gpus)
    starts = np.flatnonzero(np.r_[True, leaf[1:] != leaf[:-1]])
    return gpus, np.split(gpus, starts[1:])


def job_flows(cluster, gpus, pattern: str = "ring"):
    """Cross-leaf flows of a job placed on ``gpus``.

    Returns
    -------
    src, dst, channel : int arrays
    weight : float array
        Load per unit of the job's rate (see module docstring).
    """
    gpus, groups = _leaf_groups(cluster, gpus)
    check_pattern(pattern, len(gpus))
    m = len(groups)
    empty = (np.zeros(0, np.int64),) * 3 + (np.zeros(0),)
    if m == 1:
        return empty
    if pattern == "halving_doubling":
        return _halving_doubling(cluster, gpus)
    counts = np.array([len(g) for g in groups])
    n_ch = counts.max()
    ch = np.arange(n_ch)
    member = np.stack([g[ch % len(g)] for g in groups])            # (m, channels)
    if pattern == "ring":
        src = member.ravel()
        dst = np.roll(member, -1, axis=0).ravel()
        chan = np.tile(ch, m)
        return src, dst, chan, np.ones(len(src))
    i, j = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    off = i != j
    i, j = i[off], j[off]
    src = member[i].ravel()
    dst = member[j].ravel()
    chan = np.tile(ch, len(i))
    return src, dst, chan, np.full(len(src), 1.0 / (m - 1))


def _halving_doubling(cluster, ranks):
    n = len(ranks)
    steps = int(np.log2(n))
    r = np.arange(n)
    src, dst, chan, w = [], [], [], []
    for k in range(steps):
        partner = r ^ (1 << k)
        cross = cluster.leaf_of(ranks) != cluster.leaf_of(ranks[partner])
        src.append(ranks[cross])
        dst.append(ranks[partner[cross]])
        chan.append(np.full(cross.sum(), k))
        w.append(np.full(cross.sum(), 2.0 ** -(k + 1)))
    src, dst, chan, w = map(np.concatenate, (src, dst, chan, w))
    per_nic = np.bincount(np.searchsorted(ranks, src), weights=w, minlength=n)
    return src, dst, chan.astype(np.int64), w / per_nic.max()
