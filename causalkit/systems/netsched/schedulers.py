"""Placement policies used by the FIFO cluster scheduler.

==============  ================================================================  ==============
name            placement                                                         routing
==============  ================================================================  ==============
``ecmp``        first fit: the lowest-numbered free GPUs                          ECMP
``bestfit``     best fit (Tiresias-style consolidation): the fewest leaves,       ECMP
                and of those the set leaving the fewest free GPUs on the
                leaves it touches (:func:`best_fit_leaves`, exact)
``vclos-ecmp``  vClos placement (below; links still reserved): separates what     ECMP
                vClos gains by placement from what it gains by routing
``vclos``       isolated virtual Clos: best-fit single leaf, else ``m`` leaves    source routing
                x ``s`` spines with all ``m*s`` links free (:mod:`.allocation`),
                ``s`` over the divisors of N (largest first), links reserved
``ideal``       first fit on a fabric with no network constraints (every job      none
                at line rate): the no-contention reference, not a real policy
``ocs-vclos``   as ``vclos`` but the OCS builds per-job circuits: a chosen leaf   source routing
                needs ``s`` free uplink ports, each virtual spine ``m`` free      over circuits
                ports on one spine; two-leaf jobs get direct leaf-leaf circuits
==============  ================================================================  ==============

ECMP-routed policies take the ECMP knobs ``qps`` and ``adaptive`` (:class:`.ECMP`).

References: Zhao et al., "vClos", Computer Networks 268 (2025) (vClos, OCS-vClos); Gu et al.,
"Tiresias", NSDI 2019 (consolidated placement).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from causalkit.systems.netsched.allocation import SOLVERS, solve_vclos
from causalkit.systems.netsched.routing import ECMP, SourceRouting

__all__ = ["ClusterState", "Placement", "SCHEDULERS", "make_scheduler", "best_fit_leaves",
           "FirstFit", "BestFit", "Ideal", "VClos", "VClosECMP", "OCSVClos"]


@dataclass
class Placement:
    """Where a job runs: its GPUs, and (source-routed jobs) the uplink port of each GPU.

    ``links`` lists reserved leaf-spine pairs ``(leaf, spine)`` (vClos); ``circuits`` lists OCS
    circuits ``(leaf, port, kind, peer, peer_port)`` with ``kind`` ``"spine"`` (peer = spine) or
    ``"leaf"`` (a direct leaf-leaf circuit, peer = leaf).
    """

    job_id: int          # owner id in the cluster state (the simulator uses the job's row)
    gpus: np.ndarray
    ports: np.ndarray | None = None
    links: list = field(default_factory=list)
    circuits: list = field(default_factory=list)

    @property
    def source_routed(self) -> bool:
        return self.ports is not None


class ClusterState:
    """Mutable occupancy of a cluster: GPUs, reserved links, OCS ports."""

    def __init__(self, cluster):
        self.cluster = cluster
        L, S, G = cluster.leaves, cluster.spines, cluster.gpus_per_leaf
        self.gpu_owner = np.full(L * G, -1, dtype=np.int64)
        self.link_owner = np.full((L, S), -1, dtype=np.int64)       # vClos reservations
        self.leaf_port_owner = np.full((L, S), -1, dtype=np.int64)  # OCS leaf-side ports
        self.spine_port_owner = np.full((S, L), -1, dtype=np.int64)  # OCS spine-side ports

    @property
    def free_per_leaf(self) -> np.ndarray:
        return (self.gpu_owner.reshape(self.cluster.leaves, -1) < 0).sum(axis=1)

    @property
    def n_free(self) -> int:
        return int(np.count_nonzero(self.gpu_owner < 0))

    def free_gpus_on(self, leaf: int, k: int) -> np.ndarray:
        G = self.cluster.gpus_per_leaf
        ids = np.flatnonzero(self.gpu_owner[leaf * G:(leaf + 1) * G] < 0)[:k]
        return leaf * G + ids

    def commit(self, p: Placement) -> None:
        if np.any(self.gpu_owner[p.gpus] >= 0):
            raise RuntimeError(f"job {p.job_id}: GPU already allocated")
        self.gpu_owner[p.gpus] = p.job_id
        for a, b in p.links:
            if self.link_owner[a, b] >= 0:
                raise RuntimeError(f"job {p.job_id}: link ({a},{b}) already reserved")
            self.link_owner[a, b] = p.job_id
        for leaf, port, kind, peer, peer_port in p.circuits:
            if self.leaf_port_owner[leaf, port] >= 0:
                raise RuntimeError(f"job {p.job_id}: leaf port ({leaf},{port}) in use")
            self.leaf_port_owner[leaf, port] = p.job_id
            owner = self.spine_port_owner if kind == "spine" else self.leaf_port_owner
            if owner[peer, peer_port] >= 0:
                raise RuntimeError(f"job {p.job_id}: port ({peer},{peer_port}) in use")
            owner[peer, peer_port] = p.job_id

    def release(self, p: Placement) -> None:
        for arr in (self.gpu_owner, self.link_owner, self.leaf_port_owner,
                    self.spine_port_owner):
            arr[arr == p.job_id] = -1


def _single_leaf(state, job_id, n):
    free = state.free_per_leaf
    fits = np.flatnonzero(free >= n)
    if fits.size == 0:
        return None
    leaf = fits[np.argmin(free[fits])]
    return state.free_gpus_on(int(leaf), n)


def best_fit_leaves(free, n: int) -> np.ndarray:
    """Free GPUs to take on each leaf: the fewest leaves, then the least free capacity left.

    Among leaf sets that can hold ``n`` GPUs, take those with the fewest leaves ``m`` and, of
    these, the set with the smallest total of free GPUs ``sum_a f_a`` (so the fewest stay free on
    the leaves the job touches); ties go to the lowest leaf ids. Exact: a bounded-knapsack
    dynamic program over the distinct free counts ``v`` (how many leaves ``t_v`` of each count to
    take, ``sum t_v = m``, ``sum v t_v >= n`` minimal). The leaves are filled emptiest-last, so
    the ``sum - n`` GPUs left free stay together on the leaf with the most free GPUs.

    Returns
    -------
    ndarray of shape (L,)
        GPUs taken per leaf (all zeros if ``n`` exceeds the free GPUs).
    """
    free = np.asarray(free, dtype=np.int64)
    take = np.zeros(len(free), dtype=np.int64)
    desc = np.sort(free)[::-1]
    if desc.sum() < n:
        return take
    m = int(np.searchsorted(np.cumsum(desc), n) + 1)
    vals = np.unique(free[free > 0])
    smax = m * int(vals.max())
    reach = np.zeros((m + 1, smax + 1), dtype=bool)
    reach[0, 0] = True
    picks = []
    for v in vals:
        new = np.zeros_like(reach)
        pick = np.full(reach.shape, -1, dtype=np.int64)
        for t in range(min(int(np.count_nonzero(free == v)), m) + 1):
            shifted = np.zeros_like(reach)
            shifted[t:, t * v:] = reach[:m + 1 - t, :smax + 1 - t * v]
            pick[shifted & ~new] = t
            new |= shifted
        picks.append(pick)
        reach = new
    k, s = m, n + int(np.argmax(reach[m, n:]))
    chosen = []
    for v, pick in zip(vals[::-1], picks[::-1], strict=True):
        t = int(pick[k, s])
        chosen += np.flatnonzero(free == v)[:t].tolist()
        k, s = k - t, s - t * int(v)
    chosen = sorted(chosen, key=lambda a: (free[a], a))
    need = n
    for a in chosen:
        take[a] = min(int(free[a]), need)
        need -= take[a]
    return take


class FirstFit:
    """First fit (lowest GPU ids) with ECMP routing (``qps``, ``adaptive``: see :class:`.ECMP`)."""

    name = "ecmp"

    def __init__(self, seed: int = 0, qps: int = 1, adaptive: bool = False):
        self.routing = ECMP(seed, qps=qps, adaptive=adaptive)

    def place(self, state, job_id, n):
        free = np.flatnonzero(state.gpu_owner < 0)
        if free.size < n:
            return None
        return Placement(job_id, free[:n])


class Ideal(FirstFit):
    """First fit on an ideal fabric: no cross-leaf flows are modelled (reference only)."""

    name = "ideal"

    def __init__(self, seed: int = 0):
        self.routing = None


class BestFit:
    """Best-fit placement (:func:`best_fit_leaves`) with ECMP routing (knobs: :class:`.ECMP`)."""

    name = "bestfit"

    def __init__(self, seed: int = 0, qps: int = 1, adaptive: bool = False):
        self.routing = ECMP(seed, qps=qps, adaptive=adaptive)

    def place(self, state, job_id, n):
        if state.n_free < n:
            return None
        take = best_fit_leaves(state.free_per_leaf, n)
        gpus = [state.free_gpus_on(int(a), int(take[a])) for a in np.flatnonzero(take)]
        return Placement(job_id, np.sort(np.concatenate(gpus)))


def _clos_shapes(n, cluster):
    """(m, s) with m*s = n, s <= min(G, S), m <= L, s descending."""
    cap = min(cluster.gpus_per_leaf, cluster.spines)
    for s in range(min(cap, n), 0, -1):
        if n % s == 0 and n // s <= cluster.leaves:
            yield n // s, s


class VClos:
    """Isolated virtual Clos per job (best fit + exact allocation) with source routing.

    Parameters
    ----------
    solver : {"auto", "milp", "enumerate", "brute"}
        Solver of the allocation program (:func:`~causalkit.systems.netsched.solve_vclos`).
    time_limit : float
        Seconds per ``milp`` call.
    """

    name = "vclos"

    def __init__(self, solver: str = "auto", time_limit: float = 10.0):
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}; got {solver!r}")
        self.solver = solver
        self.time_limit = time_limit
        self.routing = SourceRouting()

    def place(self, state, job_id, n):
        if state.n_free < n:
            return None
        one = _single_leaf(state, job_id, n)
        if one is not None:
            return Placement(job_id, one, ports=np.zeros(n, dtype=np.int64))
        free = state.free_per_leaf
        for m, s in _clos_shapes(n, state.cluster):
            sol = solve_vclos(state.link_owner < 0, free, m, s, self.solver, self.time_limit)
            if sol is None:
                continue
            leaves, spines, _ = sol
            gpus = np.concatenate([state.free_gpus_on(int(a), s) for a in leaves])
            ports = np.tile(spines, m)
            links = [(int(a), int(b)) for a in leaves for b in spines]
            return Placement(job_id, gpus, ports=ports, links=links)
        return None


class VClosECMP(VClos):
    """vClos placement (and link reservation) with ECMP routing instead of source routing.

    Parameters
    ----------
    seed, qps, adaptive
        ECMP hash seed and knobs (:class:`.ECMP`).
    solver, time_limit
        As :class:`VClos`.
    """

    name = "vclos-ecmp"

    def __init__(self, seed: int = 0, qps: int = 1, adaptive: bool = False,
                 solver: str = "auto", time_limit: float = 10.0):
        super().__init__(solver, time_limit)
        self.routing = ECMP(seed, qps=qps, adaptive=adaptive)

    def place(self, state, job_id, n):
        p = super().place(state, job_id, n)
        if p is not None:
            p.ports = None
        return p


class OCSVClos:
    """vClos over an optical circuit switch: per-job circuits, port-count constraints only.

    Parameters
    ----------
    reconfig_s : float
        Circuit reconfiguration time added to a job's start when it needs circuits (MEMS OCS,
        about 50 ms).
    """

    name = "ocs-vclos"

    def __init__(self, reconfig_s: float = 0.05):
        self.reconfig_s = reconfig_s
        self.routing = SourceRouting()

    def place(self, state, job_id, n):
        c = state.cluster
        if not c.ocs:
            raise ValueError("ocs-vclos needs a cluster built with ocs=True")
        if state.n_free < n:
            return None
        one = _single_leaf(state, job_id, n)
        if one is not None:
            return Placement(job_id, one, ports=np.zeros(n, dtype=np.int64))
        free = state.free_per_leaf
        free_ports = (state.leaf_port_owner < 0).sum(axis=1)
        spine_free = (state.spine_port_owner < 0).sum(axis=1)
        for m, s in _clos_shapes(n, c):
            ok = np.flatnonzero((free >= s) & (free_ports >= s))
            if ok.size < m:
                continue
            leaves = np.sort(ok[np.argsort(free[ok], kind="stable")[:m]])
            if m == 2:
                return self._direct(state, job_id, leaves, s)
            hosts = self._virtual_spines(spine_free, m, s)
            if hosts is None:
                continue
            return self._circuits(state, job_id, leaves, hosts, s)
        return None

    @staticmethod
    def _virtual_spines(spine_free, m, s):
        """Spines hosting the ``s`` virtual spines (``m`` ports each), fullest spines first."""
        slots = spine_free // m
        if slots.sum() < s:
            return None
        hosts = []
        for b in np.argsort(spine_free, kind="stable"):
            k = min(int(slots[b]), s - len(hosts))
            hosts += [int(b)] * k
            if len(hosts) == s:
                return hosts
        return None

    @staticmethod
    def _ports(owner_row, k):
        return np.flatnonzero(owner_row < 0)[:k]

    def _direct(self, state, job_id, leaves, s):
        a, b = (int(x) for x in leaves)
        pa, pb = self._ports(state.leaf_port_owner[a], s), self._ports(state.leaf_port_owner[b], s)
        gpus = np.concatenate([state.free_gpus_on(a, s), state.free_gpus_on(b, s)])
        circuits = [(a, int(u), "leaf", b, int(v)) for u, v in zip(pa, pb, strict=True)]
        return Placement(job_id, gpus, ports=np.concatenate([pa, pb]), circuits=circuits)

    def _circuits(self, state, job_id, leaves, hosts, s):
        spine_taken = {}
        gpus, ports, circuits = [], [], []
        for a in (int(x) for x in leaves):
            pa = self._ports(state.leaf_port_owner[a], s)
            gpus.append(state.free_gpus_on(a, s))
            ports.append(pa)
            for j, b in enumerate(hosts):
                row = state.spine_port_owner[b]
                used = spine_taken.setdefault(b, set())
                q = next(int(q) for q in np.flatnonzero(row < 0) if int(q) not in used)
                used.add(q)
                circuits.append((a, int(pa[j]), "spine", b, q))
        return Placement(job_id, np.concatenate(gpus), ports=np.concatenate(ports),
                         circuits=circuits)


SCHEDULERS = {"ecmp": FirstFit, "bestfit": BestFit, "vclos-ecmp": VClosECMP, "vclos": VClos,
              "ocs-vclos": OCSVClos, "ideal": Ideal}

#: Policies routed by ECMP (they take a hash seed and the ECMP knobs).
ECMP_ROUTED = ("ecmp", "bestfit", "vclos-ecmp")


def make_scheduler(spec, seed: int = 0, **ecmp):
    """A scheduler from a name in :data:`SCHEDULERS` or an instance.

    ECMP-routed names are seeded and take the ECMP knobs ``qps`` and ``adaptive`` as keywords;
    other policies accept none.
    """
    if isinstance(spec, str):
        if spec not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {sorted(SCHEDULERS)}; got {spec!r}")
        cls = SCHEDULERS[spec]
        if spec in ECMP_ROUTED:
            return cls(seed, **ecmp)
        if ecmp:
            raise ValueError(f"ECMP options {sorted(ecmp)} do not apply to scheduler {spec!r}")
        return cls(seed) if spec == "ideal" else cls()
    if not hasattr(spec, "place") or not hasattr(spec, "routing"):
        raise TypeError("scheduler must be a name or an object with place() and routing")
    return spec
