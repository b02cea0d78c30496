"""SHIFT: cross-NIC RDMA failover, its trilemma, and NCCL-style workloads that survive NIC faults.

**Emulated.** This machine has no RDMA NIC (and no soft-RoCE), so the verbs layer is a software
emulation (``causalkit.systems.rdma.verbs``, ``EMULATED = True``) over pluggable packet paths
(``causalkit.systems.rdma.paths``: in-process queues, UDP loopback, shared memory), with fault
hooks. On top of it:

- :class:`ShiftQP` (``causalkit.systems.rdma.shift``): a QP with a backup QP on another NIC;
  safety check, completion drain, WR replay with remapped keys, receive-counter handshake,
  probe/fence switch-back;
- :func:`check_trilemma` (``causalkit.systems.rdma.trilemma``): explicit-state model checker
  for (exactly-once, receiver-NIC opacity, zero-copy) x failover policies;
- :class:`FailoverExperiment` (``causalkit.systems.rdma.experiment``) and
  :class:`FailoverTrainingExperiment` (``causalkit.systems.rdma.training``): workloads
  under faults;
- :func:`measure_datapath_overhead`: per post/poll cost with vs without SHIFT.

Reference: "SHIFT: Exploring the Boundary of RDMA Network Fault Tolerance", arXiv 2512.11094.
"""

import importlib

_EXPORTS = {
    "verbs": None, "paths": None, "shift": None, "trilemma": None, "workloads": None,
    "experiment": None, "training": None, "overhead": None,
    "NicPath": "paths", "InProcessPath": "paths", "UdpPath": "paths", "SharedMemoryPath": "paths",
    "KVStore": "shift", "ShiftEndpoint": "shift", "ShiftQP": "shift", "ShiftCQ": "shift",
    "check_trilemma": "trilemma", "check_policy": "trilemma", "TRACES": "trilemma",
    "Op": "trilemma", "FailoverExperiment": "experiment", "FAULTS": "experiment",
    "inject_fault": "experiment", "FailoverTrainingExperiment": "training",
    "measure_datapath_overhead": "overhead", "TransportError": "workloads",
    "build_ring": "workloads",
    "run_allreduce": "workloads", "run_p2p": "workloads", "RingAllReduce": "workloads",
}

#: Every NIC in this package is a software emulation.
EMULATED = True

__all__ = ["EMULATED", *_EXPORTS]


def __getattr__(name):
    """Import submodules on first use, so ``causalkit systems rdma --help`` stays fast."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _EXPORTS[name]
    if module is None:
        return importlib.import_module(f"{__name__}.{name}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
