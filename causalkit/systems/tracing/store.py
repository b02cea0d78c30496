"""The metrics store: one SQLite file per rank in a directory (the stand-in for Prometheus).

Each rank's processor owns ``rank<r>.sqlite`` (WAL journal, so diagnosis can read while a run is
still writing) with tables ``iterations``, ``phases``, ``stacks``, ``windows`` (one compressed
kernel summary per profiler window, as a checksummed blob) and ``meta`` (run configuration and
the producer's counters: events emitted, dropped on overflow, internal errors). Reading validates
every file and raises :class:`~causalkit.systems.tracing.events.TraceFileError` naming the file
when it is corrupt, truncated or not a trace store.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pandas as pd

from causalkit.systems.tracing.compression import KernelSummary
from causalkit.systems.tracing.events import TraceFileError

__all__ = ["TraceStore", "StoreWriter", "MemoryStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS iterations (rank INTEGER, step INTEGER, start_ns INTEGER,
                                       duration_ns INTEGER);
CREATE TABLE IF NOT EXISTS phases (rank INTEGER, step INTEGER, phase TEXT, grp TEXT,
                                   start_ns INTEGER, duration_ns INTEGER, nbytes INTEGER,
                                   cpu_ns INTEGER);
CREATE TABLE IF NOT EXISTS stacks (rank INTEGER, timestamp_ns INTEGER, thread_id INTEGER,
                                   frames TEXT);
CREATE TABLE IF NOT EXISTS windows (rank INTEGER, window_id INTEGER, step INTEGER,
                                    n_events INTEGER, raw_bytes INTEGER, summary_bytes INTEGER,
                                    summary BLOB);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""
_TABLES = ("iterations", "phases", "stacks", "windows", "meta")
_FILE = re.compile(r"^rank(\d+)\.sqlite$")


class StoreWriter:
    """Writes one rank's records; use from a single thread (the processor)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(self.path, timeout=30)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=NORMAL")
        self._con.executescript(_SCHEMA)

    def write(self, table: str, rows: list[tuple]) -> None:
        """Append rows (tuples in the table's column order) and commit."""
        if not rows:
            return
        marks = ",".join("?" * len(rows[0]))
        with self._con:
            self._con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)

    def set_meta(self, values: dict) -> None:
        """Upsert JSON-encoded metadata."""
        with self._con:
            self._con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                  [(k, json.dumps(v)) for k, v in values.items()])

    def close(self) -> None:
        self._con.close()


class TraceStore:
    """A directory of per-rank trace databases.

    Parameters
    ----------
    root : str or Path
        The directory (created on first write).
    """

    def __init__(self, root):
        if not isinstance(root, (str, Path)):
            raise TypeError(f"root must be a path; got {type(root).__name__}")
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"TraceStore({str(self.root)!r})"

    def writer(self, rank: int) -> StoreWriter:
        """A writer for ``rank``'s database."""
        return StoreWriter(self.root / f"rank{int(rank)}.sqlite")

    def files(self) -> dict[int, Path]:
        """rank -> database path, for every rank file present."""
        if not self.root.is_dir():
            raise FileNotFoundError(f"trace store {str(self.root)!r} does not exist")
        found = {int(m.group(1)): p for p in self.root.iterdir() if (m := _FILE.match(p.name))}
        if not found:
            raise TraceFileError(f"trace store {str(self.root)!r} holds no rank*.sqlite files")
        return dict(sorted(found.items()))

    @property
    def ranks(self) -> list[int]:
        return list(self.files())

    def _query(self, sql: str, params: tuple = (), ranks=None) -> pd.DataFrame:
        files = self.files()
        if ranks is not None:
            unknown = sorted(set(ranks) - set(files))
            if unknown:
                raise ValueError(f"ranks {unknown} are not in the trace store (it has "
                                 f"{sorted(files)})")
            files = {r: files[r] for r in ranks}
        frames = []
        for _rank, path in files.items():
            try:
                # a percent-encoded file URI: '#' or '?' in a folder name stays part of the
                # path, and mode=ro never creates a file
                con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                      timeout=30)
                try:
                    names = {r[0] for r in con.execute(
                        "SELECT name FROM sqlite_master WHERE type='table'")}
                    missing = sorted(set(_TABLES) - names)
                    if missing:
                        raise TraceFileError(f"trace file {str(path)!r} lacks tables {missing}")
                    frames.append(pd.read_sql_query(sql, con, params=params))
                finally:
                    con.close()
            except sqlite3.DatabaseError as exc:
                raise TraceFileError(f"trace file {str(path)!r} is corrupt or truncated: "
                                     f"{exc}") from exc
        frames = [f for f in frames if not f.empty]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    @staticmethod
    def _steps_clause(steps) -> tuple[str, tuple]:
        if steps is None:
            return "", ()
        lo, hi = steps
        return " WHERE step >= ? AND step < ?", (int(lo), int(hi))

    def iterations(self, steps=None, ranks=None) -> pd.DataFrame:
        """rank, step, start_ns, duration_ns (``steps=(lo, hi)`` keeps lo <= step < hi)."""
        where, params = self._steps_clause(steps)
        return self._query("SELECT * FROM iterations" + where, params, ranks)

    def phases(self, steps=None, ranks=None) -> pd.DataFrame:
        """rank, step, phase, grp, start_ns, duration_ns, nbytes, cpu_ns (the training
        thread's CPU time; NULL where not measured, and absent from older stores)."""
        where, params = self._steps_clause(steps)
        return self._query("SELECT * FROM phases" + where, params, ranks)

    def stacks(self, ranks=None) -> pd.DataFrame:
        """rank, timestamp_ns, thread_id, frames (``;``-joined, outermost first)."""
        return self._query("SELECT * FROM stacks", (), ranks)

    def windows(self, steps=None, ranks=None) -> pd.DataFrame:
        """Profiler windows: rank, window_id, step, n_events, raw_bytes, summary_bytes."""
        where, params = self._steps_clause(steps)
        return self._query("SELECT rank, window_id, step, n_events, raw_bytes, summary_bytes "
                           "FROM windows" + where, params, ranks)

    def kernel_summaries(self, steps=None, ranks=None) -> list[KernelSummary]:
        """The compressed kernel summaries of every window in ``steps``."""
        where, params = self._steps_clause(steps)
        frame = self._query("SELECT summary FROM windows" + where, params, ranks)
        return [] if frame.empty else [KernelSummary.from_bytes(b) for b in frame["summary"]]

    def meta(self) -> dict[int, dict]:
        """rank -> metadata (configuration and producer counters)."""
        out: dict[int, dict] = {}
        for rank in self.files():
            rows = self._query("SELECT key, value FROM meta", (), [rank])
            out[rank] = {} if rows.empty else {k: json.loads(v) for k, v in
                                               zip(rows["key"], rows["value"], strict=True)}
        return out


class MemoryStore:
    """An in-memory trace store with the reading interface of :class:`TraceStore`.

    Used for simulated cluster-scale traces (see :class:`SyntheticCluster`), where writing one
    database per rank would dominate the run.

    Parameters
    ----------
    iterations, phases : DataFrame
        Columns as returned by :meth:`TraceStore.iterations` / :meth:`TraceStore.phases`.
    summaries : list of KernelSummary
        One per (rank, window).
    stacks : DataFrame, optional
    meta : dict, optional
        rank -> metadata.
    """

    def __init__(self, iterations: pd.DataFrame, phases: pd.DataFrame, summaries=(),
                 stacks: pd.DataFrame | None = None, meta: dict | None = None):
        self._iterations, self._phases = iterations, phases
        self._summaries = list(summaries)
        self._stacks = stacks if stacks is not None else pd.DataFrame(
            columns=["rank", "timestamp_ns", "thread_id", "frames"])
        self._meta = dict(meta or {})
        self._windows = pd.DataFrame(
            [(g.rank, s.window_id, s.step) for s in self._summaries for g in s.groups[:1]],
            columns=["rank", "window_id", "step"])

    @property
    def ranks(self) -> list[int]:
        return sorted(int(r) for r in self._iterations["rank"].unique())

    def _select(self, frame: pd.DataFrame, steps, ranks) -> pd.DataFrame:
        if ranks is not None:
            unknown = sorted(set(ranks) - set(self.ranks))
            if unknown:
                raise ValueError(f"ranks {unknown} are not in the trace store")
            frame = frame[frame["rank"].isin(list(ranks))]
        if steps is not None:
            frame = frame[(frame["step"] >= steps[0]) & (frame["step"] < steps[1])]
        return frame

    def iterations(self, steps=None, ranks=None) -> pd.DataFrame:
        return self._select(self._iterations, steps, ranks)

    def phases(self, steps=None, ranks=None) -> pd.DataFrame:
        return self._select(self._phases, steps, ranks)

    def stacks(self, ranks=None) -> pd.DataFrame:
        return self._stacks if ranks is None else self._stacks[self._stacks["rank"].isin(ranks)]

    def windows(self, steps=None, ranks=None) -> pd.DataFrame:
        return self._select(self._windows, steps, ranks)

    def kernel_summaries(self, steps=None, ranks=None) -> list[KernelSummary]:
        keep = self._select(self._windows.reset_index(), steps, ranks)["index"]
        return [self._summaries[i] for i in keep]

    def meta(self) -> dict[int, dict]:
        return self._meta
