"""causalkit: causal estimation when one data set is not enough.

Subpackages: :mod:`causalkit.borrowing` (external controls), :mod:`causalkit.longterm`
(long-term effects under monotone drop-out), :mod:`causalkit.policy` (policy adaptation under
covariate shift), ``causalkit.systems`` (systems experiment drivers). The top level stays light:
heavy dependencies are imported by the subpackages that need them.
"""

from causalkit.exceptions import CausalkitWarning
from causalkit.inference import Estimate, bootstrap

__version__ = "0.1.0"

__all__ = ["Estimate", "bootstrap", "CausalkitWarning", "__version__"]
