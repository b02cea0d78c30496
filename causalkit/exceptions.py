"""Warning classes raised by causalkit.

Every warning the package emits derives from :class:`CausalkitWarning`, so users can silence or
escalate all of them with one ``warnings.filterwarnings`` call.
"""

__all__ = [
    "CausalkitWarning",
    "ClippingWarning",
    "OverlapWarning",
    "FewBorrowedWarning",
    "FallbackWarning",
    "BootstrapFailureWarning",
    "RankDeficientWarning",
    "SmallSampleWarning",
]


class CausalkitWarning(UserWarning):
    """Base class of every warning issued by causalkit."""


class ClippingWarning(CausalkitWarning):
    """Estimated probabilities (propensities, continuation probabilities) were clipped."""


class OverlapWarning(CausalkitWarning):
    """Weak overlap: extreme weights or a small effective sample size."""


class FewBorrowedWarning(CausalkitWarning):
    """An adaptive borrowing rule borrowed few or no external units."""


class FallbackWarning(CausalkitWarning):
    """An estimator fell back to a simpler one (e.g. no external controls: trial only)."""


class BootstrapFailureWarning(CausalkitWarning):
    """Some bootstrap replicates failed and were dropped."""


class RankDeficientWarning(CausalkitWarning):
    """A design matrix is rank deficient: the message names the aliased (constant or collinear)
    columns and says whether they were dropped (as R's ``lm`` does) or kept."""


class SmallSampleWarning(CausalkitWarning):
    """A model is fitted on fewer units than it has parameters (e.g. a small trial arm)."""
