"""Rebuild causalkit/datasets/data/nsw_cps.csv.gz from the `causaldata` PyPI package (MIT).

    pip install causaldata==0.1.5 && python datasets/build_nsw_cps.py

Rows: the 445 NSW experimental units (Dehejia-Wahba subsample; 185 treated, 260 controls) with
trial = 1, then the 15,992 CPS comparison units with trial = 0 and treat = 0.
"""

from pathlib import Path

import pandas as pd
from causaldata import cps_mixtape, nsw_mixtape

COLUMNS = ["age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75", "treat", "re78"]
OUT = Path(__file__).resolve().parents[1] / "causalkit" / "datasets" / "data" / "nsw_cps.csv.gz"


def build() -> pd.DataFrame:
    nsw = nsw_mixtape.load_pandas().data[COLUMNS].assign(trial=1)
    cps = cps_mixtape.load_pandas().data[COLUMNS].assign(trial=0)
    if (cps["treat"] != 0).any():
        raise ValueError("CPS comparison units must all be untreated")
    frame = pd.concat([nsw, cps], ignore_index=True)
    int_cols = ["age", "educ", "black", "hisp", "marr", "nodegree", "treat", "trial"]
    frame[int_cols] = frame[int_cols].astype(int)
    return frame


if __name__ == "__main__":
    data = build()
    data.to_csv(OUT, index=False, float_format="%.4f", compression={"method": "gzip", "mtime": 0})
    print(f"wrote {OUT} with {len(data)} rows")
