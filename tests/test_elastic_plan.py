"""Property tests of the resharding planner (pure functions; no processes)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from causalkit.systems.elastic import ModelSpec, ParallelLayout, holdings, layout_for, reshard_plan
from causalkit.systems.elastic.plan import relative_slices


@st.composite
def spec_and_layouts(draw):
    heads = draw(st.sampled_from([1, 2, 3, 4, 6]))
    hd = draw(st.integers(1, 3))
    spec = ModelSpec(layers=draw(st.integers(1, 4)), dim=heads * hd, heads=heads,
                     ffn=heads * draw(st.integers(1, 3)), vocab=draw(st.integers(2, 7)),
                     seq=2 * draw(st.integers(1, 3)), global_batch=12, micro_batches=1,
                     dtype=draw(st.sampled_from(["float32", "float64"])))

    def layout():
        tp = draw(st.sampled_from([d for d in (1, 2, 3, 4, 6) if heads % d == 0]))
        pp = draw(st.integers(1, spec.layers))
        dp = draw(st.sampled_from([1, 2, 3, 4]))
        return ParallelLayout(tp, pp, dp)

    old, new = layout(), layout()
    # worker ids: a random injective mapping, with some overlap between old and new
    pool = draw(st.permutations(list(range(old.world_size + new.world_size))))
    shift = draw(st.integers(0, new.world_size))
    old_workers = pool[:old.world_size]
    new_workers = (pool[:old.world_size] + pool[old.world_size:])[shift:shift + new.world_size]
    if len(new_workers) < new.world_size:
        new_workers = pool[-new.world_size:]
    staging = draw(st.integers(spec.itemsize, 2048))
    return spec, old, new, list(old_workers), list(new_workers), staging


def _global_state(spec, rng):
    """Random bit patterns (including -0.0, NaNs, denormals) for every logical tensor."""
    dtype, itype = ((np.float32, np.uint32) if spec.dtype == "float32"
                    else (np.float64, np.uint64))
    out = {}
    for t in spec.tensors:
        for kind in ("param", "exp_avg", "exp_avg_sq"):
            bits = rng.integers(0, np.iinfo(itype).max, size=t.shape, dtype=itype,
                                endpoint=True)
            out[(kind, t.name)] = bits.view(dtype)
    return out


def _full(spec, name):
    return tuple((0, s) for s in spec.tensor(name).shape)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_and_layouts(), st.sampled_from(["spread", "primary"]))
def test_plan_covers_exactly_once_and_reconstructs_bit_exactly(case, source):
    spec, old, new, old_w, new_w, staging = case
    plan = reshard_plan(old, new, spec, old_workers=old_w, new_workers=new_w,
                        staging_bytes=staging, source=source)
    rng = np.random.default_rng(0)
    truth = _global_state(spec, rng)
    # old shards cut from the truth; new shards start as garbage
    old_shards = {(h.rank, h.kind, h.name): truth[(h.kind, h.name)][
        relative_slices(h.box, _full(spec, h.name))].copy() for h in holdings(old, spec)}
    new_hold = holdings(new, spec)
    new_shards = {(h.rank, h.kind, h.name): np.full([b - a for a, b in h.box], 7,
                                                     dtype=truth[(h.kind, h.name)].dtype)
                  for h in new_hold}
    hits = {(h.rank, h.kind, h.name): np.zeros([b - a for a, b in h.box], dtype=int)
            for h in new_hold}
    old_boxes = {(h.rank, h.kind, h.name): h.box for h in holdings(old, spec)}
    for t in plan.transfers:
        assert old_boxes[(t.src, t.kind, t.name)] == t.src_box      # the source holds it
        src = old_shards[(t.src, t.kind, t.name)][relative_slices(t.box, t.src_box)]
        key = (t.dst, t.kind, t.name)
        new_shards[key][relative_slices(t.box, t.dst_box)] = src
        hits[key][relative_slices(t.box, t.dst_box)] += 1
        assert t.src_worker == old_w[t.src] and t.dst_worker == new_w[t.dst]
    for h in new_hold:
        key = (h.rank, h.kind, h.name)
        assert np.all(hits[key] == 1), "every destination byte exactly once"
        expect = truth[(h.kind, h.name)][relative_slices(h.box, _full(spec, h.name))]
        assert new_shards[key].tobytes() == expect.tobytes()
    assert plan.total_bytes == sum(int(np.prod([b - a for a, b in h.box])) * spec.itemsize
                                   for h in new_hold)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_and_layouts())
def test_staging_never_exceeds_bound(case):
    spec, old, new, old_w, new_w, staging = case
    plan = reshard_plan(old, new, spec, old_workers=old_w, new_workers=new_w,
                        staging_bytes=staging)
    assert all(t.nbytes <= staging for t in plan.transfers if not t.local)
    # recompute each worker's staged bytes per batch independently of Plan's helpers
    load = {}
    for t in plan.transfers:
        if t.local:
            assert t.batch == -1
            continue
        for w in (t.src_worker, t.dst_worker):
            load[(t.batch, w)] = load.get((t.batch, w), 0) + t.nbytes
    assert max(load.values(), default=0) <= staging
    assert plan.peak_staging_bytes == max(load.values(), default=0)
    assert {t.batch for t in plan.transfers if not t.local} == set(range(plan.n_batches))


def test_plan_is_deterministic_and_prefers_local_replicas():
    spec = ModelSpec()
    a = reshard_plan(ParallelLayout(1, 1, 2), ParallelLayout(1, 1, 3), spec)
    b = reshard_plan(ParallelLayout(1, 1, 2), ParallelLayout(1, 1, 3), spec)
    assert a == b
    # workers 0 and 1 keep full parameter replicas: only worker 2 receives parameters
    params = [t for t in a.transfers if t.kind == "param"]
    assert all(t.local for t in params if t.dst_worker in (0, 1))
    senders = {t.src_worker for t in params if not t.local}
    assert senders == {0, 1}, "new replica filled from both old replicas (load spread)"


def test_tp_two_to_four_row_intersections():
    spec = ModelSpec(dim=8, heads=4, ffn=128)
    plan = reshard_plan(ParallelLayout(2, 1, 1), ParallelLayout(4, 1, 1), spec,
                        staging_bytes=1 << 20)
    fc1 = [t for t in plan.transfers if t.name == "layers.0.mlp.fc1.weight" and t.kind == "param"]
    got = sorted((t.src, t.dst, t.box[0]) for t in fc1)
    assert got == [(0, 0, (0, 32)), (0, 1, (32, 64)), (1, 2, (64, 96)), (1, 3, (96, 128))]


def test_bad_layouts_raise_before_anything_runs():
    spec = ModelSpec(layers=4, heads=12, ffn=96)
    with pytest.raises(ValueError, match="does not divide heads"):
        reshard_plan(ParallelLayout(1, 1, 1), ParallelLayout(5, 1, 1), spec)
    with pytest.raises(ValueError, match="exceeds layers"):
        reshard_plan(ParallelLayout(1, 5, 1), ParallelLayout(1, 1, 1), spec)
    with pytest.raises(ValueError, match="global_batch"):
        spec.validate(ParallelLayout(1, 1, 5))
    with pytest.raises(ValueError, match="new_workers must list 3"):
        reshard_plan(ParallelLayout(2, 1, 1), ParallelLayout(3, 1, 1), spec,
                     new_workers=[0, 1])
    with pytest.raises(ValueError, match="distinct"):
        reshard_plan(ParallelLayout(2, 1, 1), ParallelLayout(2, 1, 1), spec,
                     new_workers=[1, 1])
    with pytest.raises(ValueError, match="staging_bytes"):
        reshard_plan(ParallelLayout(2, 1, 1), ParallelLayout(2, 1, 1), spec, staging_bytes=2)
    with pytest.raises(ValueError, match="tp must be >= 1"):
        ParallelLayout(0, 1, 1)
    with pytest.raises(TypeError, match="ParallelLayout.dp must be an int"):
        ParallelLayout(1, 1, 2.0)
    with pytest.raises(ValueError, match="TPxPPxDP"):
        ParallelLayout.parse("2x2")
    with pytest.raises(ValueError, match="no TP x PP x DP layout on 5"):
        layout_for(5, spec)
    with pytest.raises(ValueError, match="divisible by heads"):
        ModelSpec(dim=10, heads=4)
