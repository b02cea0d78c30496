"""Readers of the TEXMEX ``.fvecs/.ivecs/.bvecs`` and ann-benchmarks HDF5 formats."""

import numpy as np
import pytest

from causalkit.datasets.ann import load_ann_file, read_hdf5, read_vecs, write_vecs
from causalkit.systems.ann import exact_knn


@pytest.mark.parametrize("suffix, values", [
    (".fvecs", np.random.default_rng(0).normal(size=(7, 5)).astype(np.float32)),
    (".ivecs", np.random.default_rng(1).integers(-2**31, 2**31 - 1, size=(4, 3), dtype=np.int64)),
    (".bvecs", np.random.default_rng(2).integers(0, 256, size=(6, 8))),
])
def test_vecs_round_trip_is_exact(tmp_path, suffix, values):
    path = write_vecs(tmp_path / f"x{suffix}", values)
    back = read_vecs(path)
    np.testing.assert_array_equal(back, values)
    assert back.shape == values.shape


def test_fvecs_layout_matches_the_texmex_definition(tmp_path):
    # independent writer: int32 d then d little-endian float32, record after record
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    path = tmp_path / "hand.fvecs"
    with open(path, "wb") as fh:
        for row in x:
            fh.write(np.int32(3).tobytes())
            fh.write(row.astype("<f4").tobytes())
    np.testing.assert_array_equal(read_vecs(path), x)
    assert path.stat().st_size == 2 * (4 + 3 * 4)


def test_vecs_bad_input(tmp_path):
    with pytest.raises(ValueError, match="fvecs"):
        read_vecs(tmp_path / "x.npy")
    bad = tmp_path / "bad.fvecs"
    bad.write_bytes(np.int32(3).tobytes() + b"\0" * 5)
    with pytest.raises(ValueError, match="whole number of records"):
        read_vecs(bad)
    with pytest.raises(ValueError, match="exactly"):
        write_vecs(tmp_path / "x.bvecs", np.array([[300]]))


def test_fvecs_dataset_with_exact_ground_truth(tmp_path):
    rng = np.random.default_rng(3)
    xb, xq = rng.normal(size=(300, 8)).astype(np.float32), rng.normal(size=(40, 8))
    write_vecs(tmp_path / "base.fvecs", xb)
    write_vecs(tmp_path / "query.fvecs", xq.astype(np.float32))
    ds = load_ann_file(tmp_path / "base.fvecs", queries=tmp_path / "query.fvecs",
                       n_validation=10)
    np.testing.assert_array_equal(ds.xb, xb)
    assert len(ds.xv) == 10 and len(ds.xq) == 30
    _, gt = exact_knn(xb, ds.xq, 10)
    np.testing.assert_array_equal(ds.gt[:, :10], gt)
    with pytest.raises(ValueError, match="queries is required"):
        load_ann_file(tmp_path / "base.fvecs")


def test_hdf5_round_trip_and_angular_normalisation(tmp_path):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(4)
    train, test = rng.normal(size=(200, 6)).astype(np.float32), rng.normal(size=(20, 6))
    test = test.astype(np.float32)
    un = train / np.linalg.norm(train, axis=1, keepdims=True)
    uq = test / np.linalg.norm(test, axis=1, keepdims=True)
    neighbors = np.argsort(-(uq @ un.T), axis=1)[:, :10]      # cosine ranking, independent
    path = tmp_path / "toy-6-angular.hdf5"
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = "angular"
        f["train"], f["test"], f["neighbors"] = train, test, neighbors
    raw = read_hdf5(path)
    np.testing.assert_array_equal(raw["train"], train)
    np.testing.assert_array_equal(raw["neighbors"], neighbors)
    assert raw["distance"] == "angular"
    ds = load_ann_file(path, n_validation=5, random_state=1)
    np.testing.assert_allclose(np.linalg.norm(ds.xb, axis=1), 1, rtol=1e-6)
    # squared L2 on unit vectors ranks like cosine: exact search reproduces the file's truth
    _, gt = exact_knn(ds.xb, ds.xq, 10)
    np.testing.assert_array_equal(gt, ds.gt)
    assert len(ds.xv) == 5 and len(ds.xq) == 15


@pytest.mark.slow
def test_cli_runs_on_an_hdf5_file(tmp_path, capsys, monkeypatch):
    h5py = pytest.importorskip("h5py")
    from faiss.contrib.datasets import SyntheticDataset

    from causalkit.cli import main
    monkeypatch.setenv("CAUSALKIT_CACHE", str(tmp_path / "cache"))
    ds = SyntheticDataset(16, 0, 2000, 120, seed=2)
    _, gt = exact_knn(ds.get_database(), ds.get_queries(), 10)
    path = tmp_path / "toy-16-euclidean.hdf5"
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = "euclidean"
        f["train"], f["test"], f["neighbors"] = ds.get_database(), ds.get_queries(), gt
    assert main(["systems", "ann", "--dataset", str(path), "--family", "hnsw"]) == 0
    assert "hnsw diagnosis" in capsys.readouterr().out


def test_load_ann_takes_an_hdf5_path_and_the_cli_rejects_unknown_names(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    from causalkit.cli import main
    from causalkit.datasets.ann import load_ann

    rng = np.random.default_rng(6)
    path = tmp_path / "toy-4-euclidean.hdf5"
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = "euclidean"
        f["train"] = rng.normal(size=(50, 4)).astype(np.float32)
        f["test"] = rng.normal(size=(8, 4)).astype(np.float32)
        f["neighbors"] = rng.integers(0, 50, size=(8, 10))
    a, b = load_ann(str(path), random_state=3), load_ann_file(path, random_state=3)
    np.testing.assert_array_equal(a.xq, b.xq)
    np.testing.assert_array_equal(a.gt_val, b.gt_val)
    assert main(["systems", "ann", "--dataset", "no-such-set"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("causalkit systems ann: ") and "hdf5" in err
