"""A rank's training state as (kind, tensor, box) entries, and the bounded-staging executor that
streams it between workers following a :class:`~.plan.Plan`.

Memory during a live transfer: the staging buffers (at most the plan's bound ``B`` per worker)
plus the destination shards of the new layout, preallocated during preparation. A worker that
stays therefore holds its old and its new shard until the commit (the old one is what an abort
falls back to); no worker ever holds a second copy of the whole model.
"""

from __future__ import annotations

import time
import zlib

import numpy as np
import torch

from .plan import Box, Plan, relative_slices

__all__ = ["local_state", "box_key", "parse_box_key", "execute_plan", "save_npz"]


def local_state(stage, optimizer) -> dict[tuple[str, str], tuple[torch.Tensor, Box]]:
    """``{(kind, name): (tensor, global box)}`` for parameters and Adam moments of one rank."""
    out = {("param", n): (p, stage.boxes[n]) for n, p in stage.params.items()}
    for key, t in optimizer.state.items():
        out[key] = (t, optimizer.boxes[key])
    return out


def box_key(kind: str, name: str, box: Box) -> str:
    return f"{kind}|{name}|" + ",".join(f"{a}:{b}" for a, b in box)


def parse_box_key(key: str) -> tuple[str, str, Box]:
    kind, name, box = key.split("|")
    return kind, name, tuple(tuple(int(v) for v in part.split(":")) for part in box.split(","))


def _crc(t: torch.Tensor) -> int:
    return zlib.crc32(t.detach().contiguous().numpy().tobytes())


def execute_plan(plan: Plan, me: int, comm, group_rank: dict[int, int], src_state, dst_state,
                 on_batch=None) -> dict:
    """Run ``me``'s part of ``plan``.

    Local copies go straight from ``src_state`` to ``dst_state``. Network transfers run batch by
    batch: the worker packs what it sends into contiguous send buffers, receives into receive
    buffers, waits for the batch, then copies the received pieces into place and frees the
    buffers, so its staging never exceeds the plan's bound. Returns the CRC32 of every piece it
    sent (by destination worker) and received, the staging bytes it actually allocated and
    ``place_s``, the seconds spent writing pieces into the new layout's shards (local copies and
    received buffers: the re-layout part of the transfer).
    """
    sent: dict[int, dict[int, int]] = {}
    received: dict[int, tuple[int, int]] = {}
    peak, place_s = 0, 0.0
    mine = plan.for_worker(me)
    with torch.no_grad():
        t0 = time.perf_counter()
        for t in mine:
            if t.local:
                src, src_box = src_state[(t.kind, t.name)]
                dst, dst_box = dst_state[(t.kind, t.name)]
                dst[relative_slices(t.box, dst_box)] = src[relative_slices(t.box, src_box)]
        place_s += time.perf_counter() - t0
        by_batch: dict[int, list] = {}
        for t in mine:
            if not t.local:
                by_batch.setdefault(t.batch, []).append(t)
        for b in sorted(by_batch):
            works, recvs, staged = [], [], 0
            for t in by_batch[b]:
                if t.src_worker == me:
                    src, src_box = src_state[(t.kind, t.name)]
                    buf = src[relative_slices(t.box, src_box)].contiguous().clone()
                    sent.setdefault(t.dst_worker, {})[t.task] = _crc(buf)
                    works.append(comm.isend(buf, group_rank[t.dst_worker], t.task))
                else:
                    dst, _ = dst_state[(t.kind, t.name)]
                    buf = torch.empty([hi - lo for lo, hi in t.box], dtype=dst.dtype)
                    works.append(comm.irecv(buf, group_rank[t.src_worker], t.task))
                    recvs.append((t, buf))
                staged += buf.numel() * buf.element_size()
            peak = max(peak, staged)
            for w in works:
                w.wait()
            for t, buf in recvs:
                dst, dst_box = dst_state[(t.kind, t.name)]
                t0 = time.perf_counter()
                dst[relative_slices(t.box, dst_box)] = buf
                place_s += time.perf_counter() - t0
                received[t.task] = (t.src_worker, _crc(buf))
            del works, recvs
            if on_batch is not None:
                on_batch(b)
    return {"sent": sent, "received": received, "peak_staging_bytes": peak, "place_s": place_s}


def save_npz(path, state) -> None:
    """Write ``{(kind, name): (tensor, box)}`` to ``path`` (numpy ``.npz``, no pickle)."""
    arrays = {box_key(kind, name, box): t.detach().numpy()
              for (kind, name), (t, box) in state.items()}
    np.savez(path, **arrays)
