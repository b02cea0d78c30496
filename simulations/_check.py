"""What the check scripts share: the resumable runner (cells of seeded replications, saved per
cell) and the paired SD ratio of two estimators' errors."""
import numpy as np
import pandas as pd
from joblib import Parallel, delayed


def sd_ratio(errors, reference, rng, n_boot=2000):
    """SD of ``errors`` over SD of ``reference`` (paired by replication) and its 95%
    percentile interval over resampled replications."""
    idx = rng.integers(0, errors.size, size=(n_boot, errors.size))
    boot = errors[idx].std(axis=1, ddof=1) / reference[idx].std(axis=1, ddof=1)
    return errors.std(ddof=1) / reference.std(ddof=1), *np.quantile(boot, [0.025, 0.975])


def run_cells(cells, replicate, summarise, *, reps, rows_path, out_path, jobs=2):
    """Run ``replicate(cell_index, rep)`` for ``rep < reps`` in every cell of ``cells`` (dicts
    of the columns that name a cell) whose rows ``rows_path`` does not hold yet, appending each
    cell's rows there as it finishes (a rerun resumes); then write ``summarise(rows)`` of all
    rows to ``out_path``. Each finished cell's summary and the final table are printed."""
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    names = list(cells[0])
    done = pd.read_csv(rows_path) if rows_path.exists() else pd.DataFrame(columns=names)
    for i, cell in enumerate(cells):
        if (done[names] == pd.Series(cell)).all(axis=1).any():
            continue
        rows = pd.DataFrame(Parallel(n_jobs=jobs)(delayed(replicate)(i, r) for r in range(reps)))
        done = pd.concat([done, rows], ignore_index=True)
        done.to_csv(rows_path, index=False, float_format="%.6g")
        print(summarise(rows).round(3).to_string(index=False), flush=True)
    table = summarise(done)
    table.to_csv(out_path, index=False, float_format="%.6g")
    print(table.round(3).to_string(index=False))
    print(f"wrote {out_path}")
    return table
