"""Figures of the borrowing studies from their committed summary tables.

Reads simulations/results/borrowing/{paper_a,gao}_summary.csv and writes one PNG per study:
RMSE (left) and 95% coverage (right) of every estimator by scenario.
"""
from pathlib import Path

import matplotlib
import pandas as pd

from causalkit.borrowing.studies import plot_summary

RESULTS = Path(__file__).resolve().parent / "results" / "borrowing"

if __name__ == "__main__":
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for study in ("paper_a", "gao"):
        path = RESULTS / f"{study}_summary.csv"
        if not path.exists():
            print(f"skip {study}: no {path.name}")
            continue
        summary = pd.read_csv(path, index_col=[0, 1])
        fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
        plot_summary(summary, "rmse", ax=left)
        plot_summary(summary, "coverage", ax=right)
        right.axhline(0.95, color="k", lw=0.8, ls=":")
        fig.suptitle(f"{study}: RMSE and coverage of the 95% interval (influence-function SE)")
        fig.tight_layout()
        fig.savefig(RESULTS / f"{study}.png", dpi=110)
        print(f"wrote {RESULTS / f'{study}.png'}")
