"""One pipeline stage of the tensor-parallel decoder described by :class:`ModelSpec`.

Column-parallel layers (q, k, v, fc1) split their output features over the TP group and need an
all-reduce of the input gradient in backward; row-parallel layers (o, fc2) split their input
features and all-reduce their output in forward (the ``f`` / ``g`` operators of Megatron-LM,
Shoeybi et al. 2019). Replicated tensors (LayerNorms, row-parallel biases, embeddings, head) get
identical gradients on every TP rank, so they need no extra synchronisation.

Caveat on numerics: the row-parallel all-reduce sums ``tp`` partial products, so a run at another
TP degree adds in another order; fp32 trajectories at different TP degrees therefore agree only to
rounding (about 1e-6 relative per step), float64 ones to about 1e-15. At a fixed layout everything
is deterministic, and the state moved by a resize is bit-exact.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .layout import ModelSpec, ParallelLayout
from .plan import Box, holdings, relative_slices

__all__ = ["Stage", "global_init", "make_batch"]


def _dtype(spec: ModelSpec) -> torch.dtype:
    return torch.float32 if spec.dtype == "float32" else torch.float64


def global_init(spec: ModelSpec, name: str) -> torch.Tensor:
    """The full initial value of logical tensor ``name`` (independent of any layout)."""
    t = spec.tensor(name)
    if t.init == "ones":
        return torch.ones(t.shape, dtype=_dtype(spec))
    if t.init == "zeros":
        return torch.zeros(t.shape, dtype=_dtype(spec))
    gen = torch.Generator().manual_seed(spec.init_seed(name))
    return (torch.randn(t.shape, generator=gen, dtype=torch.float64) * 0.1).to(_dtype(spec))


def make_batch(spec: ModelSpec, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Global batch of optimizer step ``step``: ``(tokens, targets)``, each ``(G, seq)``.

    Each sequence is a random half followed by a copy of it; the target is the next token
    (-100, ignored, at the last position), so the second half is learnable by attention.
    """
    gen = torch.Generator().manual_seed(spec.seed * 7919 + 104729 * (step + 1))
    half = torch.randint(0, spec.vocab, (spec.global_batch, spec.seq // 2), generator=gen)
    tokens = torch.cat([half, half], dim=1)
    targets = torch.full_like(tokens, -100)
    targets[:, :-1] = tokens[:, 1:]
    return tokens, targets


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        ctx.comm.all_reduce(grad)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        y = x.clone()
        comm.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Stage:
    """Parameters (local TP shards) and forward pass of pipeline stage ``coords.pp``.

    Parameters
    ----------
    spec, layout : ModelSpec, ParallelLayout
    rank : int
        Rank in ``layout``.
    tp_comm : Comm or MockComm
        The TP group of this rank.
    init : bool
        Fill the shards from :func:`global_init` (a fresh run); otherwise zeros (a destination
        preallocated for a resize or a checkpoint load).
    """

    def __init__(self, spec: ModelSpec, layout: ParallelLayout, rank: int, tp_comm, *, init: bool):
        self.spec, self.layout, self.rank, self.tp_comm = spec, layout, rank, tp_comm
        self.coords = layout.coords(rank)
        self.first = self.coords.pp == 0
        self.last = self.coords.pp == layout.pp - 1
        self.layers = list(spec.stage_layers(layout.pp, self.coords.pp))
        self.boxes: dict[str, Box] = {}
        self.params: dict[str, torch.Tensor] = {}
        for h in holdings(layout, spec):
            if h.rank != rank or h.kind != "param":
                continue
            if init:
                value = global_init(spec, h.name)[relative_slices(h.box, tuple(
                    (0, s) for s in spec.tensor(h.name).shape))].clone()
            else:
                value = torch.zeros([b - a for a, b in h.box], dtype=_dtype(spec))
            self.params[h.name] = value.requires_grad_(True)
            self.boxes[h.name] = h.box

    def _tp_in(self, x):
        return _CopyToTP.apply(x, self.tp_comm) if self.tp_comm.size > 1 else x

    def _tp_out(self, x):
        return _ReduceFromTP.apply(x, self.tp_comm) if self.tp_comm.size > 1 else x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens ``(B, S)`` on the first stage, activations ``(B, S, dim)`` elsewhere; returns
        logits ``(B, S, vocab)`` on the last stage, activations otherwise."""
        P, s = self.params, self.spec
        d, hd = s.dim, s.dim // s.heads
        heads = s.heads // self.layout.tp
        h = (F.embedding(x, P["embed.weight"]) + P["pos.weight"][: x.shape[1]]
             if self.first else x)
        for i in self.layers:
            p = f"layers.{i}."
            a = self._tp_in(F.layer_norm(h, (d,), P[p + "ln1.weight"], P[p + "ln1.bias"]))
            b, n = a.shape[0], a.shape[1]
            q, k, v = (F.linear(a, P[p + f"attn.{z}.weight"], P[p + f"attn.{z}.bias"])
                       .view(b, n, heads, hd).transpose(1, 2) for z in ("q", "k", "v"))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o = o.transpose(1, 2).reshape(b, n, heads * hd)
            h = h + self._tp_out(F.linear(o, P[p + "attn.o.weight"])) + P[p + "attn.o.bias"]
            m = self._tp_in(F.layer_norm(h, (d,), P[p + "ln2.weight"], P[p + "ln2.bias"]))
            m = F.gelu(F.linear(m, P[p + "mlp.fc1.weight"], P[p + "mlp.fc1.bias"]))
            h = h + self._tp_out(F.linear(m, P[p + "mlp.fc2.weight"])) + P[p + "mlp.fc2.bias"]
        if self.last:
            h = F.layer_norm(h, (d,), P["final_ln.weight"], P["final_ln.bias"])
            return F.linear(h, P["head.weight"])
        return h

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed next-token cross-entropy scaled by the global token count (so gradients summed
        over micro-batches and DP ranks are those of the global mean loss)."""
        s = self.spec
        ce = F.cross_entropy(logits.reshape(-1, s.vocab), targets.reshape(-1), reduction="sum",
                             ignore_index=-100)
        return ce / (s.global_batch * (s.seq - 1))
