"""From event logs to results: downtime phases per reconfiguration, goodput, loss curve, memory.

Definitions (all times from the workers' and coordinator's wall clocks on one machine):

* *pause* of an event = first step start in the new world - end of the last step before the cut
  (for an aborted live resize: first step start back in the old world).
* *warm-up excess* = duration of that first step - median step duration of the new generation.
* *downtime* = pause + warm-up excess. Its phases, live: cut (control agreement, drain),
  transfer, verify, commit (coordinator decision), switch; restart: save (DCP), teardown (all
  processes exit), start + import (torchrun launch to imports done), rendezvous (groups built),
  load (DCP read + reshard), resume. Background preparation (live) overlaps training and is
  reported separately (``prepare_s``), not as downtime.
* *reshape* of an event = seconds the last worker to finish its transfer (live) or its load
  (restart) spent writing pieces into the new layout's shards (re-layout); it is part of the
  transfer / load phase.
* *parts* of the downtime (:func:`downtime_parts`, the same five for both modes): process start
  (restart: start + import), state move (live: transfer + verify; restart: save + load; both
  without the reshape), reshape, coordination (live: cut + commit; restart: teardown +
  rendezvous) and resume (live: switch; restart: resume; both plus the warm-up excess). The
  phases tile the pause, so the parts sum to the downtime up to floating-point rounding.
* *goodput* = 1 - sum(downtime) / (last step end - first step start).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from .layout import ModelSpec
from .plan import relative_slices
from .state import parse_box_key

__all__ = ["phase_table", "downtime_parts", "loss_curve", "goodput", "assemble_dumps"]

LIVE_PHASES = ("cut", "transfer", "verify", "commit", "switch")
RESTART_PHASES = ("save", "teardown", "start_import", "rendezvous", "load", "resume")
#: Downtime parts per mode: part -> the phase columns it sums ("-" subtracts one).
PARTS = {
    "live": {"process_start": (), "state_move": ("transfer", "verify", "-reshape"),
             "reshape": ("reshape",), "coordination": ("cut", "commit"),
             "resume": ("switch", "warmup_excess_s")},
    "restart": {"process_start": ("start_import",), "state_move": ("save", "load", "-reshape"),
                "reshape": ("reshape",), "coordination": ("teardown", "rendezvous"),
                "resume": ("resume", "warmup_excess_s")},
}


def _first(df, ev, gen, how="max"):
    sel = df[(df.ev == ev) & (df.gen == gen)]
    return float(getattr(sel.t, how)()) if len(sel) else np.nan


def _of_last(df, ev, gen, column) -> float:
    """``column`` of the last ``ev`` event of ``gen`` (the worker that finished last)."""
    sel = df[(df.ev == ev) & (df.gen == gen)]
    if not len(sel) or column not in sel:
        return np.nan
    return float(sel.loc[sel.t.idxmax(), column])


def _steps(df: pd.DataFrame) -> pd.DataFrame:
    st = df[df.ev == "step"].copy()
    st["duration"] = st.t - st.t0
    return st


def phase_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per reconfiguration event: outcome, phases (seconds), pause, downtime."""
    df = events
    steps = _steps(df)
    rows = []
    for _, notice in df[df.ev == "notice"].iterrows():
        g, mode = int(notice.gen), notice["mode"]
        decision = df[(df.ev == "decision") & (df.gen == g) & (df.wid == -1)]
        outcome = decision["decision"].iloc[0] if len(decision) else "commit"
        start_ev = "transfer_start" if mode == "live" else "save_start"
        starts = df[(df.ev == start_ev) & (df.gen == g)]
        if not len(starts):  # aborted before any cut (e.g. training ended first)
            rows.append({"gen": g, "mode": mode, "old_layout": notice.old_layout,
                         "new_layout": notice.new_layout, "outcome": outcome})
            continue
        cut = int(starts.step.max())
        t_cut = float(starts.t.min())
        before = steps[(steps.step == cut - 1) & (steps.t <= t_cut)]
        t_last = float(before.t.max())
        after = steps[(steps.step >= cut) & (steps.t0 > t_last)]
        after = after[after.gen == (g if outcome == "commit" else after.gen.min())]
        first = after[after.step == cut]
        t_resume = float(first.t0.max())
        steady = after[after.step > cut + 1].duration
        excess = max(float(first.duration.max() - steady.median()), 0.0) if len(steady) else 0.0
        row = {"gen": g, "mode": mode, "old_layout": notice.old_layout,
               "new_layout": notice.new_layout, "outcome": outcome, "cut_step": cut,
               "notice_to_cut_s": t_last - float(notice.t)}
        if mode == "live":
            t_te = _first(df, "transfer_end", g)
            t_ve = _first(df, "verify_end", g)
            t_de = float(decision.t.iloc[0])
            if outcome == "commit":
                row.update(cut=t_cut - t_last, transfer=t_te - t_cut, verify=t_ve - t_te,
                           commit=t_de - t_ve, switch=t_resume - t_de,
                           reshape=_of_last(df, "transfer_end", g, "place_s"))
            else:
                row.update(cut=t_cut - t_last, transfer=t_de - t_cut, verify=np.nan,
                           commit=np.nan, switch=t_resume - t_de)
            row["prepare_s"] = _first(df, "prepare_end", g) - float(notice.t)
            xs = df[(df.ev == "transfer_end") & (df.gen == g)]
            row["peak_staging_bytes"] = float(xs.peak_staging_bytes.max()) if len(xs) else 0.0
        else:
            t_se = _first(df, "save_end", g)
            t_td = _first(df, "teardown_end", g)
            t_im = _first(df, "imported", g)
            t_wb = _first(df, "world_built", g)
            t_ld = _first(df, "loaded", g)
            row.update(save=t_se - t_last, teardown=t_td - t_se, start_import=t_im - t_td,
                       rendezvous=t_wb - t_im, load=t_ld - t_wb, resume=t_resume - t_ld,
                       reshape=_of_last(df, "loaded", g, "place_s"))
        row.update(pause_s=t_resume - t_last, warmup_excess_s=excess,
                   downtime_s=t_resume - t_last + excess)
        rows.append(row)
    return pd.DataFrame(rows)


def downtime_parts(phases: pd.DataFrame) -> pd.DataFrame:
    """The committed events of ``phases`` (rows of :func:`phase_table`, both modes, any extra
    columns kept) with the five downtime parts (seconds, see the module docstring) and their
    sum ``parts_sum_s`` added. A phase that was not measured (an older log without
    ``reshape``) counts as zero."""
    if "mode" not in phases or "downtime_s" not in phases:
        raise ValueError("phases must be rows of phase_table (columns 'mode', 'downtime_s')")
    keep = phases["downtime_s"].notna()
    if "outcome" in phases:
        keep &= phases["outcome"].fillna("commit") == "commit"
    out = phases[keep].copy()

    def value(row, column):
        sign, column = (-1.0, column[1:]) if column.startswith("-") else (1.0, column)
        return sign * float(row[column]) if column in row and pd.notna(row[column]) else 0.0

    rows = [{part: sum(value(row, c) for c in cols) for part, cols in PARTS[row["mode"]].items()}
            for _, row in out.iterrows()]
    parts = pd.DataFrame(rows, index=out.index, columns=list(PARTS["live"]), dtype=float)
    out[parts.columns] = parts
    out["parts_sum_s"] = parts.sum(axis=1)
    return out


def loss_curve(events: pd.DataFrame) -> pd.DataFrame:
    """``step, loss, gen, layout`` of the reported (last-stage) losses, in step order; after an
    aborted resize the steps are not repeated."""
    st = _steps(events)
    st = st[st.loss.notna()].sort_values("t")
    st = st.drop_duplicates("step", keep="last")
    return st[["step", "loss", "gen", "layout", "t0", "t"]].reset_index(drop=True)


def goodput(events: pd.DataFrame, phases: pd.DataFrame) -> float:
    st = _steps(events)
    wall = float(st.t.max() - st.t0.min())
    lost = float(phases.downtime_s.sum()) if len(phases) else 0.0
    return 1.0 - lost / wall


def assemble_dumps(run_dir, gen: int, when: str, spec: ModelSpec):
    """Logical tensors rebuilt from the ``when`` dumps of resize ``gen``, and their SHA-256.

    Every element must be written by some shard, and overlapping shards (replicas) must agree
    bit for bit; otherwise ``ValueError``.
    """
    dtype = np.float32 if spec.dtype == "float32" else np.float64
    full: dict[str, np.ndarray] = {}
    seen: dict[str, np.ndarray] = {}
    files = sorted(Path(run_dir).glob(f"dump-g{gen}-{when}-w*.npz"))
    if not files:
        raise FileNotFoundError(f"no {when} dumps for generation {gen} in {run_dir}")
    for path in files:
        with np.load(path, allow_pickle=False) as npz:
            for key in npz.files:
                kind, name, box = parse_box_key(key)
                shape = spec.tensor(name).shape
                k = f"{kind}|{name}"
                if k not in full:
                    full[k] = np.zeros(shape, dtype=dtype)
                    seen[k] = np.zeros(shape, dtype=bool)
                sl = relative_slices(box, tuple((0, s) for s in shape))
                value = npz[key]
                region_seen = seen[k][sl]
                if np.any(region_seen) and (full[k][sl][region_seen].tobytes()
                                            != value[region_seen].tobytes()):
                    raise ValueError(f"replicas of {k} disagree in {path.name}")
                full[k][sl] = value
                seen[k][sl] = True
    for k, mask in seen.items():
        if not mask.all():
            raise ValueError(f"{k} is not fully covered by the {when} shards")
    digests = {k: hashlib.sha256(v.tobytes()).hexdigest() for k, v in sorted(full.items())}
    return full, digests
