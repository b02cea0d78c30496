"""Two-tier leaf-spine cluster model (optionally with an optical circuit switch layer).

The cluster is *simulated*: no switches are driven. ``L`` leaves each host ``G`` GPUs (one NIC per
GPU, one link per NIC to its leaf) and ``S`` uplinks. Without OCS, uplink ``u`` of every leaf is
wired to spine ``u`` (one link per leaf-spine pair, non-blocking when ``S >= G``). With ``ocs=True``
every leaf uplink lands on an optical circuit switch that can connect it to any free port of any
spine (each spine has ``L`` ports) or directly to an uplink port of another leaf.

Directed links carry integer ids (the rows of the flow-link incidence used by :mod:`.maxmin`)::

    gpu_up[g]        = g                       NIC g -> its leaf
    gpu_down[g]      = N + g                   leaf -> NIC g
    leaf_up[a, u]    = 2N + a*S + u            leaf a uplink port u -> spine layer
    leaf_down[a, u]  = 2N + L*S + a*S + u      spine layer -> leaf a uplink port u

Without OCS, ``leaf_down[a, b]`` is the spine ``b`` -> leaf ``a`` downlink. A flow between two
leaves through spine ``b`` therefore uses ``gpu_up[src], leaf_up[a, b], leaf_down[c, b],
gpu_down[dst]``; under OCS the uplink ports are the ones the job's circuits occupy.

Reference: the leaf-spine layout of the vClos study (Zhao et al., "vClos: network contention aware
scheduling for distributed machine learning tasks in multi-tenant GPU clusters", Computer
Networks 268, 2025), one link from every leaf to every spine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causalkit._validation import check_positive_int

__all__ = ["LeafSpine"]


@dataclass(frozen=True)
class LeafSpine:
    """A leaf-spine GPU cluster.

    Parameters
    ----------
    leaves : int
        Number of leaf (top-of-rack) switches ``L``.
    spines : int
        Number of spine switches ``S`` (= uplinks per leaf).
    gpus_per_leaf : int
        GPUs (NICs) under each leaf, ``G``.
    link_gbps : float
        Capacity of every link (NIC and leaf-spine), Gbit/s.
    ocs : bool
        Whether an optical circuit switch sits between leaves and spines (OCS-vClos).

    Examples
    --------
    >>> c = LeafSpine(leaves=4, spines=8, gpus_per_leaf=8)
    >>> c.n_gpus, c.n_links
    (32, 128)
    """

    leaves: int
    spines: int
    gpus_per_leaf: int
    link_gbps: float = 100.0
    ocs: bool = False

    def __post_init__(self):
        check_positive_int(self.leaves, "leaves")
        check_positive_int(self.spines, "spines")
        check_positive_int(self.gpus_per_leaf, "gpus_per_leaf")
        if not isinstance(self.link_gbps, (int, float)) or not np.isfinite(self.link_gbps) \
                or self.link_gbps <= 0:
            raise ValueError(f"link_gbps must be a positive number; got {self.link_gbps!r}")
        if not isinstance(self.ocs, (bool, np.bool_)):
            raise TypeError(f"ocs must be a bool; got {type(self.ocs).__name__}")

    # sizes -------------------------------------------------------------------------------------
    @property
    def n_gpus(self) -> int:
        """Total GPUs ``N = L*G``."""
        return self.leaves * self.gpus_per_leaf

    @property
    def n_links(self) -> int:
        """Number of directed links ``2N + 2LS``."""
        return 2 * self.n_gpus + 2 * self.leaves * self.spines

    @property
    def capacity(self) -> np.ndarray:
        """Capacity of every directed link (Gbit/s), indexed by link id."""
        return np.full(self.n_links, float(self.link_gbps))

    # ids ---------------------------------------------------------------------------------------
    def leaf_of(self, gpu):
        """Leaf index of GPU id(s)."""
        return np.asarray(gpu) // self.gpus_per_leaf

    def local_index(self, gpu):
        """Position of GPU id(s) under their leaf."""
        return np.asarray(gpu) % self.gpus_per_leaf

    def gpu_up(self, gpu):
        """Link id NIC -> leaf."""
        return np.asarray(gpu)

    def gpu_down(self, gpu):
        """Link id leaf -> NIC."""
        return self.n_gpus + np.asarray(gpu)

    def leaf_up(self, leaf, port):
        """Link id leaf uplink port -> spine layer."""
        return 2 * self.n_gpus + np.asarray(leaf) * self.spines + np.asarray(port)

    def leaf_down(self, leaf, port):
        """Link id spine layer -> leaf uplink port."""
        return (2 * self.n_gpus + self.leaves * self.spines
                + np.asarray(leaf) * self.spines + np.asarray(port))

    def path_links(self, src, dst, src_port, dst_port) -> np.ndarray:
        """Link ids of flows ``src -> dst`` leaving/entering on the given uplink ports.

        Returns an ``(n_flows, 4)`` integer array: NIC up, leaf up, leaf down, NIC down. Without OCS
        the port is the spine index, and ``src_port == dst_port``.
        """
        src, dst = np.asarray(src), np.asarray(dst)
        return np.stack([
            self.gpu_up(src),
            self.leaf_up(self.leaf_of(src), src_port),
            self.leaf_down(self.leaf_of(dst), dst_port),
            self.gpu_down(dst),
        ], axis=-1).astype(np.int64)

    def with_ocs(self, ocs: bool = True) -> LeafSpine:
        """The same cluster with or without the OCS layer."""
        return LeafSpine(self.leaves, self.spines, self.gpus_per_leaf, self.link_gbps, ocs)
