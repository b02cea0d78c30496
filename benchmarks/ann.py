"""Speed of the SmartANN object layer and of a diagnosis.

1. QPS of our IVF-PQ and HNSW workflows vs the same faiss index configured directly
   (``index_factory("IVF{n},PQ{m}")``, ``IndexHNSWFlat``), single thread, best of 5 runs,
   same queries; the ratio should be >= 0.9 (the object layer must not cost throughput).
2. Wall time of ``SmartANN.diagnose`` on an IVF-PQ index of ``--n-diagnose`` vectors
   (target: under 2 minutes on 2 cores), with the baseline build time for scale.

    python benchmarks/ann.py                 # SIFT descriptors, 100k-vector diagnosis
    python benchmarks/ann.py --quick         # synthetic, small
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dataset", default="sift")
    parser.add_argument("--n-base", type=int, default=30000)
    parser.add_argument("--n-diagnose", type=int, default=100000)
    args = parser.parse_args(argv)

    import faiss

    from causalkit.datasets.ann import load_ann
    from causalkit.systems.ann import HNSWWorkflow, IVFPQWorkflow, SmartANN, measure_qps
    if args.quick:
        args.dataset, args.n_base, args.n_diagnose = "synthetic", 10000, 10000
    faiss.omp_set_num_threads(1)
    ds = load_ann(args.dataset, n_base=args.n_base)
    xb, xq, d = ds.xb, ds.xq, ds.d
    m = d // 4
    print(f"{ds}; timings on a shared, loaded 2-core machine (1 faiss thread)")

    wf = IVFPQWorkflow(nprobe=16, pq_m=m).build(xb)
    ref = faiss.index_factory(d, f"IVF{wf.nlist_},PQ{m}")
    ref.train(xb)
    ref.add(xb)
    ref.nprobe = 16
    hw = HNSWWorkflow(m=16, ef_construction=200, ef=64).build(xb)
    href = faiss.IndexHNSWFlat(d, 16)
    href.hnsw.efConstruction = 200
    href.add(xb)
    href.hnsw.efSearch = 64
    for label, ours, theirs in (("IVF-PQ nprobe=16", wf.search, ref.search),
                                ("HNSW ef=64", hw.search, href.search)):
        q_ours, q_ref = [], []
        for _ in range(3):          # interleave to share the machine's load fairly
            q_ours.append(measure_qps(lambda q, f=ours: f(q, 10), xq, 5)[0])
            q_ref.append(measure_qps(lambda q, f=theirs: f(q, 10), xq, 5)[0])
        a, b = max(q_ours), max(q_ref)
        print(f"{label:18s} workflow {a:9.0f} QPS | faiss direct {b:9.0f} QPS | ratio {a / b:.3f}")

    big = load_ann(args.dataset, n_base=args.n_diagnose)
    smart = SmartANN(IVFPQWorkflow(nprobe=16, pq_m=m), k=10, target_recall=0.9)
    t0 = time.perf_counter()
    diag = smart.diagnose(big.xb, big.xv, big.gt_val)
    total = time.perf_counter() - t0
    print(f"diagnosis of a {len(big.xb)}-vector IVF-PQ index: {total:.1f} s "
          f"(baseline build {diag.build_seconds:.1f} s, overhead {diag.overhead():.1f}x build)")
    print(diag.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
