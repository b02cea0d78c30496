"""One training step: the non-interleaved 1F1B pipeline schedule over gloo send/recv.

Stage ``s`` of ``pp`` runs ``min(pp - s - 1, M)`` warm-up forwards, then alternates one forward
and one backward, then drains the remaining backwards (Narayanan et al., "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", SC 2021). Paired transfers
(send-forward / receive-backward and vice versa) are posted together and then waited on, so the
schedule cannot deadlock. At the end of the step the pipeline is drained -- the consistent cut at
which a resize may happen. Then ZeRO-1 Adam steps.
"""

from __future__ import annotations

import torch

from .model import make_batch

__all__ = ["train_step", "train_single_process"]

_FWD, _BWD = 1, 2


def _wait(works):
    for w in works:
        w.wait()


def train_step(stage, optimizer, world, dp_comm, step: int) -> float | None:
    """Run optimizer step ``step`` (0-based index of the batch); returns the global mean loss on
    the last stage (``None`` elsewhere)."""
    spec, layout, c = stage.spec, stage.layout, stage.coords
    n_micro = spec.micro_batches
    mbs = spec.micro_batch_size(layout.dp)
    tokens, targets = make_batch(spec, step)
    share = spec.global_batch // layout.dp
    tokens = tokens[c.dp * share:(c.dp + 1) * share].split(mbs)
    targets = targets[c.dp * share:(c.dp + 1) * share].split(mbs)
    shape = (mbs, spec.seq, spec.dim)
    dtype = next(iter(stage.params.values())).dtype
    prev = layout.rank(c.pp - 1, c.dp, c.tp) if not stage.first else None
    nxt = layout.rank(c.pp + 1, c.dp, c.tp) if not stage.last else None
    loss_sum = torch.zeros(1, dtype=dtype)

    def recv(src, tag):
        buf = torch.empty(shape, dtype=dtype)
        return buf, world.irecv(buf, src, tag)

    def forward(x, i):
        y = stage.forward(tokens[i] if stage.first else x)
        if stage.last:
            y = stage.loss(y, targets[i])
            loss_sum.add_(y.detach())
        return y

    def backward(x, y, dy):
        if stage.last:
            y.backward()
        else:
            y.backward(dy)
        return None if stage.first else x.grad

    def recv_forward():
        if stage.first:
            return None
        buf, w = recv(prev, _FWD)
        w.wait()
        return buf.requires_grad_(True)

    warmup = min(layout.pp - c.pp - 1, n_micro)
    inputs, outputs = [], []
    for i in range(warmup):
        x = recv_forward()
        y = forward(x, i)
        if nxt is not None:
            world.isend(y.detach(), nxt, _FWD).wait()
        inputs.append(x)
        outputs.append(y)
    x = recv_forward() if n_micro > warmup else None
    for j in range(n_micro - warmup):
        y = forward(x, warmup + j)
        inputs.append(x)
        outputs.append(y)
        works, dy = [], None
        if nxt is not None:
            works.append(world.isend(y.detach(), nxt, _FWD))
            dy, w = recv(nxt, _BWD)
            works.append(w)
        _wait(works)
        dx = backward(inputs.pop(0), outputs.pop(0), dy)
        last = j == n_micro - warmup - 1
        works = []
        if prev is not None:
            works.append(world.isend(dx, prev, _BWD))
            if not last:
                x, w = recv(prev, _FWD)
                works.append(w)
        _wait(works)
        if prev is not None and not last:
            x.requires_grad_(True)
        elif stage.first and not last:
            x = None
    for _ in range(warmup):
        dy, w = recv(nxt, _BWD)
        w.wait()
        dx = backward(inputs.pop(0), outputs.pop(0), dy)
        if prev is not None:
            world.isend(dx, prev, _BWD).wait()
    optimizer.step(step + 1)
    if stage.last:
        dp_comm.all_reduce(loss_sum)
        return float(loss_sum.item())
    return None


def train_single_process(spec, steps: int) -> list[float]:
    """Losses of ``steps`` optimizer steps on one rank (layout 1x1x1, no communication).

    Any layout with ``tp = dp = 1`` performs exactly the same floating-point operations (the
    pipeline only moves activations), so its trajectory equals this one bit for bit; other
    layouts agree up to summation order. Runs with one intra-op thread, like the workers.
    """
    from .comm import MockComm
    from .layout import ParallelLayout
    from .model import Stage
    from .optim import ZeroAdam

    layout = ParallelLayout(1, 1, 1)
    solo = MockComm(1, 0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # workers run single-threaded; kernels' blocking depends on it
    try:
        stage = Stage(spec, layout, 0, solo, init=True)
        opt = ZeroAdam(stage, solo, 1, 0, spec.lr)
        return [train_step(stage, opt, solo, solo, s) for s in range(steps)]
    finally:
        torch.set_num_threads(threads)
