"""The resharding plan: which bytes move from which old rank to which new rank.

``reshard_plan`` is a pure function of the two layouts and the model description. For every
logical tensor (parameters and both Adam moments) and every index box a rank of the new layout
must hold, it intersects that box with the boxes held in the old layout; each non-empty
intersection is exactly one transfer (split into chunks no larger than the staging bound). This is
the intersection planner of Megatron-Core's resharding module and of LiveR (Liu et al., "Fine-
Grained Elasticity via Live Reconfiguration for Model Training", arXiv 2605.22014, 2026):

* TP: a tensor split on dimension ``d`` in ``k`` parts gives old rank ``i`` the rows
  ``[i n/k, (i+1) n/k)`` and new rank ``j`` the rows ``[j n/k', (j+1) n/k')``; their overlap moves.
* PP: a change in the stage count moves whole layers between stages (the boxes are whole tensors).
* DP: replicas are identical; each destination box takes one source replica -- a replica on the same
  worker (local copy) if there is one, else the least-loaded sender, spreading the load.
* ZeRO-1 optimizer state: each parameter's TP shard is split along its first dimension across the DP
  ranks; those sub-boxes are intersected like any other box.

Network transfers are grouped into batches so that no worker ever stages more than
``staging_bytes`` at once (its send plus receive buffers); local copies need no staging.
Everything (plan size, per-worker peak staging) is known before anything runs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from causalkit._validation import check_positive_int

from .layout import STATE_KINDS, ModelSpec, ParallelLayout, even_split

__all__ = ["Box", "Holding", "Transfer", "Plan", "holdings", "reshard_plan", "relative_slices",
           "box_numel"]

Box = tuple[tuple[int, int], ...]


class Holding(NamedTuple):
    """Rank ``rank`` holds index box ``box`` of state ``kind`` of tensor ``name``."""

    rank: int
    kind: str
    name: str
    box: Box


def box_numel(box: Box) -> int:
    return math.prod(stop - start for start, stop in box)


def _intersect(a: Box, b: Box) -> Box | None:
    out = tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(a, b, strict=True))
    return out if all(lo < hi for lo, hi in out) else None


def relative_slices(box: Box, outer: Box) -> tuple[slice, ...]:
    """Slices that select global ``box`` inside a local array holding global box ``outer``."""
    return tuple(slice(b0 - o0, b1 - o0) for (b0, b1), (o0, _) in zip(box, outer, strict=True))


def holdings(layout: ParallelLayout, spec: ModelSpec) -> list[Holding]:
    """Every (rank, kind, tensor, box) of ``layout``, in rank / tensor / kind order.

    Parameters are held whole-TP-shard by every DP replica; each Adam moment of a TP shard is split
    along its first dimension across the DP ranks (ZeRO-1). Empty boxes are omitted.
    """
    spec.validate(layout)
    out = []
    for rank in range(layout.world_size):
        c = layout.coords(rank)
        for t in spec.tensors:
            if spec.stage_of(t, layout.pp) != c.pp:
                continue
            local = [(0, s) for s in t.shape]
            if t.tp_dim is not None:
                local[t.tp_dim] = even_split(t.shape[t.tp_dim], layout.tp, c.tp)
            local = tuple(local)
            out.append(Holding(rank, "param", t.name, local))
            r0, r1 = local[0]
            d0, d1 = even_split(r1 - r0, layout.dp, c.dp)
            shard = ((r0 + d0, r0 + d1),) + local[1:]
            if box_numel(shard):
                for kind in STATE_KINDS[1:]:
                    out.append(Holding(rank, kind, t.name, shard))
    return out


@dataclass(frozen=True)
class Transfer:
    """One piece of state moving from old rank ``src`` to new rank ``dst``.

    ``box`` is the global index box moved; ``src_box`` / ``dst_box`` are the boxes the source and
    destination hold (to locate ``box`` inside their local arrays). ``batch`` is the staging batch
    (-1 for a local copy, i.e. same worker on both sides).
    """

    task: int
    kind: str
    name: str
    box: Box
    src: int
    dst: int
    src_worker: int
    dst_worker: int
    src_box: Box
    dst_box: Box
    nbytes: int
    batch: int

    @property
    def local(self) -> bool:
        return self.src_worker == self.dst_worker


@dataclass(frozen=True)
class Plan:
    """A complete resharding plan (see :func:`reshard_plan`)."""

    old_layout: ParallelLayout
    new_layout: ParallelLayout
    old_workers: tuple[int, ...]
    new_workers: tuple[int, ...]
    staging_bytes: int
    transfers: tuple[Transfer, ...]
    n_batches: int

    @property
    def network_bytes(self) -> int:
        return sum(t.nbytes for t in self.transfers if not t.local)

    @property
    def local_bytes(self) -> int:
        return sum(t.nbytes for t in self.transfers if t.local)

    @property
    def total_bytes(self) -> int:
        return self.network_bytes + self.local_bytes

    def batch_load(self) -> dict[tuple[int, int], int]:
        """Staged bytes per (batch, worker): the worker's send plus receive buffers."""
        load: dict[tuple[int, int], int] = defaultdict(int)
        for t in self.transfers:
            if not t.local:
                load[(t.batch, t.src_worker)] += t.nbytes
                load[(t.batch, t.dst_worker)] += t.nbytes
        return dict(load)

    @property
    def peak_staging(self) -> dict[int, int]:
        """Largest number of bytes each worker stages at once."""
        peak: dict[int, int] = defaultdict(int)
        for (_, worker), n in self.batch_load().items():
            peak[worker] = max(peak[worker], n)
        return dict(peak)

    @property
    def peak_staging_bytes(self) -> int:
        return max(self.peak_staging.values(), default=0)

    def for_worker(self, worker: int) -> list[Transfer]:
        """Transfers that ``worker`` sends or receives, in task order."""
        return [t for t in self.transfers if worker in (t.src_worker, t.dst_worker)]

    def summary(self) -> str:
        """The plan's size and staging figures of :meth:`to_dict` as text, one per line."""
        return "\n".join(f"{k:<18} {v}" for k, v in self.to_dict().items())

    def to_dict(self) -> dict:
        """Layouts, number of transfers and batches, bytes moved and staged."""
        return {"old_layout": str(self.old_layout), "new_layout": str(self.new_layout),
                "transfers": len(self.transfers), "batches": self.n_batches,
                "network_bytes": self.network_bytes, "local_bytes": self.local_bytes,
                "peak_staging_bytes": self.peak_staging_bytes,
                "staging_bytes": self.staging_bytes}


def _chunks(box: Box, itemsize: int, limit: int, dim: int = 0):
    """Split ``box`` into sub-boxes of at most ``limit`` bytes (row blocks, recursing inwards)."""
    if box_numel(box) * itemsize <= limit:
        yield box
        return
    inner = box_numel(box[dim + 1:]) * itemsize
    start, stop = box[dim]
    if inner <= limit:
        step = limit // inner
        for s in range(start, stop, step):
            yield box[:dim] + ((s, min(s + step, stop)),) + box[dim + 1:]
    else:
        for s in range(start, stop):
            yield from _chunks(box[:dim] + ((s, s + 1),) + box[dim + 1:], itemsize, limit, dim + 1)


def _check_workers(workers, size: int, name: str) -> tuple[int, ...]:
    if workers is None:
        return tuple(range(size))
    workers = tuple(workers)
    if len(workers) != size:
        raise ValueError(f"{name} must list {size} workers (the layout's world size); "
                         f"got {len(workers)}")
    if len(set(workers)) != size or not all(isinstance(w, int) and w >= 0 for w in workers):
        raise ValueError(f"{name} must be distinct non-negative ints; got {list(workers)}")
    return workers


def reshard_plan(old_layout: ParallelLayout, new_layout: ParallelLayout, model_spec: ModelSpec,
                 *, old_workers=None, new_workers=None, staging_bytes: int = 8 << 20,
                 source: str = "spread") -> Plan:
    """Plan the move of all training state from ``old_layout`` to ``new_layout``.

    Parameters
    ----------
    old_layout, new_layout : ParallelLayout
        Layouts before and after; both must be valid for ``model_spec``.
    model_spec : ModelSpec
        The logical tensors.
    old_workers, new_workers : sequence of int, optional
        Worker id of each old / new rank (default ``0..N-1``: workers are kept in order, joiners
        appended, leavers taken from the end). A transfer between ranks on the same worker is a
        local copy.
    staging_bytes : int
        Bound ``B`` on the bytes any worker stages at once; transfers are chunked to at most ``B``
        and batched so that every worker's send + receive bytes in a batch stay <= ``B``.
    source : {"spread", "primary"}
        Replica choice: ``"spread"`` prefers a same-worker replica, else the least-loaded sender;
        ``"primary"`` always reads the first holder (what a deduplicated checkpoint stores).

    Returns
    -------
    Plan
        Every byte of every destination box is assigned to exactly one transfer.
    """
    model_spec.validate(old_layout, name="old_layout")
    model_spec.validate(new_layout, name="new_layout")
    old_workers = _check_workers(old_workers, old_layout.world_size, "old_workers")
    new_workers = _check_workers(new_workers, new_layout.world_size, "new_workers")
    staging_bytes = check_positive_int(staging_bytes, "staging_bytes")
    if staging_bytes < model_spec.itemsize:
        raise ValueError(f"staging_bytes must hold one element ({model_spec.itemsize} bytes); "
                         f"got {staging_bytes}")
    if source not in ("spread", "primary"):
        raise ValueError(f"source must be 'spread' or 'primary'; got {source!r}")
    itemsize = model_spec.itemsize

    # Old boxes per (kind, tensor): distinct boxes, each with the ranks that hold a copy.
    old_boxes: dict[tuple[str, str], dict[Box, list[int]]] = defaultdict(dict)
    for h in holdings(old_layout, model_spec):
        old_boxes[(h.kind, h.name)].setdefault(h.box, []).append(h.rank)

    sent: dict[int, int] = defaultdict(int)
    pieces = []
    for h in holdings(new_layout, model_spec):
        dst_worker = new_workers[h.rank]
        for src_box, holders in old_boxes[(h.kind, h.name)].items():
            box = _intersect(h.box, src_box)
            if box is None:
                continue
            nbytes = box_numel(box) * itemsize
            local = [r for r in holders if old_workers[r] == dst_worker]
            if source == "primary":
                src = holders[0]
            elif local:
                src = local[0]
            else:
                src = min(holders, key=lambda r: (sent[old_workers[r]], r))
                sent[old_workers[src]] += nbytes
            chunks = [box] if old_workers[src] == dst_worker else _chunks(box, itemsize,
                                                                          staging_bytes)
            for chunk in chunks:
                pieces.append((h, src, src_box, chunk))

    transfers, batch, load = [], 0, defaultdict(int)
    for task, (h, src, src_box, chunk) in enumerate(pieces):
        src_worker, dst_worker = old_workers[src], new_workers[h.rank]
        nbytes = box_numel(chunk) * itemsize
        if src_worker == dst_worker:
            b = -1
        else:
            if load and (load[src_worker] + nbytes > staging_bytes
                         or load[dst_worker] + nbytes > staging_bytes):
                batch, load = batch + 1, defaultdict(int)
            load[src_worker] += nbytes
            load[dst_worker] += nbytes
            b = batch
        transfers.append(Transfer(task, h.kind, h.name, chunk, src, h.rank, src_worker,
                                  dst_worker, src_box, h.box, nbytes, b))
    n_batches = batch + 1 if any(not t.local for t in transfers) else 0
    return Plan(old_layout, new_layout, old_workers, new_workers, staging_bytes,
                tuple(transfers), n_batches)
