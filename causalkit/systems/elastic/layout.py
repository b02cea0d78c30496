"""Parallel layouts (TP x PP x DP) and the logical description of the model's state.

The *abstract resource view* of the runtime: every piece of training state is a logical (global)
tensor, and a layout says which index box of it each rank holds. Ranks are ordered with tensor
parallelism innermost, then data parallelism, then pipeline stages (Megatron-LM order)::

    rank = pp_rank * (dp * tp) + dp_rank * tp + tp_rank

References
----------
Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model
Parallelism", arXiv 1909.08053 (2019) -- column/row-parallel linear layers.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import NamedTuple

from causalkit._validation import check_positive_int

__all__ = ["ParallelLayout", "ModelSpec", "TensorSpec", "even_split", "layout_for",
           "spec_for_state"]

#: State kinds carried by a resize: the parameters and Adam's two moment buffers.
STATE_KINDS = ("param", "exp_avg", "exp_avg_sq")


def even_split(n: int, parts: int, index: int) -> tuple[int, int]:
    """Half-open range ``[start, stop)`` of part ``index`` when ``n`` items are split in ``parts``.

    The first ``n % parts`` parts get one extra item (``numpy.array_split`` convention).
    """
    q, r = divmod(n, parts)
    start = index * q + min(index, r)
    return start, start + q + (1 if index < r else 0)


class Coords(NamedTuple):
    """Coordinates of one rank in a layout."""

    pp: int
    dp: int
    tp: int


@dataclass(frozen=True)
class ParallelLayout:
    """Degrees of tensor (``tp``), pipeline (``pp``) and data (``dp``) parallelism.

    Parameters
    ----------
    tp, pp, dp : int
        Positive degrees; the layout runs on ``tp * pp * dp`` ranks.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1

    def __post_init__(self):
        for name in ("tp", "pp", "dp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"ParallelLayout.{name} must be an int; got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"ParallelLayout.{name} must be >= 1; got {value}")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    def coords(self, rank: int) -> Coords:
        """``(pp, dp, tp)`` coordinates of ``rank``."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}); got {rank}")
        pp, rest = divmod(rank, self.dp * self.tp)
        dp, tp = divmod(rest, self.tp)
        return Coords(pp, dp, tp)

    def rank(self, pp: int, dp: int, tp: int) -> int:
        return pp * self.dp * self.tp + dp * self.tp + tp

    def tp_group(self, rank: int) -> list[int]:
        c = self.coords(rank)
        return [self.rank(c.pp, c.dp, t) for t in range(self.tp)]

    def dp_group(self, rank: int) -> list[int]:
        c = self.coords(rank)
        return [self.rank(c.pp, d, c.tp) for d in range(self.dp)]

    def to_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp}

    @classmethod
    def parse(cls, text: str) -> ParallelLayout:
        """Parse ``"TPxPPxDP"`` (e.g. ``"2x1x2"``)."""
        parts = str(text).lower().split("x")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"layout must look like 'TPxPPxDP' (e.g. '2x1x2'); got {text!r}")
        return cls(*(int(p) for p in parts))

    def __str__(self) -> str:
        return f"{self.tp}x{self.pp}x{self.dp}"


@dataclass(frozen=True)
class TensorSpec:
    """One logical tensor: global ``shape``, TP split dimension (None = replicated over TP)
    and the layer that owns it (``-1`` = embedding, first stage; ``layers`` = head, last stage)."""

    name: str
    shape: tuple[int, ...]
    tp_dim: int | None
    layer: int
    init: str  # "normal", "zeros" or "ones"


@dataclass(frozen=True)
class ModelSpec:
    """A small GPT-style decoder: token + position embeddings, ``layers`` pre-LN blocks with
    multi-head causal self-attention (separate q/k/v, column-parallel by heads; row-parallel
    output projection) and a GELU MLP (column-parallel fc1, row-parallel fc2), final LayerNorm and
    an untied output head.

    ``global_batch`` sequences of length ``seq`` make one optimizer step; each data-parallel rank
    processes ``global_batch / dp`` of them in ``micro_batches`` equal micro-batches (the 1F1B
    pipeline fill). The global batch is fixed, so a change of DP degree changes the micro-batch
    size, not the trajectory (up to summation order).
    """

    layers: int = 4
    dim: int = 48
    heads: int = 12
    ffn: int = 96
    vocab: int = 32
    seq: int = 16
    global_batch: int = 24
    micro_batches: int = 2
    dtype: str = "float32"
    lr: float = 3e-3
    seed: int = 0
    tensors: tuple[TensorSpec, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        for name in ("layers", "dim", "heads", "ffn", "vocab", "seq", "global_batch",
                     "micro_batches"):
            check_positive_int(getattr(self, name), f"ModelSpec.{name}")
        if self.dim % self.heads:
            raise ValueError(f"ModelSpec.dim ({self.dim}) must be divisible by heads "
                             f"({self.heads})")
        if self.seq % 2:
            raise ValueError(f"ModelSpec.seq must be even (the task repeats a half); "
                             f"got {self.seq}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"ModelSpec.dtype must be 'float32' or 'float64'; got {self.dtype!r}")
        if not self.lr > 0:
            raise ValueError(f"ModelSpec.lr must be > 0; got {self.lr}")
        object.__setattr__(self, "tensors", tuple(self._build_tensors()))

    def _build_tensors(self):
        d, f, v = self.dim, self.ffn, self.vocab
        yield TensorSpec("embed.weight", (v, d), None, -1, "normal")
        yield TensorSpec("pos.weight", (self.seq, d), None, -1, "normal")
        for i in range(self.layers):
            p = f"layers.{i}."
            yield TensorSpec(p + "ln1.weight", (d,), None, i, "ones")
            yield TensorSpec(p + "ln1.bias", (d,), None, i, "zeros")
            for q in ("q", "k", "v"):
                yield TensorSpec(p + f"attn.{q}.weight", (d, d), 0, i, "normal")
                yield TensorSpec(p + f"attn.{q}.bias", (d,), 0, i, "zeros")
            yield TensorSpec(p + "attn.o.weight", (d, d), 1, i, "normal")
            yield TensorSpec(p + "attn.o.bias", (d,), None, i, "zeros")
            yield TensorSpec(p + "ln2.weight", (d,), None, i, "ones")
            yield TensorSpec(p + "ln2.bias", (d,), None, i, "zeros")
            yield TensorSpec(p + "mlp.fc1.weight", (f, d), 0, i, "normal")
            yield TensorSpec(p + "mlp.fc1.bias", (f,), 0, i, "zeros")
            yield TensorSpec(p + "mlp.fc2.weight", (d, f), 1, i, "normal")
            yield TensorSpec(p + "mlp.fc2.bias", (d,), None, i, "zeros")
        yield TensorSpec("final_ln.weight", (d,), None, self.layers, "ones")
        yield TensorSpec("final_ln.bias", (d,), None, self.layers, "zeros")
        yield TensorSpec("head.weight", (v, d), None, self.layers, "normal")

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 8

    @property
    def n_params(self) -> int:
        n = 0
        for t in self.tensors:
            size = 1
            for s in t.shape:
                size *= s
            n += size
        return n

    @property
    def state_bytes(self) -> int:
        """Bytes of the state a resize carries: parameters and Adam's two moments
        (``3 * n_params * itemsize``)."""
        return len(STATE_KINDS) * self.n_params * self.itemsize

    def tensor(self, name: str) -> TensorSpec:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def stage_layers(self, pp: int, stage: int) -> range:
        """Transformer layers owned by pipeline ``stage`` (balanced contiguous split)."""
        return range(*even_split(self.layers, pp, stage))

    def stage_of(self, tensor: TensorSpec, pp: int) -> int:
        if tensor.layer < 0:
            return 0
        if tensor.layer >= self.layers:
            return pp - 1
        for s in range(pp):
            if tensor.layer in self.stage_layers(pp, s):
                return s
        raise AssertionError("unreachable")

    def micro_batch_size(self, dp: int) -> int:
        return self.global_batch // (dp * self.micro_batches)

    def init_seed(self, name: str) -> int:
        """Seed of the generator that initialises the global tensor ``name``."""
        return (self.seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63)

    def validate(self, layout: ParallelLayout, *, name: str = "layout") -> ParallelLayout:
        """Raise ``ValueError`` if ``layout`` cannot run this model; return it otherwise."""
        if not isinstance(layout, ParallelLayout):
            raise TypeError(f"{name} must be a ParallelLayout; got {type(layout).__name__}")
        problems = []
        if self.heads % layout.tp:
            problems.append(f"tp={layout.tp} does not divide heads={self.heads}")
        if self.ffn % layout.tp:
            problems.append(f"tp={layout.tp} does not divide ffn={self.ffn}")
        if layout.pp > self.layers:
            problems.append(f"pp={layout.pp} exceeds layers={self.layers}")
        if self.global_batch % (layout.dp * self.micro_batches):
            problems.append(f"dp={layout.dp} x micro_batches={self.micro_batches} does not "
                            f"divide global_batch={self.global_batch}")
        if problems:
            raise ValueError(f"impossible {name} {layout} for this model: " + "; ".join(problems))
        return layout

    def to_dict(self) -> dict:
        keys = ("layers", "dim", "heads", "ffn", "vocab", "seq", "global_batch", "micro_batches",
                "dtype", "lr", "seed")
        return {k: getattr(self, k) for k in keys}


def layout_for(world_size: int, spec: ModelSpec) -> ParallelLayout:
    """A valid layout on ``world_size`` ranks, preferring balanced degrees and TP > PP > DP.

    Raises ``ValueError`` when no factorisation of ``world_size`` fits ``spec``.
    """
    world_size = check_positive_int(world_size, "world_size")
    candidates = []
    for tp in range(1, world_size + 1):
        if world_size % tp:
            continue
        for pp in range(1, world_size // tp + 1):
            if (world_size // tp) % pp:
                continue
            layout = ParallelLayout(tp, pp, world_size // (tp * pp))
            try:
                spec.validate(layout)
            except ValueError:
                continue
            balance = max(layout.tp, layout.pp, layout.dp)
            candidates.append((balance, -layout.tp, -layout.pp, layout))
    if not candidates:
        raise ValueError(f"no TP x PP x DP layout on {world_size} ranks fits this model "
                         f"(heads={spec.heads}, ffn={spec.ffn}, layers={spec.layers}, "
                         f"global_batch={spec.global_batch})")
    return min(candidates, key=lambda c: c[:3])[3]


def spec_for_state(state_bytes: float, *, multiple: int = 12, **fields) -> ModelSpec:
    """A :class:`ModelSpec` (``fields`` as given) whose carried state is about ``state_bytes``.

    The state ``3 * n_params * itemsize`` is affine in the MLP width ``ffn``, so ``ffn`` is
    solved for and rounded to a multiple of ``multiple`` (so that TP degrees dividing it stay
    valid); every other field keeps its value. The state cannot be smaller than the model at
    ``ffn = multiple``.
    """
    if isinstance(state_bytes, bool) or not isinstance(state_bytes, (int, float)) \
            or not state_bytes > 0:
        raise ValueError(f"state_bytes must be a positive number; got {state_bytes!r}")
    multiple = check_positive_int(multiple, "multiple")
    fields.pop("ffn", None)
    lo = ModelSpec(ffn=multiple, **fields)
    per_unit = ModelSpec(ffn=2 * multiple, **fields).state_bytes - lo.state_bytes
    units = max(1, round(1 + (state_bytes - lo.state_bytes) / per_unit))
    return ModelSpec(ffn=units * multiple, **fields)
