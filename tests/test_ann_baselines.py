"""Baseline tuners (faiss autotune, index x parameter grid), interleaved QPS with its CI, and
the SmartANN acceptance rule under a memory budget."""

import faiss
import numpy as np
import pytest
from faiss.contrib.datasets import SyntheticDataset
from scipy import stats

from causalkit.systems.ann import IVFPQWorkflow, SmartANN, exact_knn, recall_at_k
from causalkit.systems.ann.baselines import autotune, build_factory, grid
from causalkit.systems.ann.throughput import index_bytes_per_vector, interleaved_qps, ratio_ci

pytestmark = pytest.mark.usefixtures("one_faiss_thread")


@pytest.fixture(scope="module")
def data():
    ds = SyntheticDataset(32, 0, 3000, 150, seed=5)
    xb, xq = ds.get_database(), ds.get_queries()
    _, gt = exact_knn(xb, xq, 10)
    return xb, xq, gt


FACTORIES = [("IVF32,Flat", 136), ("IVF32,PQ8x4fs", 12), ("HNSW8", 192)]


def test_ratio_ci_is_the_paired_log_t_interval():
    qa = np.array([110.0, 95.0, 130.0, 120.0, 101.0])
    qb = np.array([100.0, 90.0, 100.0, 110.0, 100.0])
    ci = ratio_ci(qa, qb)
    r = np.log(qa / qb)
    lo, hi = stats.t.interval(0.95, len(r) - 1, loc=r.mean(), scale=stats.sem(r))
    assert ci.ratio == pytest.approx(np.exp(r.mean()))
    assert (ci.lower, ci.upper) == pytest.approx((np.exp(lo), np.exp(hi)))
    # an exact doubling in every round: a degenerate interval at 2, clearing any gain below 1
    sure = ratio_ci(2 * qb, qb)
    assert sure.lower == pytest.approx(2) and sure.upper == pytest.approx(2)
    assert sure.clears(0.5) and not ci.clears(0.5)
    with pytest.raises(ValueError, match="same length"):
        ratio_ci(qa, qb[:3])


def test_interleaved_rounds_rotate_the_order():
    calls = []
    fns = [lambda q, k, i=i: calls.append(i) for i in range(3)]
    q = interleaved_qps(fns, np.zeros((4, 2), np.float32), 1, rounds=3, min_seconds=0.0)
    assert q.shape == (3, 3) and (q > 0).all()
    timed = calls[3:]                       # after one warm-up call each
    assert timed == [0, 1, 2, 1, 2, 0, 2, 0, 1]
    with pytest.raises(ValueError, match="rounds"):
        interleaved_qps(fns, np.zeros((4, 2), np.float32), 1, rounds=1)


@pytest.mark.parametrize("tuner", [autotune, grid])
def test_baseline_choice_reproduces_on_a_rebuilt_index(data, tuner):
    xb, xq, gt = data
    res = tuner(xb, xq, gt, 10, memory_budget=None, factories=FACTORIES)
    assert set(res.table["factory"]) == {f for f, _ in FACTORIES}
    pick = res.choose(0.9)
    assert pick["recall"] >= 0.9
    ok = res.table[res.table["recall"] >= 0.9]
    assert pick["qps"] == ok["qps"].max()
    index, _ = build_factory(pick["factory"], xb)
    faiss.ParameterSpace().set_index_parameters(index, pick["params"])
    # same data, same factory, same parameters: the recall the tuner saw
    assert recall_at_k(index.search(xq, 10)[1], gt, 10) == pytest.approx(pick["recall"],
                                                                         abs=0.02)
    assert index_bytes_per_vector(index, len(xb)) == pytest.approx(pick["bytes_per_vector"],
                                                                   rel=0.05)


def test_baselines_respect_memory_and_time_budgets(data):
    xb, xq, gt = data
    res = grid(xb, xq, gt, 10, memory_budget=40.0, factories=FACTORIES)
    assert set(res.table["factory"]) == {"IVF32,PQ8x4fs"}
    assert any("budget 40" in s for s in res.skipped)
    assert res.choose(0.0, 40.0)["bytes_per_vector"] <= 40
    out_of_time = autotune(xb, xq, gt, 10, time_budget=0.0, factories=FACTORIES)
    assert set(out_of_time.table["factory"]) == {"IVF32,Flat"}   # the first one only


def test_design_under_a_compressed_budget_stores_no_raw_vectors():
    ds = SyntheticDataset(32, 0, 4000, 200, seed=11)
    xb, xq = ds.get_database(), ds.get_queries()
    _, gt = exact_knn(xb, xq, 10)
    budget = 4 * 32 / 4                      # a quarter of the raw float32 vectors
    smart = SmartANN(IVFPQWorkflow(nprobe=8, pq_m=8, pq_nbits=4), target_recall=0.6,
                     memory_budget=budget, max_rounds=1, qps_rounds=2)
    design = smart.auto_design(xb, xq, gt)
    acts = design.actions
    assert not acts.loc[acts["accepted"], "action"].str.startswith("rerank").any()
    assert index_bytes_per_vector(design.workflow.index_, len(xb)) <= budget
    assert not (acts["tried"] & (acts["bytes_per_vector"] > budget) & acts["accepted"]).any()
    # every candidate compared against the current design carries its QPS-ratio CI
    compared = acts[acts["qps_ratio"].notna()]
    assert (compared["qps_ratio_lower"] <= compared["qps_ratio"]).all()
    assert (compared["qps_ratio"] <= compared["qps_ratio_upper"]).all()
