"""IVF-PQ / HNSW workflows: faithful to faiss, exact oracles, clear errors."""

import faiss
import numpy as np
import pytest
from faiss.contrib.datasets import SyntheticDataset

from causalkit.systems.ann import HNSWWorkflow, IVFPQWorkflow, exact_knn, recall_at_k
from causalkit.systems.ann.hnsw import in_degrees, reachable_from_entry, repair_links
from causalkit.systems.ann.ivfpq import OBJECTS as IVF_OBJECTS
from causalkit.systems.ann.ivfpq import Rotation

pytestmark = pytest.mark.usefixtures("one_faiss_thread")


@pytest.fixture(scope="module")
def synth():
    ds = SyntheticDataset(32, 0, 12000, 200, seed=3)
    xb, xq = ds.get_database(), ds.get_queries()
    _, gt = exact_knn(xb, xq, 10)
    return xb, xq, gt


@pytest.fixture(scope="module")
def ivf_pair(synth):
    """Our default-object workflow and faiss's own IndexIVFPQ on the same parameters (6-bit
    codes keep the test fast; the study compares the 8-bit default on real data)."""
    xb, _, _ = synth
    wf = IVFPQWorkflow(nlist=89, pq_m=8, pq_nbits=6).build(xb)
    ref = faiss.index_factory(32, "IVF89,PQ8x6")
    ref.train(xb)
    ref.add(xb)
    return wf, ref


@pytest.mark.parametrize("nprobe", [2, 8, 32])
def test_ivfpq_baseline_reproduces_faiss_indexivfpq(synth, ivf_pair, nprobe):
    _, xq, gt = synth
    wf, ref = ivf_pair
    wf.set_budget(nprobe)
    ref.nprobe = nprobe
    ours = recall_at_k(wf.search(xq, 10)[1], gt, 10)
    theirs = recall_at_k(ref.search(xq, 10)[1], gt, 10)
    assert abs(ours - theirs) <= 0.01


def test_ivfpq_all_oracles_return_exact_neighbours(synth):
    xb, xq, gt = synth
    wf = IVFPQWorkflow(nlist=89, nprobe=2, pq_m=4, pq_nbits=6, kmeans_niter=2,
                       objects={"rotation": Rotation("none", opq_niter=2,
                                                     opq_train_points=4000)})
    for name in IVF_OBJECTS:
        wf = wf.with_oracle(name)
    assert wf.objects["rotation"].kind == "opq" and wf.objects["probing"].nprobe is None
    wf.build(xb)
    _, ids = wf.search(xq, 10)
    assert recall_at_k(ids, gt, 10) == 1.0


def test_hnsw_all_oracles_return_exact_neighbours(synth):
    xb, xq, gt = synth
    wf = HNSWWorkflow(m=4, ef_construction=8, ef=10, storage="sq4")
    for name in wf.object_names:
        wf = wf.with_oracle(name)
    wf.build(xb[:3000])
    _, gt3 = exact_knn(xb[:3000], xq, 10)
    assert recall_at_k(wf.search(xq, 10)[1], gt3, 10) == 1.0


def test_hnsw_default_matches_faiss_indexhnswflat(synth):
    xb, xq, gt = synth
    wf = HNSWWorkflow(m=8, ef_construction=40, ef=16).build(xb[:4000])
    ref = faiss.IndexHNSWFlat(32, 8)
    ref.hnsw.efConstruction = 40
    ref.add(xb[:4000])
    ref.hnsw.efSearch = 16
    np.testing.assert_array_equal(wf.search(xq, 10)[1], ref.search(xq, 10)[1])


def test_hnsw_seeded_search_matches_native_when_seeded_at_entry(synth):
    """The exact-upper-NN descent oracle differs from greedy only through its seed."""
    xb, xq, _ = synth
    base = HNSWWorkflow(m=8, ef_construction=40, ef=64).build(xb[:4000])
    oracle = base.with_oracle("upper_descent").build(xb[:4000])
    _, gt4 = exact_knn(xb[:4000], xq, 10)
    r_base = recall_at_k(base.search(xq, 10)[1], gt4, 10)
    r_oracle = recall_at_k(oracle.search(xq, 10)[1], gt4, 10)
    assert r_oracle >= r_base - 0.02 and r_oracle > 0.9


def test_repair_links_makes_every_node_reachable(synth):
    xb, _, _ = synth
    wf = HNSWWorkflow(m=2, ef_construction=4).build(xb[:3000])
    index = faiss.clone_index(wf.hnsw_index_)
    before = reachable_from_entry(index).mean()
    repair_links(index, xb[:3000])
    after = reachable_from_entry(index)
    deg = in_degrees(index)
    deg[index.hnsw.entry_point] = 1
    assert before < 1.0
    assert after.all() and (deg > 0).all()


def test_replace_returns_new_workflow_and_keeps_others(synth):
    wf = IVFPQWorkflow(nlist=64, nprobe=4)
    new = wf.with_oracle("probing")
    assert wf.objects["probing"].nprobe == 4 and new.objects["probing"].nprobe is None
    assert all(new.objects[n] == wf.objects[n] for n in IVF_OBJECTS if n != "probing")


# ----------------------------------------------------------------------------- bad input
def test_dimension_mismatch_is_a_clear_error(synth):
    xb, xq, _ = synth
    wf = IVFPQWorkflow(nlist=32, pq_m=8, pq_nbits=4).build(xb)
    with pytest.raises(ValueError, match="dimension 16.*dimension 32"):
        wf.search(xq[:, :16], 10)
    with pytest.raises(ValueError, match="xt has dimension"):
        IVFPQWorkflow(nlist=32).build(xb, xt=xb[:, :16])
    hn = HNSWWorkflow(m=4).build(xb[:500])
    with pytest.raises(ValueError, match="xq has dimension"):
        hn.search(xq[:, :8], 5)


def test_k_larger_than_n_is_a_clear_error(synth):
    xb, xq, _ = synth
    wf = HNSWWorkflow(m=4).build(xb[:50])
    with pytest.raises(ValueError, match="k=51 is larger than the number of base vectors"):
        wf.search(xq, 51)


def test_nan_vectors_are_a_clear_error(synth):
    xb, xq, _ = synth
    bad = xb.copy()
    bad[7, 3] = np.nan
    with pytest.raises(ValueError, match="xb contains NaN"):
        IVFPQWorkflow(nlist=32, pq_nbits=4).build(bad)
    wf = IVFPQWorkflow(nlist=32, pq_m=8, pq_nbits=4).build(xb)
    q = xq.copy()
    q[0, 0] = np.nan
    with pytest.raises(ValueError, match="xq contains NaN"):
        wf.search(q, 10)


def test_too_few_training_points_per_centroid(synth):
    xb, _, _ = synth
    with pytest.raises(ValueError, match="too few training points for the coarse quantizer"):
        IVFPQWorkflow(nlist=200).build(xb[:5000])
    with pytest.raises(ValueError, match="PQ sub-quantizers"):
        IVFPQWorkflow(nlist=8, pq_m=8).build(xb[:5000], xt=xb[:2000])


def test_bad_configuration_is_rejected(synth):
    xb, _, _ = synth
    with pytest.raises(ValueError, match="must divide the dimension"):
        IVFPQWorkflow(nlist=16, pq_m=5).build(xb[:2000])
    with pytest.raises(TypeError, match="unexpected keyword argument 'nprobes'"):
        IVFPQWorkflow(nprobes=3)
    with pytest.raises(ValueError, match="storage must be"):
        HNSWWorkflow(storage="fp8")
    with pytest.raises(RuntimeError, match="build"):
        IVFPQWorkflow().search(xb[:2], 1)
