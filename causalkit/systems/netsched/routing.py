"""Routing policies: ECMP hashing and source (index-based) routing, plus the ECMP collision model.

* **ECMP**: every cross-leaf flow picks spine ``hash(src, dst, sport, job) mod S``; the hash is a
  vectorised splitmix64 mix of the 5-tuple fields (uniform and deterministic for a given seed), the
  source port is ``49152 + channel`` (one RDMA queue pair per channel). Two knobs of real fabrics:
  ``qps`` queue pairs per connection (NCCL's ``NCCL_IB_QPS_PER_CONNECTION``: the connection's
  bytes split evenly over ``qps`` flows with their own source ports, each hashed on its own), and
  ``adaptive`` routing (flowlet switching / adaptive routing in the fluid limit: every connection
  spread evenly over all ``S`` spines, the best any load-oblivious spreading achieves).
* **Source routing** (vClos): the GPU with job-local index ``j`` on its leaf sends through the
  ``j``-th uplink port reserved for the job (the ``j``-th spine of its virtual Clos, or its OCS
  circuit), so a rail-aligned collective puts at most one flow of one job on each reserved link.

ECMP collision model: ``k`` flows leaving one leaf hash onto ``S`` uplinks uniformly; no two share
an uplink with probability ``P = S! / ((S-k)! S^k)`` (the birthday problem).
"""

from __future__ import annotations

import math

import numpy as np

from causalkit._validation import check_positive_int, check_random_state

__all__ = [
    "ECMP",
    "SourceRouting",
    "flow_hash",
    "collision_free_probability",
    "ecmp_collision_trials",
]

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & _M64
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _M64
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _M64
    return x ^ (x >> np.uint64(31))


def flow_hash(*fields, seed: int = 0) -> np.ndarray:
    """64-bit hash of integer flow fields (broadcast), chained through splitmix64."""
    with np.errstate(over="ignore"):
        h = _splitmix64(np.full(np.broadcast(*fields).shape, seed, dtype=np.uint64))
        for f in fields:
            h = _splitmix64(h ^ np.asarray(f).astype(np.uint64))
    return h


class ECMP:
    """Equal-cost multi-path hashing over all spines.

    Parameters
    ----------
    seed : int
        Hash seed (a different switch hash function per seed).
    qps : int
        Queue pairs (hashed flows) per connection; each carries ``1/qps`` of its bytes.
    adaptive : bool
        Spread every connection evenly over all spines (flowlet / adaptive routing, fluid limit)
        instead of hashing it; ``qps`` is then irrelevant.
    """

    name = "ecmp"

    def __init__(self, seed: int = 0, qps: int = 1, adaptive: bool = False):
        self.seed = int(seed)
        self.qps = check_positive_int(qps, "qps")
        if not isinstance(adaptive, (bool, np.bool_)):
            raise TypeError(f"adaptive must be a bool; got {type(adaptive).__name__}")
        self.adaptive = bool(adaptive)

    def split(self, cluster, src, dst, channel, weight):
        """Sub-flows of every connection: ``qps`` hashed ones, or one per spine if adaptive.

        Sub-flow ``k`` of channel ``c`` gets channel id ``c * n + k`` and weight ``w / n``.
        """
        n = cluster.spines if self.adaptive else self.qps
        if n == 1:
            return src, dst, channel, weight
        k = np.tile(np.arange(n), len(src))
        return (np.repeat(src, n), np.repeat(dst, n), np.repeat(channel, n) * n + k,
                np.repeat(weight, n) / n)

    def spines(self, n_spines: int, src, dst, channel, job_id) -> np.ndarray:
        """Spine index chosen for each (sub-)flow."""
        if self.adaptive:
            return np.asarray(channel) % n_spines
        sport = 49152 + np.asarray(channel)
        h = flow_hash(src, dst, sport, np.asarray(job_id), seed=self.seed)
        return (h % np.uint64(n_spines)).astype(np.int64)

    def ports(self, cluster, src, dst, channel, job_id, placement=None):
        """Uplink ports (source leaf, destination leaf) of each flow."""
        b = self.spines(cluster.spines, src, dst, channel, job_id)
        return b, b


class SourceRouting:
    """Index-based source routing over the uplink ports a placement reserved.

    The placement's ``ports`` array gives, for each of its GPUs, the uplink port its traffic uses
    (identical on both ends of a rail-aligned flow without OCS).
    """

    name = "source"

    @staticmethod
    def split(cluster, src, dst, channel, weight):
        """One flow per connection (no splitting)."""
        return src, dst, channel, weight

    def ports(self, cluster, src, dst, channel, job_id, placement):
        """Uplink ports (source leaf, destination leaf) of each flow."""
        order = np.argsort(placement.gpus, kind="stable")
        gpus, ports = placement.gpus[order], placement.ports[order]
        sp_ = ports[np.searchsorted(gpus, src)]
        dp_ = ports[np.searchsorted(gpus, dst)]
        if not cluster.ocs and np.any(sp_ != dp_):
            raise ValueError(
                f"job {job_id}: source routing needs rail-aligned flows (same spine at both ends)"
            )
        return sp_, dp_


def collision_free_probability(k: int, spines: int) -> float:
    """``S! / ((S-k)! S^k)``: chance that ``k`` uniformly hashed flows use distinct uplinks."""
    k = check_positive_int(k, "k")
    spines = check_positive_int(spines, "spines")
    if k > spines:
        return 0.0
    return math.exp(math.lgamma(spines + 1) - math.lgamma(spines - k + 1) - k * math.log(spines))


def ecmp_collision_trials(k: int, spines: int, trials: int, random_state=None) -> dict:
    """Monte Carlo of ECMP hashing: ``k`` flows from one leaf, fresh source ports every trial.

    Each trial hashes ``k`` flows (distinct sources/destinations, random source ports and hash
    seed) with :class:`ECMP` and records whether two share an uplink and the most loaded uplink.

    Returns
    -------
    dict
        ``p_free`` (estimate), ``se`` (binomial standard error), ``mean_max_load``,
        ``se_max_load`` and ``trials``.
    """
    k = check_positive_int(k, "k")
    spines = check_positive_int(spines, "spines")
    trials = check_positive_int(trials, "trials")
    rng = check_random_state(random_state)
    seed = int(rng.integers(2**62))
    src = np.broadcast_to(np.arange(k), (trials, k))
    dst = src + 1000
    sport = rng.integers(0, 16384, size=(trials, k))
    trial_id = np.broadcast_to(np.arange(trials)[:, None], (trials, k))
    b = (flow_hash(src, dst, sport, trial_id, seed=seed) % np.uint64(spines)).astype(np.int64)
    counts = np.zeros((trials, spines), dtype=np.int64)
    np.add.at(counts, (np.broadcast_to(np.arange(trials)[:, None], b.shape), b), 1)
    mx = counts.max(axis=1)
    free = (mx <= 1).astype(float)
    p = free.mean()
    return {
        "p_free": p,
        "se": math.sqrt(max(p * (1 - p), 1e-300) / trials),
        "mean_max_load": mx.mean(),
        "se_max_load": mx.std(ddof=1) / math.sqrt(trials) if trials > 1 else float("nan"),
        "trials": trials,
    }
