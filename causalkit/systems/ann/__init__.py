"""SmartANN: object causal diagnosis and auto-design of IVF-PQ and HNSW indexes.

An ANN workflow is a chain of eight ordered, replaceable objects
(:class:`IVFPQWorkflow`, :class:`HNSWWorkflow`, compiled to native faiss indexes). :class:`SmartANN`
walks the chain in causal order, flags the first object whose behaviour deviates from its
expectation and whose oracle would raise the quality bound it controls, replaces it by its oracle
and continues downstream; it then composes compatible actions from a pluggable library into an
optimised design. :class:`ANNExperiment` runs the baseline-vs-design study. Needs the ``[ann]``
extra (faiss-cpu, scikit-image). All engines are real (faiss on this CPU); nothing here
is simulated.
"""

from causalkit.systems.ann.actions import ACTIONS, Action
from causalkit.systems.ann.cache import ArtifactCache
from causalkit.systems.ann.diagnosis import Diagnosis
from causalkit.systems.ann.experiment import ANNExperiment
from causalkit.systems.ann.hnsw import HNSWWorkflow
from causalkit.systems.ann.ivfpq import IVFPQWorkflow
from causalkit.systems.ann.metrics import exact_knn, measure_qps, recall_at_k
from causalkit.systems.ann.registry import HNSW_SPECS, IVFPQ_SPECS, SPECS, ObjectSpec
from causalkit.systems.ann.smartann import Design, OperatingPoint, SmartANN, calibrate

__all__ = ["IVFPQWorkflow", "HNSWWorkflow", "SmartANN", "Diagnosis", "Design", "OperatingPoint",
           "ANNExperiment", "Action", "ACTIONS", "ObjectSpec", "SPECS", "IVFPQ_SPECS",
           "HNSW_SPECS", "ArtifactCache", "calibrate", "exact_knn", "recall_at_k", "measure_qps"]
