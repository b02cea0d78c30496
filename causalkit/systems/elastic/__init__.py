"""LiveR-style live reconfiguration of TP x PP x DP training, versus checkpoint/restart.

Real parts (CPU worker processes, torch.distributed gloo on 127.0.0.1): a small transformer
trained with tensor, pipeline (1F1B) and data parallelism and a ZeRO-1 sharded Adam; live resizes
(shadow world built in the background, joining workers warmed up against mock groups, state
streamed through a bounded staging buffer along an intersection plan, checksummed, committed at a
step boundary); the checkpoint/restart baseline (torch.distributed.checkpoint + torchrun).
Simulated part (labelled as such): ``causalkit.systems.elastic.simmodel``, a SimPy model for
GPU-scale extrapolation, whose GPU parameters are calibrated to the paper's own downtimes (so its
GPU rows restate the paper, they do not predict it). ``causalkit.systems.elastic.transfer_study``
measures the downtime and its parts against the state size (up to gigabytes) and predicts the
paper's settings from the fitted per-byte cost (``causalkit.systems.elastic.costfit``).

Reference: Liu et al., "Fine-Grained Elasticity via Live Reconfiguration for Model Training",
arXiv 2605.22014 (2026).
"""

import importlib

from .layout import ModelSpec, ParallelLayout, layout_for
from .plan import Plan, Transfer, holdings, reshard_plan

__all__ = ["ParallelLayout", "ModelSpec", "layout_for", "reshard_plan", "Plan", "Transfer",
           "holdings", "ElasticTrainer", "ElasticExperiment", "simmodel"]


def __getattr__(name):
    if name == "ElasticTrainer":
        from .trainer import ElasticTrainer
        return ElasticTrainer
    if name == "ElasticExperiment":
        from .experiment import ElasticExperiment
        return ElasticExperiment
    if name == "simmodel":
        return importlib.import_module(f"{__name__}.simmodel")
    raise AttributeError(name)
