"""The resumable cell runner the check scripts under ``simulations/`` share."""

import importlib.util
from pathlib import Path

import pandas as pd

_SPEC = importlib.util.spec_from_file_location(
    "_check", Path(__file__).parents[1] / "simulations" / "_check.py")
_check = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_check)

CELLS = [{"design": "a"}, {"design": "b"}]


def _replicate(cell, rep):
    return {"design": CELLS[cell]["design"], "rep": rep, "value": 10 * cell + rep}


def _summarise(rows):
    return rows.groupby("design", sort=False).agg(reps=("rep", "size"),
                                                  total=("value", "sum")).reset_index()


def test_a_rerun_adds_only_the_missing_replications(tmp_path):
    rows, out = tmp_path / "rows.csv", tmp_path / "out.csv"
    first = _check.run_cells(CELLS, _replicate, _summarise, reps=2, rows_path=rows,
                             out_path=out, jobs=1)
    assert first["reps"].tolist() == [2, 2]
    calls = []

    def counted(cell, rep):
        calls.append((cell, rep))
        return _replicate(cell, rep)

    again = _check.run_cells(CELLS, counted, _summarise, reps=2, rows_path=rows, out_path=out,
                             jobs=1)
    assert calls == []
    pd.testing.assert_frame_equal(again, first)
    extended = _check.run_cells(CELLS, counted, _summarise, reps=4, rows_path=rows,
                                out_path=out, jobs=1)
    assert calls == [(0, 2), (0, 3), (1, 2), (1, 3)]
    assert extended["reps"].tolist() == [4, 4]
    assert extended["total"].tolist() == [0 + 1 + 2 + 3, 40 + 6]
    stored = pd.read_csv(rows)
    assert sorted(zip(stored["design"], stored["rep"], strict=True)) == [
        (d, r) for d in "ab" for r in range(4)]


def test_reps_can_differ_by_cell(tmp_path):
    table = _check.run_cells(CELLS, _replicate, _summarise, reps=[1, 3],
                             rows_path=tmp_path / "rows.csv", out_path=tmp_path / "out.csv",
                             jobs=1)
    assert table["reps"].tolist() == [1, 3]
