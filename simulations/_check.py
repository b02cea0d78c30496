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
    """Run ``replicate(cell_index, rep)`` for every ``rep < reps`` of every cell of ``cells``
    (dicts of the columns that name a cell; ``reps`` an int or one per cell) that ``rows_path``
    does not hold yet, appending each cell's new rows there as it finishes (a rerun resumes; a
    larger ``reps`` extends the cells, each replication keeping its own seed); then write
    ``summarise(rows)`` of all rows to ``out_path``. Each extended cell's summary and the final
    table are printed. The rows must carry a ``rep`` column."""
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    names = list(cells[0])
    per_cell = [reps] * len(cells) if isinstance(reps, int) else list(reps)
    done = (pd.read_csv(rows_path) if rows_path.exists()
            else pd.DataFrame(columns=[*names, "rep"]))
    for i, cell in enumerate(cells):
        mine = (done[names] == pd.Series(cell)).all(axis=1)
        stored = set(done.loc[mine, "rep"].astype(int))
        todo = [r for r in range(per_cell[i]) if r not in stored]
        if not todo:
            continue
        rows = pd.DataFrame(Parallel(n_jobs=jobs)(delayed(replicate)(i, r) for r in todo))
        done = pd.concat([done, rows], ignore_index=True) if len(done) else rows
        done.to_csv(rows_path, index=False, float_format="%.6g")
        mine = (done[names] == pd.Series(cell)).all(axis=1)
        print(summarise(done[mine]).round(3).to_string(index=False), flush=True)
    table = summarise(done)
    table.to_csv(out_path, index=False, float_format="%.6g")
    print(table.round(3).to_string(index=False))
    print(f"wrote {out_path}")
    return table
