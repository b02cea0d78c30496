"""Paired comparison of BalanceNet with the unbalanced networks of the same size in the IHDP
study (same replications, same data): mean difference of sqrt(PEHE) and of |ATE error|, with
the Monte Carlo SE of the paired difference. Reads the replication tables of
``longterm_ihdp.py`` in ``simulations/results/longterm/`` and writes
``longterm-ihdp_networks_paired.csv`` there."""

import json
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent / "results" / "longterm"
FILES = ["longterm-ihdp_dropout30_networks.csv", "longterm-ihdp_dropout30_networks_alpha0.1.csv"]
REFERENCE = "Unbalanced net"


def main():
    raw = pd.concat([pd.read_csv(HERE / f) for f in FILES])
    raw["pehe"] = raw["details"].map(lambda d: json.loads(d).get("pehe", np.nan))
    raw["abs_error"] = (raw["estimate"] - raw["truth"]).abs()
    rows = []
    for metric in ("pehe", "abs_error"):
        wide = raw.pivot_table(index="rep", columns="estimator", values=metric)
        for name in wide.columns.drop(REFERENCE):
            d = (wide[name] - wide[REFERENCE]).dropna()
            rows.append({"setting": "dropout30", "metric": metric, "estimator": name,
                         "reference": REFERENCE, "n_reps": d.size,
                         "mean_estimator": wide.loc[d.index, name].mean(),
                         "mean_reference": wide.loc[d.index, REFERENCE].mean(),
                         "mean_difference": d.mean(),
                         "mc_se_difference": d.std(ddof=1) / np.sqrt(d.size)})
    table = pd.DataFrame(rows)
    table.to_csv(HERE / "longterm-ihdp_networks_paired.csv", index=False)
    print(table.round(4).to_string())


if __name__ == "__main__":
    main()
