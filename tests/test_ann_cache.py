"""load_ann checks its arguments before building anything, and writes its cache atomically."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from causalkit.datasets.ann import MAX_VECTORS, load_ann


@pytest.mark.parametrize("name", sorted(MAX_VECTORS))
def test_impossible_sizes_fail_before_any_build(name, tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALKIT_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="n_base"):
        load_ann(name, n_base=10**9)
    with pytest.raises(ValueError, match="exceeds"):
        load_ann(name, n_base=100, n_queries=MAX_VECTORS[name])
    assert not list(tmp_path.rglob("*.npz"))  # nothing was built or cached


@pytest.mark.parametrize("kwargs, match", [({"name": "sifty"}, "name"),
                                           ({"n_queries": 0}, "n_queries"),
                                           ({"n_base": 50}, "n_base"),
                                           ({"random_state": -1}, "random_state")])
def test_bad_arguments_name_the_argument(kwargs, match, tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALKIT_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match=match):
        load_ann(**kwargs)


# both processes import first, then start the build at the same wall-clock instant
_BUILD = ("import sys, time; from causalkit.datasets.ann import load_ann; "
          "time.sleep(max(0.0, float(sys.argv[1]) - time.time())); "
          "ds = load_ann('synthetic', n_base=300_000, n_queries=50, n_validation=50); "
          "print(float(ds.xb.sum()))")


@pytest.mark.parametrize("trial", range(3))
def test_concurrent_first_builds_both_succeed(trial, tmp_path):
    pytest.importorskip("faiss")
    env = {**os.environ, "CAUSALKIT_CACHE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    start = str(time.time() + 8)
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, start], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-1000:] for _, err in outs]
    assert outs[0][0] == outs[1][0]
    assert not list((tmp_path / "ann").glob("*.tmp*"))  # no temporary file left behind
    cached = list((tmp_path / "ann").glob("set_*.npz"))
    assert len(cached) == 1
    with np.load(cached[0], allow_pickle=False) as f:
        assert f["xb"].shape == (300_000, 64)
