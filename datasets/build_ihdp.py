"""Rebuild causalkit/datasets/data/ihdp.csv from the IHDP file bundled in econml's wheel (MIT).

    pip install econml==0.17.0 && python datasets/build_ihdp.py

Source file: econml/data/ihdp/sim.csv (985 children of the Infant Health and Development Program).
Following Hill (2011), treated children with nonwhite mothers are removed, leaving 747 units
(139 treated, 608 controls).
"""

from pathlib import Path

import econml
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "causalkit" / "datasets" / "data" / "ihdp.csv"


def build() -> pd.DataFrame:
    raw = pd.read_csv(Path(econml.__file__).parent / "data" / "ihdp" / "sim.csv")
    keep = ~((raw["treat"] == 1) & (raw["momwhite"] == 0))
    frame = raw.loc[keep].reset_index(drop=True)
    frame.columns = [c.replace(".", "_") for c in frame.columns]
    return frame


if __name__ == "__main__":
    data = build()
    data.to_csv(OUT, index=False)
    print(f"wrote {OUT} with {len(data)} rows")
