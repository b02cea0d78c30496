"""SmartANN diagnosis and auto-design: planted bottlenecks, editable thresholds, design gains."""

import numpy as np
import pytest
from faiss.contrib.datasets import SyntheticDataset

from causalkit.systems.ann import HNSWWorkflow, IVFPQWorkflow, SmartANN, exact_knn, recall_at_k
from causalkit.systems.ann.ivfpq import Rotation

CHEAP_OPQ = {"rotation": Rotation("none", opq_niter=2, opq_train_points=10_000)}

pytestmark = pytest.mark.usefixtures("one_faiss_thread")


@pytest.fixture(scope="module")
def data():
    ds = SyntheticDataset(32, 0, 10000, 800, seed=5)
    xb, q = ds.get_database(), ds.get_queries()
    xv, xq = q[:400], q[400:]            # disjoint validation / test queries
    _, gv = exact_knn(xb, xv, 10)
    _, gq = exact_knn(xb, xq, 10)
    return xb, xv, gv, xq, gq


@pytest.fixture(scope="module")
def planted(data):
    """Bad upstream object (2-iteration k-means) and bad downstream one (PQ4x6: 3 bytes)."""
    xb, xv, gv, _, _ = data
    wf = IVFPQWorkflow(nlist=64, nprobe=8, pq_m=4, pq_nbits=6, kmeans_niter=2, objects=CHEAP_OPQ)
    smart = SmartANN(wf, k=10, target_recall=0.6)
    return smart, smart.diagnose(xb, xv, gv)


def test_planted_bottlenecks_are_found_in_causal_order(planted):
    _, diag = planted
    assert diag.bottlenecks == ["coarse_kmeans", "pq_codebooks"]
    t = diag.table.set_index("object")
    # the downstream object was judged on the workflow with the upstream one already replaced
    assert diag.oracle_workflow.objects["coarse_kmeans"].niter >= 50
    assert t.loc["pq_codebooks", "implementation"] == "PQ4x6"
    assert t.loc["coarse_kmeans", "headroom"] >= 0.01
    assert diag.final["recall"] > diag.baseline["recall"] + 0.3
    assert list(t.index) == list(IVFPQWorkflow.object_names)


def test_good_objects_are_not_flagged(data):
    xb, xv, gv, _, _ = data
    wf = IVFPQWorkflow(nlist=64, nprobe=8, pq_m=8, pq_nbits=6, objects=CHEAP_OPQ)
    diag = SmartANN(wf, k=10, target_recall=0.6).diagnose(xb, xv, gv)
    assert "coarse_kmeans" not in diag.bottlenecks
    assert "pq_codebooks" not in diag.bottlenecks
    # PQ loss remains, so exact re-ranking is where the recall is lost
    assert diag.bottlenecks == ["reranking"]


def test_thresholds_are_editable_data(data, planted):
    xb, xv, gv, _, _ = data
    smart, _ = planted
    lenient = SmartANN(smart.workflow, k=10, target_recall=0.6,
                       thresholds={"pq_codebooks": 0.99, "coarse_kmeans": 1.0})
    diag = lenient.diagnose(xb, xv, gv)
    assert "pq_codebooks" not in diag.bottlenecks and "coarse_kmeans" not in diag.bottlenecks
    with pytest.raises(ValueError, match="unknown ivfpq objects"):
        SmartANN(smart.workflow, thresholds={"pqq": 1}).diagnose(xb, xv, gv)


def test_auto_design_fixes_bottlenecks_and_holds_on_test_queries(data, planted):
    xb, xv, gv, xq, gq = data
    smart, diag = planted
    design = smart.auto_design(xb, xv, gv, diagnosis=diag)
    assert design.design.reached and not design.baseline.reached
    assert any(a.startswith("rerank") or a == "more_bytes" for a in design.applied)
    acts = design.actions
    fixes = acts[~acts["bottleneck"].str.startswith("efficiency")]
    assert set(fixes["bottleneck"]) <= set(diag.bottlenecks)
    # efficiency actions are tried without a quality flag, after the fixes
    assert acts["bottleneck"].str.startswith("efficiency (round 1)").any()
    assert acts["accepted"].sum() == len(design.applied)
    # held-out queries: the design beats the calibrated baseline's recall at no lower QPS
    wf = design.workflow
    base = IVFPQWorkflow(nlist=64, nprobe=design.baseline.budget, pq_m=4, pq_nbits=6,
                         kmeans_niter=2).build(xb)
    r_design = recall_at_k(wf.search(xq, 10)[1], gq, 10)
    r_base = recall_at_k(base.search(xq, 10)[1], gq, 10)
    assert r_design > r_base + 0.1


def test_hnsw_planted_construction_bottleneck(data):
    xb, xv, gv, _, _ = data
    sub = xb[:3000]
    _, g3 = exact_knn(sub, xv, 10)
    bad = SmartANN(HNSWWorkflow(m=4, ef_construction=8, ef=10), target_recall=0.9)
    good = SmartANN(HNSWWorkflow(m=16, ef_construction=200, ef=64), target_recall=0.9)
    d_bad, d_good = bad.diagnose(sub, xv, g3), good.diagnose(sub, xv, g3)
    assert "build_candidates" in d_bad.bottlenecks
    assert d_good.bottlenecks == []
    t = d_good.table.set_index("object")
    assert t.loc["entry_point", "observed"] == 1.0       # every node reachable
    assert np.isfinite(t["headroom"]).all()


def test_smartann_input_errors(data):
    xb, xv, gv, _, _ = data
    with pytest.raises(TypeError, match="IVFPQWorkflow or an HNSWWorkflow"):
        SmartANN(object())
    smart = SmartANN(HNSWWorkflow(m=4), k=10)
    with pytest.raises(ValueError, match="ground_truth must have shape"):
        smart.diagnose(xb[:500], xv, gv[:10])
    with pytest.raises(ValueError, match="xq has dimension"):
        smart.diagnose(xb[:500], xv[:, :8])
    with pytest.raises(ValueError, match="target_recall"):
        SmartANN(HNSWWorkflow(), target_recall=1.5).diagnose(xb[:500], xv)
    with pytest.raises(ValueError, match="k=600 is larger"):
        SmartANN(HNSWWorkflow(), k=600).diagnose(xb[:500], xv)
