"""ARGUS-style always-on tracing and progressive diagnosis of data-parallel / pipeline training.

Real on this host: torch.distributed (gloo) rank processes on 127.0.0.1, three tracing channels
(phase timers, sampled CPU stacks, duty-cycled torch.profiler windows as the kernel channel; on a
CUDA host, chosen automatically: CUDA-event timers on the compute and communication streams and
CUDA kernel activity), an importer for torch.profiler Chrome/Kineto exports,
a bounded producer queue that drops and counts on overflow, a per-rank processor writing SQLite,
log-duration KDE compression of kernel events, and diagnosis levels L1-L3 with the
culprit-vs-victim rule. Simulated (and labelled so): cluster-scale kernel streams
(:class:`SyntheticCluster`); emulated: the link-degradation fault.

Reference: Zhou et al. (2026), "ARGUS: Production-Scale Tracing and Performance Diagnosis for
over 10,000-GPU Clusters", arXiv 2606.20374.
"""

from causalkit.systems.tracing.calibration import calibrate_phase_rel
from causalkit.systems.tracing.compression import (
    ClusterStats,
    KernelGroupSummary,
    KernelSummary,
    cdf,
    cluster_durations,
    compress,
    compression_ratio,
    decompress,
    quantile,
    round_trip_errors,
)
from causalkit.systems.tracing.device import CudaClock, HostClock, device_clock
from causalkit.systems.tracing.diagnosis import Finding, Report, diagnose
from causalkit.systems.tracing.events import (
    IterationSample,
    KernelEvent,
    PhaseEvent,
    StackSnapshot,
    TraceFileError,
)
from causalkit.systems.tracing.experiment import FAULTS, TrainingExperiment
from causalkit.systems.tracing.kineto import KinetoTrace, kineto_store
from causalkit.systems.tracing.store import MemoryStore, TraceStore
from causalkit.systems.tracing.synthetic import SyntheticCluster, cupti_scale_window
from causalkit.systems.tracing.tracefile import read_kineto, read_trace, write_trace
from causalkit.systems.tracing.tracer import Tracer
from causalkit.systems.tracing.triples import format_errors, triple_bytes

__all__ = [
    "Tracer", "TraceStore", "MemoryStore", "TrainingExperiment", "FAULTS",
    "SyntheticCluster", "cupti_scale_window",
    "compress", "decompress", "cdf", "quantile", "cluster_durations", "compression_ratio",
    "round_trip_errors",
    "ClusterStats", "KernelGroupSummary", "KernelSummary",
    "diagnose", "Report", "Finding", "calibrate_phase_rel",
    "KernelEvent", "PhaseEvent", "StackSnapshot", "IterationSample", "TraceFileError",
    "read_trace", "write_trace", "read_kineto", "KinetoTrace", "kineto_store",
    "HostClock", "CudaClock", "device_clock", "triple_bytes", "format_errors",
]
