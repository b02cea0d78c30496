"""Real, offline data sets.

``load_nsw_cps``, ``load_nsw_psid`` and ``load_ihdp`` read files shipped inside the package;
``load_ann`` (in ``causalkit.datasets.ann``, needs the ``[ann]`` extra) builds vector sets for
the ANN driver.
"""

from causalkit.datasets._real import (
    IHDP_COVARIATES,
    NSW_COVARIATES,
    NSW_EXPERIMENTAL_BENCHMARK,
    load_ihdp,
    load_nsw_cps,
    load_nsw_psid,
)

__all__ = ["load_nsw_cps", "load_nsw_psid", "load_ihdp", "load_ann",
           "NSW_EXPERIMENTAL_BENCHMARK", "NSW_COVARIATES", "IHDP_COVARIATES"]


def __getattr__(name):
    if name == "load_ann":
        from causalkit.datasets.ann import load_ann
        return load_ann
    raise AttributeError(f"module 'causalkit.datasets' has no attribute {name!r}")
