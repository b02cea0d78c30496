"""Shared pytest configuration: the ``--runslow`` switch for study-sized tests."""

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow (full-size studies)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="study-sized test: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(scope="module")
def one_faiss_thread():
    """faiss on one thread for the module (timings and results of small indexes), restored
    afterwards; use with ``pytestmark = pytest.mark.usefixtures("one_faiss_thread")``."""
    faiss = pytest.importorskip("faiss")
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)
