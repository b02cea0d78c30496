"""The shipped real data sets: shape, known benchmarks, and presence in a built wheel."""

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalkit.datasets import (
    IHDP_COVARIATES,
    NSW_COVARIATES,
    NSW_EXPERIMENTAL_BENCHMARK,
    load_ihdp,
    load_nsw_cps,
    load_nsw_psid,
)

ROOT = Path(__file__).resolve().parents[1]


def test_nsw_cps_rows_and_benchmark():
    data = load_nsw_cps()
    assert len(data) == 16437
    assert set(NSW_COVARIATES + ["treat", "re78", "trial"]) <= set(data.columns)
    trial = data[data.trial == 1]
    assert len(trial) == 445 and trial.treat.sum() == 185
    assert (data.loc[data.trial == 0, "treat"] == 0).all()
    assert (data.trial == 0).sum() == 15992
    diff = trial.loc[trial.treat == 1, "re78"].mean() - trial.loc[trial.treat == 0, "re78"].mean()
    assert diff == pytest.approx(NSW_EXPERIMENTAL_BENCHMARK, abs=0.01)
    assert not data.isna().any().any()


def test_nsw_psid_rows_and_columns():
    data = load_nsw_psid()
    cps = load_nsw_cps()
    assert len(data) == 2935
    assert list(data.columns) == list(cps.columns)
    assert (data.trial == 0).sum() == 2490
    assert (data.loc[data.trial == 0, "treat"] == 0).all()
    assert not data.isna().any().any()
    # trial units first, and identical to the NSW part of the CPS file
    assert (data.trial.iloc[:445] == 1).all()
    pd.testing.assert_frame_equal(data[data.trial == 1], cps[cps.trial == 1])
    trial = data[data.trial == 1]
    diff = trial.loc[trial.treat == 1, "re78"].mean() - trial.loc[trial.treat == 0, "re78"].mean()
    assert diff == pytest.approx(NSW_EXPERIMENTAL_BENCHMARK, abs=0.01)


def test_nsw_psid_external_part_is_psid1_in_dollars():
    """The PSID rows reproduce the PSID-1 means published by Dehejia & Wahba (1999, Table 1),
    earnings in dollars (the source has thousands), to the published rounding."""
    psid = load_nsw_psid().query("trial == 0")
    published = {"age": (34.85, 0.005), "black": (0.25, 0.005), "hisp": (0.03, 0.005),
                 "marr": (0.87, 0.005), "nodegree": (0.31, 0.005), "re74": (19429, 0.5),
                 "re75": (19063, 0.5)}
    for column, (mean, rounding) in published.items():
        assert psid[column].mean() == pytest.approx(mean, abs=rounding), column
    assert (psid.nodegree == (psid.educ < 12)).all()
    assert set(np.unique(psid[["black", "hisp", "marr", "nodegree"]])) <= {0, 1}


def test_ihdp_is_hill_2011_sample():
    data = load_ihdp()
    assert data.shape[0] == 747 and data.treat.sum() == 139
    assert set(IHDP_COVARIATES) <= set(data.columns)
    assert not data[IHDP_COVARIATES].isna().any().any()
    # Hill (2011) dropped treated children of nonwhite mothers
    assert (data.loc[data.treat == 1, "momwhite"] == 1).all()
    std = load_ihdp(standardize=True)
    np.testing.assert_allclose(std[IHDP_COVARIATES[:6]].mean(), 0, atol=1e-10)
    np.testing.assert_allclose(std[IHDP_COVARIATES[:6]].std(ddof=0), 1, atol=1e-10)


def test_data_files_ship_inside_the_wheel(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True)
    (wheel,) = tmp_path.glob("*.whl")      # the distribution name need not be the import name
    names = zipfile.ZipFile(wheel).namelist()
    assert "causalkit/datasets/data/nsw_cps.csv.gz" in names
    assert "causalkit/datasets/data/nsw_psid.csv.gz" in names
    assert "causalkit/datasets/data/ihdp.csv" in names
