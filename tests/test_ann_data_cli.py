"""load_ann data sets, the study driver and the ``causalkit systems ann`` command line."""

import faiss
import numpy as np
import pandas as pd
import pytest

from causalkit.datasets import load_ann
from causalkit.datasets.ann import _stdlib_sentences
from causalkit.systems.ann import exact_knn
from causalkit.systems.ann.experiment import ANNExperiment, curve_gains


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALKIT_CACHE", str(tmp_path))
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


def test_sift_descriptors_from_bundled_images_with_exact_ground_truth():
    ds = load_ann("sift", n_base=2000, n_queries=100, n_validation=100)
    assert ds.xb.shape == (2000, 128) and ds.xq.shape == (100, 128) and ds.xv.shape == (100, 128)
    assert ds.xb.dtype == np.float32 and not ds.synthetic
    # disjoint query sets and base
    rows = {r.tobytes() for r in ds.xb}
    assert not any(r.tobytes() in rows for r in ds.xq)
    assert not any(r.tobytes() in rows for r in ds.xv)
    _, gt = exact_knn(ds.xb, ds.xq, 10)
    assert (gt == ds.gt[:, :10]).mean() > 0.99          # ties may swap equal-distance ids
    again = load_ann("sift", n_base=2000, n_queries=100, n_validation=100)   # from the cache
    np.testing.assert_array_equal(again.xb, ds.xb)
    np.testing.assert_array_equal(again.gt, ds.gt)


def test_patches_and_synthetic_sets():
    p = load_ann("patches", n_base=3000, n_queries=50, n_validation=50)
    assert p.d == 64 and np.allclose(p.xb.mean(axis=1), 0, atol=1e-4)
    s = load_ann("synthetic", n_base=1000, n_queries=20, n_validation=20, random_state=3)
    assert s.synthetic and s.xb.shape == (1000, 64) and s.gt.shape == (20, 100)


def test_load_ann_bad_arguments():
    with pytest.raises(ValueError, match="name must be one of"):
        load_ann("glove")
    with pytest.raises(ValueError, match="n_queries"):
        load_ann("synthetic", n_queries=0)


def test_stdlib_sentences_are_distinct_text():
    s = _stdlib_sentences(200)
    assert len(s) == 200 and len(set(s)) == 200 and all(len(x) >= 25 for x in s)


@pytest.mark.slow
def test_text_embeddings_offline():
    ds = load_ann("text", n_queries=200, n_validation=200)
    assert ds.d == 384
    np.testing.assert_allclose(np.linalg.norm(ds.xb, axis=1), 1.0, atol=1e-4)


def test_curve_gains_on_known_curves():
    import pandas as pd
    base = pd.DataFrame({"recall": [0.5, 0.6, 0.7], "qps": [1000.0, 500.0, 250.0]})
    better = pd.DataFrame({"recall": [0.6, 0.7, 0.8], "qps": [1000.0, 500.0, 250.0]})
    g = curve_gains(base, better)
    assert g["recall_gain_at_equal_qps_median"] == pytest.approx(0.1)
    assert g["qps_ratio_at_equal_recall_median"] == pytest.approx(2.0)


def test_experiment_returns_tidy_real_engine_rows():
    exp = ANNExperiment(datasets=("synthetic",), families=("hnsw",), n_base=3000,
                        n_queries=100, qps_repeats=1)
    df = exp.run()
    assert set(df["design"]) == {"baseline", "auto-design"}
    assert {"dataset", "family", "budget", "recall", "qps", "repetition", "simulated"} <= set(
        df.columns)
    assert not df["simulated"].any() and (df["engine"] == "faiss").all()
    assert len(exp.summary_) == 1 and exp.summary_["overhead_x_build"].iloc[0] > 0


def test_cli_runs_and_writes_tables(tmp_path, capsys):
    from causalkit.cli import main
    rc = main(["systems", "ann", "--dataset", "synthetic", "--family", "hnsw", "--n-base",
               "3000", "--n-queries", "100", "--out", str(tmp_path / "out")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "hnsw diagnosis" in text and "not simulated" in text
    assert (tmp_path / "out" / "diagnosis.csv").exists()
    assert (tmp_path / "out" / "smartann.png").exists()


def test_designs_study_resumes_from_its_store_and_is_registered(tmp_path):
    from causalkit.simulation import load_results
    from causalkit.studies import STUDIES
    from causalkit.systems.ann import studies

    assert STUDIES["smartann-designs"] == ("causalkit.systems.ann.studies", "designs")
    out = tmp_path / "designs.jsonl"
    first = studies.design_runs(reps=1, out=out, quick=True, families=("hnsw",))[0]
    stored = load_results(tmp_path / "designs_synthetic.jsonl")
    assert len(stored) == 1 and stored["family"].item() == "hnsw"
    again = studies.design_runs(reps=1, out=out, quick=True, families=("hnsw",))[0]
    # read back, not rerun: the timed QPS values are identical
    pd.testing.assert_frame_equal(again.results_, first.results_)
    assert not first.results_["simulated"].any()


def test_cli_bad_sizes_exit_2_with_one_line(capsys):
    from causalkit.cli import main
    assert main(["systems", "ann", "--dataset", "synthetic", "--n-base", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("causalkit systems ann: ")
    assert "n_base" in err
